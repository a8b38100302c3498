"""`OneSendResponse.process_headers` keeps what gunicorn's `Response` keeps of an app's headers
(the same list, Content-Length, upgrade and framing), or refuses what it refuses, with the
same error, for any list of them: names it has kept before and new ones, hop-by-hop ones,
Content-Length, names and values not strings, values with control characters."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gunicorn.http.wsgi import Response
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.shell.server import response
from proxy.shell.server.response import OneSendResponse

_NAMES = st.one_of(
    st.sampled_from(["Content-Type", "X-Request-Id", "Server-Timing", "Cache-Control",
                     "Content-Length", "content-length", "Connection", "Upgrade", "Keep-Alive",
                     "Transfer-Encoding", "Date", "Server", "TE", "Bad Name", "", "X:Y",
                     "Ünï", b"X-Bytes", 7]),
    st.text(alphabet="abXY-_!:é ", min_size=0, max_size=5))
_VALUES = st.one_of(
    st.sampled_from(["text/event-stream", " no-cache\t", "upgrade", "websocket", "close",
                     "12", "0", "x", b"bytes", None, "a\r\nb", "\x7f", "é"]),
    st.text(alphabet="ab 1\t\x01é", max_size=6))


def _outcome(kind: type[Response], headers: list[Any]) -> Any:
    req = SimpleNamespace(method="GET", version=(1, 1), should_close=lambda: False)
    resp = kind(req, None, SimpleNamespace(sendfile=True, is_ssl=False))
    try:
        resp.start_response("200 OK", headers)
    except Exception as exc:  # (each refusal, as gunicorn raised it)
        return type(exc), str(exc)
    return resp.headers, resp.response_length, resp.upgrade, resp.chunked


@settings(max_examples=800, deadline=None)
@given(st.lists(st.lists(st.tuples(_NAMES, _VALUES), max_size=6), min_size=1, max_size=3))
def test_the_headers_gunicorn_keeps_or_its_refusal(lists):
    for headers in lists:  # (names kept by an earlier response, then new ones)
        assert _outcome(OneSendResponse, list(headers)) == _outcome(Response, list(headers))


def test_a_name_is_looked_at_once_and_few_are_kept(monkeypatch):
    monkeypatch.setattr(response, "_KEPT_NAMES", set())
    monkeypatch.setattr(response, "NAMES_KEPT", 2)
    for name in ("Connection", "Content-Length", "A", "A", "B", "C"):
        _outcome(OneSendResponse, [(name, "1")])
    assert sorted(response._KEPT_NAMES) == ["A", "B"]
