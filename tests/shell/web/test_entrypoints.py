"""The two ways users start the proxy: `python app.py` and `gunicorn app:app`."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion, vllm_stream_chunks
from tests.serving import (
    ROOT,
    answer_hermes_call,
    free_port,
    stop,
    tool_turn,
    wait_for,
    wait_healthy,
)

pytestmark = pytest.mark.integration


def _wait_logged(url: str, labels: str, seconds: float = 10) -> None:
    """Wait until the proxy has counted (and so logged) a request with these metric labels:
    a line is written when its response closes, just after the client has read it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = requests.get(url + "/proxy/metrics", timeout=5).text
        if any(line.startswith("toolcall_proxy_requests_total{") and labels in line
               for line in text.splitlines()):
            return
        time.sleep(0.05)


def test_python_app_py_serves_with_flags_and_env(fake):
    answer_hermes_call(fake)
    port = free_port()
    env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": "http://127.0.0.1:9"}  # flag overrides
    process = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port), "--upstream", fake.url],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process)
        health = requests.get(url + "/proxy/health", timeout=5).json()
        assert health["upstream"] == fake.url
        tool_turn(url)
        _wait_logged(url, 'front="chat"')
    finally:
        log = stop(process)
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    chat = [line for line in lines if line["path"] == "/v1/chat/completions"]
    assert chat
    assert chat[0]["mode"] == "buffered"
    assert chat[0]["tool_calls"] == 1
    assert "path\": \"a" not in log  # no completion text in the logs


@pytest.mark.parametrize(("flags", "startup"), [([], "Listening at"), (["--dev"], "Running on")])
def test_python_app_py_writes_no_access_line_with_the_query_string(fake, flags, startup):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "app.py", *flags, "--port", str(port), "--upstream", fake.url],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process)
        assert requests.get(url + "/v1/models?api-key=SECRET-123", timeout=5).status_code == 200
        _wait_logged(url, 'front="none"')
    finally:
        log = stop(process)
    assert "SECRET-123" not in log
    assert "GET /v1/models" not in log
    assert startup in log  # gunicorn's (or with --dev Werkzeug's) startup lines are kept
    assert any(json.loads(line)["path"] == "/v1/models"
               for line in log.splitlines() if line.startswith("{"))


def test_gunicorn_with_the_shipped_config(fake):
    answer_hermes_call(fake)
    port = free_port()
    env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": fake.url, "TOOLCALL_PROXY_PORT": str(port),
           "GUNICORN_WORKERS": "2", "TOOLCALL_PROXY_MAX_BODY_BYTES": "65536"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "app:app"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, seconds=30)
        tool_turn(url)
        for _ in range(6):
            assert requests.get(url + "/v1/models", timeout=5).json()["data"][0]["id"]
        # Whichever worker answers, /proxy/metrics counts the whole server's requests. A
        # request is counted as its response closes, just after the client has it: wait for
        # the last one (on a loaded machine the next request can come first).
        passthrough_200 = ('toolcall_proxy_requests_total{front="none",'
                           'mode="passthrough",status="200"}')
        deadline = time.monotonic() + 5
        while (_sample(requests.get(url + "/proxy/metrics", timeout=5).text, passthrough_200)
               != 6.0 and time.monotonic() < deadline):
            time.sleep(0.05)
        seen = {_sample(requests.get(url + "/proxy/metrics", timeout=5).text, passthrough_200)
                for _ in range(6)}
        assert seen == {6.0}
        # gunicorn hands the raw request target and chunked bodies to the app as sent.
        assert _raw(port, b"GET //evil.example/x HTTP/1.1\r\nHost: localhost\r\n\r\n").startswith(
            b"HTTP/1.1 400")
        chunk = b"x" * 50_000
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(2)) + b"0\r\n\r\n"
        refused = _raw(port, b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nConnection: close"
                             b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
        assert refused.startswith(b"HTTP/1.1 413")
        assert all(r.path != "/v1/embeddings" for r in fake.received)
    finally:
        stop(process)


def _raw(port: int, request: bytes) -> bytes:
    if b"Connection: close" not in request:
        request = request[:-2] + b"Connection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while piece := sock.recv(65536):
            data += piece
    return data


def _sample(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


_GUNICORN = [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "app:app"]
_APP = [sys.executable, "app.py"]


@pytest.mark.parametrize(("command", "ctrl_c"), [(_GUNICORN, False), (_APP, False), (_APP, True)],
                         ids=["gunicorn-SIGTERM", "app.py-SIGTERM", "app.py-Ctrl-C"])
def test_stopping_ends_waiting_streams_with_a_retryable_error(fake, command, ctrl_c):
    """A stop or reload (SIGTERM to the workers) must not cut a tool turn that is still
    waiting on the model: it ends with an error event and [DONE] before the graceful timeout.
    `python app.py` stops so on Ctrl-C too (SIGINT to every process of the terminal's group)."""
    fake.answer(lambda received: Answer(body=vllm_completion("late"), delay=30)
                if "tools" in received.json else
                Answer(chunks=vllm_stream_chunks("slow", pieces=2), chunk_gap=30))
    port = free_port()
    env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": fake.url, "TOOLCALL_PROXY_PORT": str(port),
           "GUNICORN_WORKERS": "1", "GUNICORN_GRACEFUL_TIMEOUT": "7",
           "TOOLCALL_PROXY_HEARTBEAT_SECONDS": "1"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    results: dict[str, bytes] = {}
    started: dict[str, threading.Event] = {"buffered": threading.Event(),
                                           "passthrough": threading.Event()}

    def stream(name: str, body: dict) -> None:
        with requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body,
                           stream=True, timeout=30) as response:
            started[name].set()  # the head has come: the client's stream has begun
            results[name] = b"".join(response.iter_content(None))

    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, seconds=30)
        user = [{"role": "user", "content": "hi"}]
        readers = [threading.Thread(target=stream, args=args) for args in (
            ("buffered", {"model": "q", "messages": user, "tools": TOOLS, "stream": True}),
            ("passthrough", {"model": "q", "messages": user, "stream": True}))]
        for reader in readers:
            reader.start()
        # Both are waiting on upstream now: each stream has begun and upstream has both calls
        # (a fixed sleep was not enough on a loaded machine).
        wait_for(lambda: all(event.is_set() for event in started.values())
                  and len(fake.chat_requests()) == 2, seconds=20)
        stopped = time.monotonic()
        if ctrl_c:
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.terminate()  # gunicorn's graceful stop
        for reader in readers:
            reader.join(timeout=20)
        took = time.monotonic() - stopped
    finally:
        stop(process)
    assert took < 7  # ended by the proxy, before the graceful timeout would cut them
    for name in ("buffered", "passthrough"):
        events = [e for e in results[name].split(b"\n\n") if e.startswith(b"data: ")]
        assert json.loads(events[-2][6:])["error"]["code"] == "proxy_restarting", name
        assert events[-1] == b"data: [DONE]", name
    # Both upstream calls were cut, so vLLM stops generating. The fake notices a cut on its own
    # threads (every 20 ms): wait for it rather than read the list at once.
    wait_for(lambda: len(fake.disconnects) >= 2, seconds=10)
    assert len(fake.disconnects) == 2


@pytest.mark.parametrize(("command", "worker"), [(_GUNICORN, "gevent"), (_APP, "gevent"),
                                               (_APP, "gthread")],
                         ids=["gunicorn", "app.py", "app.py-gthread"])
def test_an_idle_keep_alive_connection_does_not_hold_a_stop(fake, command, worker):
    """A client's pooled connection, idle between requests (every SDK keeps one), is closed
    at once when the server stops, as nginx does: the stop does not wait for it until the
    graceful timeout kills the worker."""
    port = free_port()
    env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": fake.url, "TOOLCALL_PROXY_PORT": str(port),
           "GUNICORN_WORKERS": "1", "GUNICORN_GRACEFUL_TIMEOUT": "40",
           "GUNICORN_WORKER_CLASS": worker}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, seconds=30)
        idle.request("GET", "/proxy/health")  # HTTP/1.1: the connection is kept alive
        response = idle.getresponse()
        response.read()
        assert response.status == 200
        assert idle.sock is not None
        stopped = time.monotonic()
        process.terminate()
        closed_by_server = idle.sock.recv(65536)  # the server's EOF, or a timeout after 30 s
        process.wait(timeout=45)
        took = time.monotonic() - stopped
    finally:
        idle.close()
        log = stop(process)
    assert closed_by_server == b""  # closed, with no error page written on it
    assert took < 20  # well before the graceful timeout (40 s) would have killed the worker
    assert process.returncode == 0
    assert "graceful timeout" not in log
