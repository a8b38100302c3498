"""The shipped deployment files: nginx site, systemd unit, gunicorn config."""

from __future__ import annotations

import configparser
import json
import runpy
import shutil
import socket
import time

import pytest
import requests
from gunicorn.workers.ggevent import GeventWorker

from tests.clients import exchange
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion
from tests.shipped import DEPLOY, nginx_t, shipped_nginx


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed here")
def test_nginx_site_passes_nginx_t(tmp_path):
    result = nginx_t(tmp_path, DEPLOY / "nginx-toolcall-proxy.conf")
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr


def test_nginx_site_streams_sse_unbuffered():
    text = (DEPLOY / "nginx-toolcall-proxy.conf").read_text()
    for directive in ("proxy_buffering off;", "proxy_http_version 1.1;", "keepalive ",
                      "proxy_read_timeout ", "client_max_body_size "):
        assert directive in text


def test_systemd_unit_is_hardened():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(DEPLOY / "toolcall-proxy.service")
    service = unit["Service"]
    assert service["User"] == "toolcall-proxy"
    assert service["ProtectSystem"] == "strict"
    assert service["NoNewPrivileges"] == "true"
    assert service["Restart"] == "on-failure"
    assert service["EnvironmentFile"].endswith("/etc/toolcall-proxy/env")
    # ProtectSystem=strict leaves one writable place: the state directory, for the store.
    state = f"/var/lib/{service['StateDirectory']}/"
    assert service["Environment"] == f"TOOLCALL_PROXY_RESPONSES_STORE_PATH={state}responses.sqlite3"
    assert "deploy/gunicorn.conf.py" in service["ExecStart"]
    # Ready once a worker can serve: that worker, not the master, says READY=1.
    assert (service["Type"], service["NotifyAccess"]) == ("notify", "all")


def test_gunicorn_config_reads_the_proxy_environment(monkeypatch):
    monkeypatch.setenv("TOOLCALL_PROXY_HOST", "0.0.0.0")
    monkeypatch.setenv("TOOLCALL_PROXY_PORT", "9100")
    settings = runpy.run_path(str(DEPLOY / "gunicorn.conf.py"))
    assert settings["bind"] == ["0.0.0.0:9100"]
    assert issubclass(settings["worker_class"], GeventWorker)


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed here")
def test_heartbeats_and_calls_flow_through_the_shipped_nginx_site(tmp_path, fake, start_proxy):
    """The real site file in front of the proxy: the role chunk and heartbeats reach the
    client while upstream works (nothing buffered), then the call, then [DONE]."""
    proxy = start_proxy(heartbeat_seconds=0.3, commit_window_seconds=0.1)
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>'), delay=1.5))
    with shipped_nginx(tmp_path, proxy.url.removeprefix("http://")) as port:
        started = time.monotonic()
        arrivals = []
        with requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", stream=True,
                           timeout=20, json={"model": "q", "stream": True, "tools": TOOLS,
                                             "messages": [{"role": "user", "content": "hi"}]}
                           ) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            for line in response.iter_lines():
                if line.startswith(b"data: "):
                    arrivals.append((time.monotonic() - started, line[6:]))
    before_answer = [body for at, body in arrivals if at < 1.3]
    assert len(before_answer) >= 3  # the role chunk and heartbeats, not held by nginx
    assert b'"role":"assistant"' in before_answer[0]
    assert any(b'"name":"read"' in body for _, body in arrivals)
    assert arrivals[-1][1] == b"[DONE]"


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed here")
def test_the_shipped_nginx_sites_own_errors_come_in_the_envelope(tmp_path, start_proxy):
    """What nginx refuses or fails at itself reaches clients in OpenAI's envelope; the
    proxy's own answers pass through unchanged."""
    proxy = start_proxy(max_body_bytes=1024)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nobody = f"127.0.0.1:{closed.getsockname()[1]}"
    cases = [
        (b"GARBAGE\r\n\r\n", 400, "bad_request"),
        (b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Big: %s\r\n\r\n" % (b"a" * 9000), 431,
         "request_header_fields_too_large"),
        (b"GET /%s HTTP/1.1\r\nHost: localhost\r\n\r\n" % (b"a" * 9000), 414, "uri_too_long"),
        (b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\n"
         b"Content-Length: 40000000\r\n\r\n", 413,
         "request_too_large"),
    ]
    with shipped_nginx(tmp_path, proxy.url.removeprefix("http://")) as port:
        for request, status, code in cases:
            raw = exchange(port, request)
            head, _, body = raw.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 %d" % status), raw[:200]
            assert b"Content-Type: application/json" in head
            assert json.loads(body)["error"]["code"] == code
        passed = requests.post(f"http://127.0.0.1:{port}/v1/embeddings", data=b"x" * 2048,
                               timeout=10)
        assert passed.status_code == 413  # the proxy's own, below nginx's limit
        assert passed.json()["error"]["code"] == "request_too_large"
    with shipped_nginx(tmp_path, nobody) as port:
        down = requests.get(f"http://127.0.0.1:{port}/v1/models", timeout=10)
        assert down.status_code == 502
        assert down.headers["Retry-After"] == "1"
        assert down.json()["error"]["code"] == "proxy_unavailable"

