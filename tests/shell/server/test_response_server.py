"""Whole responses of `python app.py` (gunicorn, gevent workers, `OneSendResponse`) read off
one raw keep-alive connection, byte for byte: gunicorn's head (its status line, Server,
Date, Connection, Transfer-Encoding when chunked, then the app's headers in the app's
order), a body framed exactly (Content-Length, or chunks each with its size, ending in
the terminator), nothing before the next response; HEAD and a chunked stream alike."""

from __future__ import annotations

import re
import socket
import struct
import time

import orjson
import pytest

from proxy.shell.server.response import OneSendResponses
from proxy.shell.server.serve import _worker_class
from tests.conftest import TOOLS
from tests.fake_vllm import MODEL, Answer, vllm_stream_chunks
from tests.serving import served

pytestmark = pytest.mark.integration


class _Reader:
    """A strict reader of HTTP/1.1 responses off a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.data = b""

    def _more(self) -> None:
        piece = self.sock.recv(65536)
        assert piece, "the connection closed mid-response"
        self.data += piece

    def take(self, count: int) -> bytes:
        while len(self.data) < count:
            self._more()
        taken, self.data = self.data[:count], self.data[count:]
        return taken

    def line(self) -> bytes:
        while b"\r\n" not in self.data:
            self._more()
        line, self.data = self.data.split(b"\r\n", 1)
        return line

    def response(self, method: str = "GET") -> tuple[bytes, list[tuple[str, str]], bytes]:
        """(status line, headers in order, body as it came on the wire)."""
        status = self.line()
        headers = []
        while line := self.line():
            name, _, value = line.decode("latin-1").partition(": ")
            headers.append((name, value))
        fields = {name.lower(): value for name, value in headers}
        if method == "HEAD":
            return status, headers, b""
        if "content-length" in fields:
            return status, headers, self.take(int(fields["content-length"]))
        assert fields["transfer-encoding"] == "chunked"
        wire = b""
        while True:
            size_line = self.line()
            assert re.fullmatch(rb"[0-9A-F]+", size_line), size_line  # gunicorn's %X
            size = int(size_line, 16)
            chunk = self.take(size + 2)
            assert chunk.endswith(b"\r\n")
            wire += size_line + b"\r\n" + chunk
            if size == 0:
                assert chunk == b"\r\n"
                return status, headers, wire


def _gunicorn_s_head(headers: list[tuple[str, str]], chunked: bool) -> None:
    names = [name for name, _ in headers]
    assert names[:3] == ["Server", "Date", "Connection"]
    assert ("Transfer-Encoding" in names) == chunked
    if chunked:
        assert names[3] == "Transfer-Encoding"
    assert dict(headers)["Connection"] == "keep-alive"


def _chat(stream: bool) -> bytes:
    body = orjson.dumps({"model": MODEL, "stream": stream,
                         "messages": [{"role": "user", "content": "hi"}]})
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)) + body


def test_the_gevent_worker_answers_through_one_send_responses():
    assert issubclass(_worker_class("gevent"), OneSendResponses)
    assert not issubclass(_worker_class("sync"), OneSendResponses)


def test_whole_responses_on_one_connection_are_framed_exactly(fake):
    health = b"GET /proxy/health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    head = b"HEAD /proxy/health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    with served(fake.url) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        reader = _Reader(sock)

        sock.sendall(health)
        status, headers, body = reader.response()
        assert status == b"HTTP/1.1 200 OK"
        _gunicorn_s_head(headers, chunked=False)
        assert orjson.loads(body)

        sock.sendall(head)
        status, headers, body = reader.response("HEAD")
        assert status == b"HTTP/1.1 200 OK"
        _gunicorn_s_head(headers, chunked=False)

        sock.sendall(_chat(stream=True))
        status, headers, wire = reader.response()
        assert status == b"HTTP/1.1 200 OK"
        _gunicorn_s_head(headers, chunked=True)
        assert dict(headers)["Content-Type"].startswith("text/event-stream")
        assert wire.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")

        sock.sendall(_chat(stream=False))
        status, headers, body = reader.response()
        assert status == b"HTTP/1.1 200 OK"
        _gunicorn_s_head(headers, chunked=False)
        assert orjson.loads(body)["choices"][0]["message"]["role"] == "assistant"

        sock.sendall(health)  # and the connection still serves, nothing left over between
        assert reader.response()[0] == b"HTTP/1.1 200 OK"
        assert reader.data == b""


def test_a_client_gone_mid_stream_is_seen_and_its_turn_ended(fake):
    """The client reads the stream's head and first event, then leaves: a later write finds
    it gone, the turn ends as the client's leaving (its log line says so), and the worker
    serves on."""
    fake.answer(Answer(chunks=vllm_stream_chunks("one two three four five six seven eight",
                                                 pieces=8), chunk_gap=0.3))
    settings = {"TOOLCALL_PROXY_STREAM_MODE": "stream"}
    body = orjson.dumps({"model": MODEL, "stream": True, "tools": TOOLS,
                         "messages": [{"role": "user", "content": "hi"}]})
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
               ) + body
    with served(fake.url, settings) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(request)
        reader = _Reader(sock)
        assert reader.line() == b"HTTP/1.1 200 OK"
        while b"data: " not in reader.data:
            reader._more()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # (a reset: the next write fails at once)
        time.sleep(3)  # past the upstream's last token (8 of them, 0.3 s apart)
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as again:
            again.sendall(b"GET /proxy/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert _Reader(again).response()[0] == b"HTTP/1.1 200 OK"
    turns = [line for line in server.log.splitlines() if "/v1/chat/completions" in line]
    assert len(turns) == 1, server.log
    assert '"client_disconnected"' in turns[0], turns[0]
