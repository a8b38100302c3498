"""What an adversarial probe of the production server found (issue 22), as regressions: slow
and malformed bodies against gunicorn as shipped, preflights and health probes that must not
reach upstream, integers that must reach it exactly."""

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
from tests.fake_vllm import Answer, vllm_completion
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


# -- preflights, health probes -------------------------------------------------------------

PREFLIGHT = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization,content-type"}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models", "/anything/else"])
def test_a_preflight_is_answered_by_the_proxy_and_never_reaches_upstream(
        fake, start_proxy, path):
    proxy = start_proxy(api_keys=["sk-one"], upstream_api_key="sk-upstream",
                        allowed_origins=["http://localhost:3000"])
    reply = requests.options(proxy.url + path, headers=PREFLIGHT, timeout=5,
                             data=orjson.dumps({"model": "anything"}))
    assert reply.status_code == 204
    assert reply.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
    assert "POST" in reply.headers["Access-Control-Allow-Methods"]
    assert reply.headers["Access-Control-Allow-Headers"] == "authorization,content-type"
    assert fake.received == []


def test_a_preflight_from_an_origin_not_listed_is_refused(fake, start_proxy):
    proxy = start_proxy()  # no origin is allowed by default
    reply = requests.options(proxy.url + "/v1/chat/completions", headers=PREFLIGHT, timeout=5)
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in reply.headers
    assert fake.received == []


def test_an_allowed_origin_can_read_the_answer_and_still_needs_a_key(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-one"], allowed_origins=["*"])
    origin = {"Origin": "http://app.example"}
    refused = requests.get(proxy.url + "/v1/models", headers=origin, timeout=5)
    assert refused.status_code == 401
    keyed = requests.get(proxy.url + "/v1/models", timeout=5,
                         headers={**origin, "Authorization": "Bearer sk-one"})
    assert keyed.status_code == 200
    assert keyed.headers["Access-Control-Allow-Origin"] == "http://app.example"
    plain = requests.get(proxy.url + "/v1/models", timeout=5,
                         headers={"Authorization": "Bearer sk-one"})
    assert "Access-Control-Allow-Origin" not in plain.headers


def test_probing_the_upstreams_needs_a_key_and_is_rate_limited(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-one"])
    assert requests.get(proxy.url + "/proxy/health", timeout=5).status_code == 200
    refused = requests.get(proxy.url + "/proxy/health?upstream=1", timeout=5)
    assert refused.status_code == 401
    assert fake.received == []
    keyed = {"Authorization": "Bearer sk-one"}
    asked = []
    for _ in range(5):
        health = requests.get(proxy.url + "/proxy/health?upstream=1", headers=keyed, timeout=5)
        assert health.status_code == 200
        assert health.json()["upstreams"][0]["ok"] is True
        asked.append(len(fake.received))
    # five health checks, one probe of the upstream (its model list, and its profile's info
    # endpoints learned once): the next four ask it nothing
    assert "/v1/models" in [r.path for r in fake.received]
    assert asked == [asked[0]] * 5


# -- integers ---------------------------------------------------------------------------------

BIG = 10**30


@pytest.mark.parametrize("extra", [{"tools": TOOLS}, {"store": False}])
def test_integers_past_64_bits_reach_upstream_exactly(fake, proxy, extra):
    fake.answer(Answer(body=vllm_completion("fine")))
    body = orjson.dumps({"model": "q", "messages": USER, **extra}).replace(
        b'"model"', b'"seed": %d, "model"' % BIG)
    response = requests.post(proxy.url + "/v1/chat/completions", data=body, timeout=10,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    assert b'"seed":%d' % BIG in fake.received[-1].raw.replace(b" ", b"")
    assert json.loads(fake.received[-1].raw)["seed"] == BIG


def test_an_app_origin_let_in_by_its_preflight_may_read_the_answer(fake, start_proxy):
    """A desktop app's own origin (Tauri, Electron, VS Code's webviews) comes in without a
    listing: the answer it is let in for carries the CORS header its preflight promised, or
    the app's webview could send the request and never read it."""
    proxy = start_proxy()
    origin = {"Origin": "tauri://localhost"}
    preflight = requests.options(proxy.url + "/v1/models", timeout=5, headers={
        **origin, "Access-Control-Request-Method": "GET"})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "tauri://localhost"
    reply = requests.get(proxy.url + "/v1/models", headers=origin, timeout=5)
    assert reply.status_code == 200
    assert reply.headers["Access-Control-Allow-Origin"] == "tauri://localhost"
    foreign = requests.get(proxy.url + "/v1/models", timeout=5,
                           headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert "Access-Control-Allow-Origin" not in foreign.headers
