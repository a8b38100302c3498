"""A streamed answer's chunked body read whole chunks at a time (`upstream.chunked`) gives
what http.client's own `read1` gives: the same bytes, the same error, the response left
closed the same way, whatever the chunks, their extensions, trailers, a malformed or cut
body, and however the socket's reads and the buffer split it."""

from __future__ import annotations

import http.client
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.shell.upstream.chunked import chunk_reader

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


class _Segments(io.RawIOBase):
    """A socket's reads: each gives at most the next segment of the bytes."""

    def __init__(self, segments: list[bytes]) -> None:
        self._segments = [s for s in segments if s]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if not self._segments:
            return 0
        segment = self._segments.pop(0)
        n = min(len(buffer), len(segment))
        buffer[:n] = segment[:n]
        if n < len(segment):
            self._segments.insert(0, segment[n:])
        return n


class _Socket:
    def __init__(self, fp: io.BufferedReader) -> None:
        self._fp = fp

    def makefile(self, mode: str) -> io.BufferedReader:
        return self._fp


def _response(body: bytes, cuts: list[int], buffer: int) -> http.client.HTTPResponse:
    wire = HEAD + body
    points = sorted({min(c, len(wire)) for c in cuts})
    segments = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    response = http.client.HTTPResponse(_Socket(io.BufferedReader(_Segments(segments),
                                                                  buffer)))  # type: ignore[arg-type]
    response.begin()
    return response


def _read(read: object, response: http.client.HTTPResponse, size: int,
          ) -> tuple[bytes, str | None, bool]:
    got = []
    error = None
    try:
        while data := read(size):  # type: ignore[operator]
            assert len(data) <= size  # as read1 promises
            got.append(data)
    except Exception as exc:  # what the stream's reader turns into its own error
        error = type(exc).__name__
    return b"".join(got), error, response.isclosed()


_data = st.binary(min_size=1, max_size=300)
_chunk = st.one_of(
    _data.map(lambda d: b"%x\r\n%s\r\n" % (len(d), d)),  # a plain chunk (most of them)
    _data.map(lambda d: b"%x\r\n%s\r\n" % (len(d), d)),
    _data.map(lambda d: b"%X;ext=1\r\n%s\r\n" % (len(d), d)),  # an extension, upper-case
    _data.map(lambda d: b"%x\n%s\r\n" % (len(d), d)),  # a bare LF
    _data.map(lambda d: b"0%x\r\n%s\r\n" % (len(d), d)),  # a leading zero
    _data.map(lambda d: b"%x\r\n%sXY" % (len(d), d)),  # not ended by a CRLF
    _data.map(lambda d: b"%x\r\n%s\r\n" % (len(d) + 1, d)),  # shorter than it says
    st.sampled_from([b"zz\r\n", b"3;\r\nabc\r\n", b"-1\r\n", b" 3 \r\nabc\r\n", b"0x3\r\nabc\r\n",
                     b"1_0\r\n" + b"a" * 16 + b"\r\n", b"\r\n"]),
)
_last = st.sampled_from([b"0\r\n\r\n", b"0\r\nTrailer: x\r\n\r\n", b"00;x\r\n\r\n", b"0\r\n",
                         b"", b"0\r\n\n"])


@settings(max_examples=400, deadline=None)
@given(chunks=st.lists(_chunk, max_size=12), last=_last,
       cut=st.none() | st.integers(0, 4000),
       cuts=st.lists(st.integers(0, 4200), max_size=8),
       buffer=st.sampled_from([16, 64, 200, 8192]), size=st.sampled_from([1, 7, 100, 262144]))
def test_the_same_as_http_client_reads(chunks: list[bytes], last: bytes, cut: int | None,
                                       cuts: list[int], buffer: int, size: int) -> None:
    body = b"".join(chunks) + last
    if cut is not None:
        body = body[:cut]
    mine = _response(body, cuts, buffer)
    theirs = _response(body, cuts, buffer)
    assert _read(chunk_reader(mine), mine, size) == _read(theirs.read1, theirs, size)


def test_whole_chunks_in_the_buffer_are_read_in_one_call() -> None:
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    response = _response(body, [], 8192)
    read = chunk_reader(response)
    assert read(262144) == b"hello world"
    assert read(262144) == b""
    assert response.isclosed()


def test_a_response_begun_or_unbuffered_is_read_by_http_client() -> None:
    response = _response(b"5\r\nhello\r\n0\r\n\r\n", [], 8192)
    response.read1(2)
    assert chunk_reader(response) == response.read1
