"""How tests read the proxy as a client: raw HTTP over a socket, and an SDK stream read on a
thread so that a test can look at what has arrived while upstream is paused."""

from __future__ import annotations

import queue
import socket
import threading
import time
from typing import Any

import orjson

READ_LIMIT = 20  # seconds: a stream read on a thread waits at most this for its next chunk


def raw_request(url: str, body: dict) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    payload = orjson.dumps(body)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(payload), payload))
    return sock


def read_until(sock: socket.socket, marker: bytes, limit: float = 10) -> bytes:
    data = b""
    deadline = time.monotonic() + limit
    while marker not in data and time.monotonic() < deadline:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    return data


def exchange(port: int, request: bytes) -> bytes:
    """Send `request` whole and read the answer until the server closes. A server that stops
    reading mid-request resets the connection after its answer: what arrived first counts."""
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(request)
            while piece := sock.recv(65536):
                data += piece
        except (ConnectionResetError, BrokenPipeError):
            pass
    return data


class Reader:
    """Reads an SDK stream on a thread, so that the test can look at what has arrived while
    upstream is paused."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.chunks: queue.Queue[Any] = queue.Queue()
        self.seen: list[Any] = []
        self.error: Exception | None = None
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            for chunk in self.stream:
                self.chunks.put(chunk)
        except Exception as exc:
            self.error = exc
        self.chunks.put(None)

    def next_where(self, test: Any) -> Any:
        """The next chunk for which `test` holds (None when the stream ended first)."""
        while (chunk := self.chunks.get(timeout=READ_LIMIT)) is not None:
            self.seen.append(chunk)
            if test(chunk):
                return chunk
        return None

    def rest(self) -> list[Any]:
        self.next_where(lambda chunk: False)
        return self.seen


def delta(chunk: Any) -> dict[str, Any]:
    return chunk.choices[0].delta.model_dump(exclude_none=True) if chunk.choices else {}
