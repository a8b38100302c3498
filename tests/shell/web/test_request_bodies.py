"""Slow and malformed request bodies against gunicorn as shipped (`gunicorn -c
deploy/gunicorn.conf.py app:app`): a body that stalls or drips is cut at its deadline (a 408),
stalled bodies do not hold the server, malformed chunked framing and a body shorter than its
length are a 400 with nothing upstream and no body in the log (an adversarial probe of the
production server, issue 22)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import orjson
import pytest
import requests

from tests.conftest import TOOLS
from tests.serving import ROOT, free_port, stop, wait_healthy

pytestmark = pytest.mark.integration

USER = [{"role": "user", "content": "hi"}]
BODY_TIMEOUT = 1.5


class Gunicorn:
    """The proxy under `gunicorn -c deploy/gunicorn.conf.py app:app`, as production runs it."""

    def __init__(self, upstream: str, **settings: str) -> None:
        self.port = free_port()
        env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": upstream,
               "TOOLCALL_PROXY_PORT": str(self.port), "GUNICORN_WORKERS": "1",
               **{f"TOOLCALL_PROXY_{k.upper()}": v for k, v in settings.items()}}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "app:app"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_healthy(self.url, self.process, seconds=30)
        self.log = ""

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=15)

    def stop(self) -> str:
        self.log = stop(self.process)
        return self.log


@pytest.fixture
def gunicorn(fake) -> Iterator[Gunicorn]:
    server = Gunicorn(fake.url, body_timeout_seconds=str(BODY_TIMEOUT))
    yield server
    server.stop()


@pytest.fixture
def keyed_gunicorn(fake) -> Iterator[Gunicorn]:
    server = Gunicorn(fake.url, body_timeout_seconds=str(BODY_TIMEOUT), api_keys="sk-one")
    yield server
    server.stop()


def _head(path: str = "/v1/chat/completions", length: int | None = 1000,
          extra: bytes = b"") -> bytes:
    framing = (b"Content-Length: %d\r\n" % length if length is not None
               else b"Transfer-Encoding: chunked\r\n")
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\n" + framing + extra + b"\r\n")


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass  # closed with the client's unread bytes still queued: the answer came first
    return data


def _status_and_body(data: bytes) -> tuple[int, dict]:
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"chunked" in head.lower():
        size, _, rest = body.partition(b"\r\n")
        body = rest[:int(size, 16)]
    return status, json.loads(body)


def _stalled(server: Gunicorn, data: bytes) -> tuple[float, bytes]:
    """Send `data` and go silent: (seconds until the server closed, what it answered)."""
    with server.connect() as sock:
        sock.sendall(data)
        started = time.monotonic()
        answer = _read_all(sock)
        return time.monotonic() - started, answer


@pytest.mark.parametrize("server_name", ["gunicorn", "keyed_gunicorn"])
def test_a_body_that_stalls_is_a_408_and_the_connection_closes(server_name, request, fake):
    server = request.getfixturevalue(server_name)
    elapsed, answer = _stalled(server, _head() + b'{"model": "q", "messa')
    assert elapsed < BODY_TIMEOUT + 5
    if answer:  # the answer is sent before the close (a reset may overtake it)
        status, body = _status_and_body(answer)
        assert status == 408
        assert body["error"]["code"] == "request_timeout"
    assert fake.chat_requests() == []


def test_a_body_dripping_a_byte_at_a_time_is_cut_at_the_deadline(gunicorn):
    with gunicorn.connect() as sock:
        sock.sendall(_head(length=10_000))
        started = time.monotonic()
        sock.settimeout(0.3)
        closed = False
        while time.monotonic() - started < BODY_TIMEOUT + 5:
            try:
                sock.sendall(b" ")
                if sock.recv(65536) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except OSError:  # reset, or the answer already read: the server has ended it
                closed = True
                break
        assert closed
        assert time.monotonic() - started < BODY_TIMEOUT + 5


def test_stalled_bodies_do_not_hold_the_server(gunicorn):
    sockets = []
    try:
        for _ in range(50):
            sock = gunicorn.connect()
            sock.sendall(_head() + b"{")
            sockets.append(sock)
        started = time.monotonic()
        assert requests.get(gunicorn.url + "/proxy/health", timeout=10).status_code == 200
        assert time.monotonic() - started < 5
        time.sleep(BODY_TIMEOUT + 1)
        for sock in sockets:  # every one of them has been closed by now
            sock.settimeout(5)
            assert _read_all(sock) is not None
            assert sock.recv(1) == b""
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize("body", [
    b"zz\r\n{}\r\n0\r\n\r\n",  # a chunk size that is not hex
    b'{"model": "q", "messages": []}\r\n\r\n',  # announced as chunked, sent plain
])
def test_malformed_chunked_framing_is_a_400_with_no_body_in_the_log(gunicorn, fake, body):
    marker = b"SECRET-PROMPT-TEXT"
    with gunicorn.connect() as sock:
        sock.sendall(_head(length=None, extra=b"Connection: close\r\n")
                     + body.replace(b"[]", b'["' + marker + b'"]'))
        status, envelope = _status_and_body(_read_all(sock))
    assert status == 400
    assert envelope["error"]["code"] == "malformed_body"
    assert fake.chat_requests() == []
    log = gunicorn.stop()
    assert "Traceback" not in log
    assert marker.decode() not in log


def test_a_body_shorter_than_its_length_then_a_half_close_is_refused(gunicorn, fake):
    body = orjson.dumps({"model": "q", "messages": USER, "tools": TOOLS})
    with gunicorn.connect() as sock:
        sock.sendall(_head(length=len(body) + 50) + body)
        sock.shutdown(socket.SHUT_WR)
        status, envelope = _status_and_body(_read_all(sock))
    assert status == 400
    assert envelope["error"]["code"] == "malformed_body"
    assert fake.chat_requests() == []
