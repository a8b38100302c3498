"""The HTTP plumbing every fake inference server shares: a real threaded HTTP/1.1 server on
loopback that records each request and sends what a server-specific router answers.

A fake is a `FakeServer` whose `_route` answers one `Received` with one `Answer`; tests script
chat answers with `answer(...)` (a fixed Answer or a function of the request) or with a model
behaviour (`tests/fakes/models.py`) that the fake renders in its server's own shapes.
"""

from __future__ import annotations

import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from tests.fakes.models import Model, says


@dataclass
class Answer:
    """What the fake sends for one request."""

    status: int = 200
    body: Any = None  # dict/list → JSON; bytes → as is
    headers: dict[str, str] = field(default_factory=dict)
    header_lines: list[tuple[str, str]] = field(default_factory=list)  # repeatable names
    delay: float = 0.0  # seconds before the status line
    chunks: list[bytes] | None = None  # streamed with chunked encoding when set
    chunk_gap: float = 0.0
    cut_after: int | None = None  # close the connection after this many body bytes / chunks
    # Streams: after chunk i, wait this many seconds, or until the Event is set (at most 30 s).
    pauses: dict[int, float | threading.Event] = field(default_factory=dict)


@dataclass
class Received:
    """One request as the fake saw it."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> Any:
        """The body decoded as JSON."""
        return orjson.loads(self.raw)


def wait_unless_closed(connection: socket.socket, seconds: float) -> bool:
    """Sleep `seconds` like a model generating; False as soon as the client hangs up."""
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([connection], [], [], min(remaining, 0.02))
        if readable and connection.recv(1, socket.MSG_PEEK) == b"":
            return False
    return True


def send_answer(handler: BaseHTTPRequestHandler, answer: Answer) -> None:
    """Write `answer` on `handler`'s connection: JSON or bytes with a length, or chunks."""
    handler.send_response(answer.status)
    for key, value in [*answer.headers.items(), *answer.header_lines]:
        handler.send_header(key, value)
    if answer.chunks is not None:
        if "Content-Type" not in answer.headers:
            handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for sent, piece in enumerate(answer.chunks):
            if answer.cut_after is not None and sent >= answer.cut_after:
                handler.wfile.flush()
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            handler.wfile.flush()
            pause = answer.pauses.get(sent)
            if isinstance(pause, threading.Event):
                pause.wait(30)
            elif pause and not wait_unless_closed(handler.connection, pause):
                raise ConnectionResetError("client closed mid-stream")
            if answer.chunk_gap and not wait_unless_closed(handler.connection,
                                                           answer.chunk_gap):
                raise ConnectionResetError("client closed mid-stream")
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
        return
    body = answer.body
    if not isinstance(body, bytes):
        body = orjson.dumps(body)
        if "Content-Type" not in answer.headers:
            handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body if answer.cut_after is None else body[:answer.cut_after])
    if answer.cut_after is not None:
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)


def sse(body: Any) -> bytes:
    """One server-sent event carrying `body` as JSON (`data: …` and a blank line)."""
    return b"data: " + orjson.dumps(body) + b"\n\n"


class _Server(ThreadingHTTPServer):
    """The HTTP server, quiet about a client that hung up or a socket closed under it (a
    test closing its fake while the SDK's keep-alive connection is still open)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, OSError)):
            super().handle_error(request, client_address)


class FakeServer:
    """A fake inference server on a free loopback port; subclasses answer in `_route`.

    `chat_path` is where the server takes chat completions (`chat_requests` lists those)."""

    chat_path = "/v1/chat/completions"

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.disconnects: list[tuple[Received, float]] = []  # client closed before the end
        self._answer: Callable[[Received], Answer] | None = None
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                received = Received(self.command, self.path, dict(self.headers.items()), raw)
                with fake._lock:
                    fake.received.append(received)
                answer = fake._route(received)
                if answer.delay and not wait_unless_closed(self.connection, answer.delay):
                    fake._saw_disconnect(received)
                    self.close_connection = True
                    return
                try:
                    send_answer(self, answer)
                except (BrokenPipeError, ConnectionResetError):
                    fake._saw_disconnect(received)
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _handle

            def do_HEAD(self) -> None:
                self._handle()

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _route(self, received: Received) -> Answer:
        raise NotImplementedError

    def _saw_disconnect(self, received: Received) -> None:
        with self._lock:
            self.disconnects.append((received, time.monotonic()))

    def first_disconnect(self, within: float = 5.0) -> float | None:
        """When (time.monotonic) the first client of this server left before its answer's
        end, waiting up to `within` seconds for one; None if none did."""
        deadline = time.monotonic() + within
        while not self.disconnects and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.disconnects[0][1] if self.disconnects else None

    def wait_chat_requests(self, count: int = 1, within: float = 10.0) -> bool:
        """Wait up to `within` seconds until this server has received `count` chat completion
        requests (a client's request may take a while to get through a loaded machine)."""
        deadline = time.monotonic() + within
        while len(self.chat_requests()) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self.chat_requests()) >= count

    def answer(self, answer: Answer | Callable[[Received], Answer]) -> None:
        """Script the next chat answers: one fixed Answer, or a function of the request."""
        self._answer = answer if callable(answer) else (lambda r: answer)

    def chat_requests(self) -> list[Received]:
        """The chat completion requests received so far."""
        return [r for r in self.received if r.path.startswith(self.chat_path)]

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


class ModelServer(FakeServer):
    """A fake server whose chat answers a model behaviour generates (`behave`), rendered by
    the subclass's `_generated` as that server renders them; `answer` scripts them instead."""

    def __init__(self) -> None:
        self._behaviour: Model = says("Hello from the fake.")
        super().__init__()
        self._answer = self._generated

    def behave(self, model: Model) -> None:
        """Answer chat completions with what `model` generates, as this server renders it."""
        self._behaviour = model
        self._answer = self._generated

    def _generated(self, received: Received) -> Answer:
        raise NotImplementedError
