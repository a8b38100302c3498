"""OneSendResponse writes what gunicorn's Response writes, byte for byte, in fewer sends: the
head with the body's first bytes. Against a fake socket recording each sendall."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from gunicorn.http.wsgi import Response
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.shell.server.response import JOIN_MAX, OneSendResponse


class _Socket:
    """A client socket as a response sees it: each send or sendall recorded, a send taking
    at most `piece` bytes; the client gone once `limit` bytes have come (a send past them
    raises, as a broken pipe does)."""

    def __init__(self, limit: int | None = None, piece: int | None = None) -> None:
        self.sends: list[bytes] = []
        self.limit = limit
        self.piece = piece
        self.taken = 0

    def _take(self, data: bytes) -> None:
        if self.limit is not None and self.taken + len(data) > self.limit:
            raise BrokenPipeError(32, "Broken pipe")
        self.taken += len(data)
        self.sends.append(bytes(data))

    def send(self, data: bytes) -> int:
        data = bytes(data)[:self.piece]
        self._take(data)
        return len(data)

    def sendall(self, data: bytes) -> None:
        self._take(bytes(data))


def _request(method: str = "GET", version: tuple[int, int] = (1, 1),
             close: bool = False) -> Any:
    return SimpleNamespace(method=method, version=version, should_close=lambda: close)


_CFG = SimpleNamespace(sendfile=True, is_ssl=False)


def _dated(kind: type[Response]) -> type[Response]:
    """`kind` with its Date header one fixed value (the two runs compared may straddle a
    second)."""
    class Dated(kind):  # type: ignore[valid-type, misc]
        def default_headers(self) -> list[str]:
            return [("Date: -\r\n" if line.startswith("Date: ") else line)
                    for line in super().default_headers()]
    return Dated


_GUNICORN = _dated(Response)
_OURS = _dated(OneSendResponse)


def _run(kind: type[Response], req: Any, status: str, headers: list[tuple[str, str]],
         items: list[bytes], limit: int | None = None,
         piece: int | None = None) -> tuple[list[bytes], int | None]:
    """The sends of `kind` serving `items`, as gunicorn's worker drives a response, and the
    step (a write, or the close after them) that saw the client gone, if one did."""
    sock = _Socket(limit, piece)
    response = kind(req, sock, _CFG)
    response.start_response(status, list(headers))
    step = 0
    try:
        for item in items:
            response.write(item)
            step += 1
        response.close()
    except BrokenPipeError:
        return sock.sends, step
    return sock.sends, None


def _wire(sends: list[bytes]) -> bytes:
    return b"".join(sends)


_NAMES = st.sampled_from(["Content-Type", "X-Request-Id", "Cache-Control", "Set-Cookie",
                          "X-Accel-Buffering", "Connection", "Content-Length"])
_HEADERS = st.lists(st.tuples(_NAMES, st.sampled_from(["text/event-stream", "no-cache", "a=b",
                                                       "close", "keep-alive", "1"])),
                    max_size=5)
_ITEMS = st.lists(st.one_of(st.just(b""), st.binary(min_size=1, max_size=40)), max_size=5)


@settings(max_examples=400, deadline=None)
@given(method=st.sampled_from(["GET", "POST", "HEAD"]),
       version=st.sampled_from([(1, 0), (1, 1)]),
       close=st.booleans(),
       status=st.sampled_from(["200 OK", "201 Created", "204 No Content",
                               "304 Not Modified", "404 Not Found", "500 Oops"]),
       headers=_HEADERS,
       length=st.one_of(st.none(), st.integers(0, 60)),
       items=_ITEMS,
       gone_after=st.one_of(st.none(), st.integers(0, 400)),
       piece=st.one_of(st.none(), st.integers(1, 50)))
def test_the_same_bytes_as_gunicorn_s_response(method, version, close, status, headers,
                                               length, items, gone_after, piece):
    headers = [(k, v) for k, v in headers if k != "Content-Length"]
    if length is not None:
        headers.append(("Content-Length", str(length)))
    theirs, their_gone = _run(_GUNICORN, _request(method, version, close), status,
                              headers, items, gone_after)
    ours, our_gone = _run(_OURS, _request(method, version, close), status, headers, items,
                          gone_after, piece)
    assert our_gone == their_gone  # a client gone is seen at the same write (or close)
    if their_gone is None:
        assert _wire(ours) == _wire(theirs)
        if piece is None:  # (a socket that takes every send whole)
            assert len(ours) <= len(theirs)
    else:  # what got out before is the start of the whole response, as gunicorn's is
        whole, _ = _run(_GUNICORN, _request(method, version, close), status, headers,
                        items)
        assert _wire(whole).startswith(_wire(ours))


def _one(status: str, headers: list[tuple[str, str]], items: list[bytes],
         method: str = "GET") -> list[bytes]:
    sends, gone = _run(OneSendResponse, _request(method), status, headers, items)
    assert gone is None
    return sends


def test_a_sized_body_goes_with_its_head_in_one_send():
    body = b'{"id": "x"}'
    [send] = _one("200 OK", [("Content-Type", "application/json"),
                             ("Content-Length", str(len(body)))], [body])
    head, rest = send.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\nServer: ")
    assert b"\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n" \
           b"Content-Length: 11" in head + b"\r\n"
    assert rest == body


def test_a_stream_s_first_event_goes_with_its_head_then_each_alone_then_the_end():
    sends = _one("200 OK", [("Content-Type", "text/event-stream")],
                 [b"data: 1\n\n", b"data: 2\n\n"])
    assert len(sends) == 3
    assert sends[0].endswith(b"\r\nTransfer-Encoding: chunked\r\n"
                             b"Content-Type: text/event-stream\r\n\r\n9\r\ndata: 1\n\n\r\n")
    assert sends[1:] == [b"9\r\ndata: 2\n\n\r\n", b"0\r\n\r\n"]


def test_an_empty_first_write_sends_the_head_at_once_alone():
    sends = _one("200 OK", [("Content-Type", "text/event-stream")], [b"", b"data: 1\n\n"])
    assert sends[0].endswith(b"Content-Type: text/event-stream\r\n\r\n")
    assert sends[1:] == [b"9\r\ndata: 1\n\n\r\n", b"0\r\n\r\n"]


def test_a_chunked_response_with_no_body_sends_head_and_end_together():
    [send] = _one("200 OK", [("Content-Type", "text/plain")], [])
    assert send.endswith(b"Transfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
                         b"0\r\n\r\n")


@pytest.mark.parametrize(("status", "method"), [("204 No Content", "GET"),
                                                ("304 Not Modified", "GET"),
                                                ("200 OK", "HEAD")])
def test_a_response_without_a_body_sends_its_head_alone(status, method):
    [send] = _one(status, [("Content-Length", "5")], [b"hello"], method=method)
    assert send.endswith(b"\r\n\r\n")
    assert b"hello" not in send


def test_a_large_sized_body_is_not_copied_behind_its_head():
    body = b"x" * (JOIN_MAX + 1)
    sends = _one("200 OK", [("Content-Length", str(len(body)))], [body])
    assert len(sends) == 2
    assert sends[1] == body
    assert sends[0].endswith(b"\r\n\r\n")


def test_a_body_longer_than_its_length_is_cut_to_it():
    [send] = _one("200 OK", [("Content-Length", "3")], [b"abcdef", b"gh"])
    assert send.endswith(b"\r\n\r\nabc")


def test_what_a_send_did_not_take_goes_by_sendall():
    sock = _Socket(piece=10)
    response = OneSendResponse(_request(), sock, _CFG)
    response.start_response("200 OK", [("Content-Length", "40")])
    response.write(b"x" * 40)
    assert len(sock.sends) == 2
    assert len(sock.sends[0]) == 10
    assert b"".join(sock.sends).endswith(b"\r\n\r\n" + b"x" * 40)


def test_a_client_gone_before_the_first_event_is_seen_at_its_write():
    sends, gone = _run(OneSendResponse, _request(), "200 OK",
                       [("Content-Type", "text/event-stream")], [b"data: 1\n\n"], limit=0)
    assert (sends, gone) == ([], 0)
