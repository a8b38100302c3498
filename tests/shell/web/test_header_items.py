"""The request's headers as the door reads them from the environ: what Werkzeug's
`request.headers.items()` gives, for any environ (names, values, order)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import EnvironHeaders

from proxy.shell.web.door import header_items

KEYS = st.sampled_from(["HTTP_HOST", "HTTP_X_REQUEST_ID", "HTTP_CONTENT_TYPE",
                        "HTTP_CONTENT_LENGTH", "CONTENT_TYPE", "CONTENT_LENGTH",
                        "HTTP_ACCEPT_ENCODING", "HTTP_", "HTTP__X", "HTTPS", "PATH_INFO",
                        "wsgi.input", "HTTP_X_ÉTÉ_1", "http_lower"]) | st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, st.sampled_from(["", "v", "a, b", "é"]) | st.text(max_size=8),
                       max_size=12))
def test_header_items_are_werkzeugs(environ) -> None:
    assert header_items(environ) == list(EnvironHeaders(environ).items())
