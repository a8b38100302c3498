"""The response every view hands the WSGI server: Flask's, its head given in one pass.

Werkzeug's `get_wsgi_response` copies the response's headers into a new `Headers` (each one
through `add`, which checks the value again), looks through them for Location and
Content-Location, then lists them: some twenty Python calls a response for headers already
checked when they were set. Here, when there is neither Location nor Content-Location (which
Werkzeug rewrites) and the status is one whose headers it leaves alone (not 1xx, 204 or
304), the list is the headers' own, copied once, with the Content-Length Werkzeug would add
(tests/shell/runtime/test_wire.py compares the two); else Werkzeug's own.

A response's own fixed headers (a stream's content type and cache headers) are checked by
Werkzeug once (`fixed_headers`), not once a response: Werkzeug's `Headers` checks every value
as it is added, some ten Python calls a header; a relayed answer's, in one pass
(`checked_headers`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from flask import Response as FlaskResponse
from werkzeug.datastructures import Headers

if TYPE_CHECKING:
    from collections.abc import Iterable

    from _typeshed.wsgi import WSGIEnvironment


class Response(FlaskResponse):
    """Flask's response, with `get_wsgi_response` in one pass where it can be."""

    def get_wsgi_response(self, environ: WSGIEnvironment
                          ) -> tuple[Iterable[bytes], str, list[tuple[str, str]]]:
        status = self.status_code
        if status < 200 or status in (204, 304):
            return super().get_wsgi_response(environ)
        headers = self.headers.to_wsgi_list()
        length = None
        for name, value in headers:
            lower = name.lower()
            if lower == "content-length":
                length = value
            elif lower == "location" or lower == "content-location":
                return super().get_wsgi_response(environ)
        if length is None and self.automatically_set_content_length and self.is_sequence:
            headers.append(("Content-Length", str(sum(len(x) for x in self.iter_encoded()))))
        return self.get_app_iter(environ), self.status, headers


def fixed_headers(items: tuple[tuple[str, str], ...]) -> Headers:
    """`Headers(items)`, a fresh one, its values checked by Werkzeug the first time `items`
    is asked for (a few kinds: each front's stream head)."""
    headers = Headers()
    headers._list = list(_checked(items))  # (Headers' own list, as its `add` makes it)
    return headers


@lru_cache(maxsize=16)
def _checked(items: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """`items` as Werkzeug's Headers holds them (its ValueError for a value it refuses)."""
    return tuple(Headers(items))


def checked_headers(items: list[tuple[str, str]]) -> Headers:
    """`Headers(items)`, made in one pass when every value is a string without a CR or LF
    (what Werkzeug's `add` checks of each value, three Python calls a header: a relayed
    answer's head, read off the wire as lines, holds no other); else Werkzeug's own way,
    its ValueError included."""
    try:
        values = "".join([value for _, value in items])
    except TypeError:
        return Headers(items)
    if "\r" in values or "\n" in values:
        return Headers(items)
    headers = Headers()
    headers._list = [(name, value) for name, value in items]  # (as its `add` makes them)
    return headers
