"""The proxy's response gives the WSGI server what Flask's own would: the same body, status
and header list, for any headers, status and body (a property, against Werkzeug's); fixed
headers checked once are the Headers Werkzeug makes of them, each response its own."""

from __future__ import annotations

import pytest
from flask import Response as FlaskResponse
from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import Headers

from proxy.shell.runtime.wire import Response, checked_headers, fixed_headers

NAMES = st.sampled_from(["Content-Type", "Content-Length", "content-length", "Location",
                         "location", "Content-Location", "X-Request-Id", "Cache-Control",
                         "Set-Cookie", "Server-Timing"])
VALUES = st.text(st.characters(min_codepoint=32, max_codepoint=0x2fff), max_size=12)
STATUSES = st.sampled_from([100, 101, 199, 200, 201, 204, 206, 301, 302, 304, 400, 404, 412,
                            500, 503])
BODIES = st.one_of(st.none(), st.binary(max_size=20), st.text(max_size=20),
                   st.lists(st.binary(max_size=8), max_size=3),
                   st.lists(st.binary(max_size=8), max_size=3).map(iter))


def _environ(method: str) -> dict[str, object]:
    return {"REQUEST_METHOD": method, "wsgi.url_scheme": "http", "SERVER_NAME": "proxy",
            "SERVER_PORT": "8080", "HTTP_HOST": "proxy:8080", "PATH_INFO": "/v1/x",
            "SCRIPT_NAME": "", "QUERY_STRING": ""}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NAMES, VALUES), max_size=6), STATUSES, BODIES,
       st.sampled_from(["GET", "POST", "HEAD"]), st.sampled_from([None, "application/json"]),
       st.booleans())
def test_the_wsgi_response_is_werkzeugs(headers, status, body, method, content_type, added):
    def build(kind: type[FlaskResponse]) -> FlaskResponse:
        response = kind(list(body) if isinstance(body, list) else body, status=status,
                        headers=headers, content_type=content_type)
        if added:  # as the app's hooks add theirs
            response.headers["X-Request-Id"] = "abc"
            response.headers.add("Server-Timing", "total;dur=1.0")
        return response

    ours, theirs = build(Response), build(FlaskResponse)
    ours_iter, ours_status, ours_headers = ours.get_wsgi_response(_environ(method))
    their_iter, their_status, their_headers = theirs.get_wsgi_response(_environ(method))
    assert (ours_status, ours_headers) == (their_status, their_headers)
    assert list(ours.headers) == list(theirs.headers)  # neither touched its own headers
    if not isinstance(body, list) and body is not None and not isinstance(body, str | bytes):
        return  # (one iterator, shared: read by whichever goes first)
    assert list(ours_iter) == list(their_iter)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(NAMES, VALUES | st.sampled_from(["text/event-stream", "a\rb",
                                                          "a\nb", ""])), max_size=4))
def test_fixed_headers_are_werkzeugs(items):
    items = tuple(items)
    try:
        expected = Headers(items)
    except ValueError:
        with pytest.raises(ValueError, match="newline"):
            fixed_headers(items)
        return
    for _ in range(2):  # checked, then kept
        headers = fixed_headers(items)
        assert type(headers) is Headers
        assert headers == expected
        assert headers.to_wsgi_list() == expected.to_wsgi_list()


def test_fixed_headers_are_each_responses_own():
    items = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))
    first = fixed_headers(items)
    first["X-Request-Id"] = "one"
    first.add("Server-Timing", "proxy;dur=1")
    assert fixed_headers(items).to_wsgi_list() == list(items)
    response = Response(iter([b"x"]), headers=fixed_headers(items))
    assert response.headers.to_wsgi_list() == list(items)
    assert response.mimetype == "text/event-stream"


_ANY_VALUES = st.one_of(st.text(st.sampled_from("ab \t\r\n:é"), max_size=6), st.integers(0, 9),
                        st.none())


def _made(make, items):
    try:
        return make(items)._list
    except (ValueError, TypeError) as exc:
        return type(exc), str(exc)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(NAMES, _ANY_VALUES), max_size=6))
def test_checked_headers_are_the_headers_werkzeug_makes(items):
    assert _made(checked_headers, items) == _made(Headers, items)
    plain = [(n, v) for n, v in items if isinstance(v, str) and "\r" not in v and "\n" not in v]
    assert isinstance(checked_headers(plain), Headers)
