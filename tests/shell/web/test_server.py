"""The server layer: `python app.py` (gunicorn, gevent), `python app.py --dev` (Werkzeug) and
`gunicorn -c deploy/gunicorn.conf.py app:app`, which share their settings; the server's own
refusals (a bad request line, headers too large or too many) in OpenAI's envelope."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import ollama
import openai
import pytest
import requests

from proxy.shell.config_load import ConfigError, build_config
from proxy.shell.server.serve import _announce, gunicorn_settings
from tests.clients import exchange
from tests.fake_vllm import MODEL, Answer, vllm_completion, vllm_tool_call
from tests.serving import free_port, stop, wait_healthy

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
SERVERS = {
    "gunicorn": [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "app:app"],
    "app.py": [sys.executable, "app.py"],
    "app.py --dev": [sys.executable, "app.py", "--dev"],
}
NOWHERE = "http://127.0.0.1:9"  # nothing listens there: these tests never reach upstream


def _env(**values: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TOOLCALL_PROXY_", "GUNICORN_", "PROMETHEUS_"))}
    return {**env, **values}


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = _env(TOOLCALL_PROXY_PORT=str(port), TOOLCALL_PROXY_UPSTREAM=NOWHERE,
               GUNICORN_WORKERS="2")
    process = subprocess.Popen(SERVERS[request.param], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, seconds=30)
        yield request.param, port
    finally:
        stop(process)


def _envelope(answer: bytes, status: int) -> dict:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith(f"HTTP/1.1 {status} "), answer[:300]
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert headers["content-type"] == "application/json"
    assert headers["connection"].lower() == "close"
    assert int(headers["content-length"]) == len(body)
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["code"], str)
    expected_type = "server_error" if status >= 500 else "invalid_request_error"
    assert error["type"] == expected_type
    return error


def _headers(count: int, size: int = 1) -> bytes:
    return b"".join(b"X-Header-%d: %s\r\n" % (i, b"v" * size) for i in range(count))


# Limits: gunicorn's (a 4094-byte request line, 8190-byte header fields, 100 headers) and
# Python's HTTP server under --dev (65536-byte lines, 100 headers).
LINE_LIMIT = {"gunicorn": 4094, "app.py": 4094, "app.py --dev": 65536}
FIELD_LIMIT = {"gunicorn": 8190, "app.py": 8190, "app.py --dev": 65536}


@pytest.mark.parametrize(("case", "status"), [
    ("bad request line", 400),
    ("request line too long", 414),
    ("header field too large", 431),
    ("too many headers", 431),
])
def test_the_servers_own_refusals_come_in_the_envelope(server, case, status):
    name, port = server
    request = {
        "bad request line": b"GARBAGE\r\n\r\n",
        "request line too long": b"GET /%s HTTP/1.1\r\nHost: localhost\r\n\r\n"
                                 % (b"a" * (LINE_LIMIT[name] + 10)),
        "header field too large": b"GET /proxy/health HTTP/1.1\r\nHost: localhost\r\n%s\r\n"
                                  % _headers(1, FIELD_LIMIT[name] + 10),
        "too many headers": (b"GET /proxy/health HTTP/1.1\r\nHost: localhost\r\n%s\r\n"
                             % _headers(120)),
    }[case]
    error = _envelope(exchange(port, request), status)
    assert "<html" not in error["message"].lower()
    # The server goes on serving.
    assert requests.get(f"http://127.0.0.1:{port}/proxy/health", timeout=5).status_code == 200


@pytest.mark.parametrize("server", ["gunicorn", "app.py"], indirect=True)
def test_gunicorns_header_refusals_name_the_problem(server):
    port = server[1]
    bad_name = _envelope(exchange(
        port, b"GET / HTTP/1.1\r\nHost: localhost\r\nBad Name: v\r\n\r\n"), 400)
    assert bad_name["code"] == "bad_request"
    assert "Bad Name" in bad_name["message"]
    too_large = _envelope(exchange(port, b"GET / HTTP/1.1\r\n%s\r\n" % _headers(1, 9000)), 431)
    assert too_large["code"] == "request_header_fields_too_large"


def test_an_ordinary_error_keeps_the_apps_own_envelope(server):
    """Requests the server layer accepts reach the app, which answers as always."""
    _, port = server
    answer = requests.get(f"http://127.0.0.1:{port}/v1/models", timeout=10)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "upstream_unreachable"


def test_healthcheck_command(server):
    _, port = server
    check = [sys.executable, "app.py", "healthcheck"]
    up = subprocess.run(check, cwd=ROOT, env=_env(TOOLCALL_PROXY_PORT=str(port)),
                        capture_output=True, text=True, timeout=30)
    assert up.returncode == 0, up.stderr
    down = subprocess.run(check, cwd=ROOT, env=_env(TOOLCALL_PROXY_PORT=str(free_port())),
                          capture_output=True, text=True, timeout=30)
    assert down.returncode == 1
    assert down.stderr.startswith("toolcall-proxy: unhealthy:")
    assert len(down.stderr.splitlines()) == 1


# -- the shared settings ---------------------------------------------------------------------


def test_settings_listen_where_the_proxy_is_configured():
    assert gunicorn_settings(build_config({"port": 9100}), {})["bind"] == ["127.0.0.1:9100"]
    assert gunicorn_settings(build_config({"host": "::1"}), {})["bind"] == ["[::1]:8003"]
    assert gunicorn_settings(build_config(), {"GUNICORN_BIND": "unix:/run/p.sock"})["bind"] == [
        "unix:/run/p.sock"]


def test_gunicorns_own_parser_reads_every_head_even_with_the_c_parser_importable(monkeypatch):
    # With "auto", an importable gunicorn_h1c would take over and accept heads gunicorn's
    # own parser refuses (bare LF, obsolete folding), with other statuses and messages.
    import sys
    import types

    from gunicorn.config import Config as GunicornConfig
    from gunicorn.http import message

    stand_in = types.ModuleType("gunicorn_h1c")
    stand_in.LimitRequestLine = type("LimitRequestLine", (Exception,), {})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gunicorn_h1c", stand_in)
    monkeypatch.setattr(message, "_fast_parser_available", None)
    monkeypatch.setattr(message, "_fast_parser_module", None)
    settings = GunicornConfig()
    settings.set("http_parser", gunicorn_settings(build_config(), {})["http_parser"])
    assert message._check_fast_parser(settings) is False
    settings.set("http_parser", "auto")  # (the stand-in is taken for the C parser)
    assert message._check_fast_parser(settings) is True


def test_the_ollama_port_is_a_second_bind_of_the_same_app():
    config = build_config({"ollama_port": 11434})
    assert gunicorn_settings(config, {})["bind"] == ["127.0.0.1:8003", "127.0.0.1:11434"]
    assert gunicorn_settings(config, {"GUNICORN_BIND": "unix:/run/p.sock"})["bind"] == [
        "unix:/run/p.sock", "127.0.0.1:11434"]
    said: list[str] = []
    _announce(config, said.append)
    assert said[0].startswith("toolcall-proxy listening on http://127.0.0.1:8003 and "
                              "http://127.0.0.1:11434 ")


def test_workers_default_to_the_cores_this_process_may_use():
    cores = len(os.sched_getaffinity(0))
    assert gunicorn_settings(build_config(), {})["workers"] == cores
    assert gunicorn_settings(build_config(), {"GUNICORN_WORKERS": "3"})["workers"] == 3
    for bad in ("many", "0"):
        with pytest.raises(ConfigError, match="GUNICORN_WORKERS"):
            gunicorn_settings(build_config(), {"GUNICORN_WORKERS": bad})


def test_a_bad_server_setting_stops_app_py_with_one_line():
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT,
                            env=_env(GUNICORN_WORKERS="lots"), capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2
    assert result.stderr == "toolcall-proxy: GUNICORN_WORKERS must be an integer, not 'lots'\n"


def test_deploy_config_is_the_shared_settings(monkeypatch):
    """deploy/gunicorn.conf.py holds no settings of its own: gunicorn reads exactly those
    `python app.py` serves with."""
    env = {"TOOLCALL_PROXY_PORT": "9200", "GUNICORN_WORKERS": "5",
           "GUNICORN_GRACEFUL_TIMEOUT": "11"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    conf = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    shared = gunicorn_settings(build_config(env=os.environ), os.environ)
    assert set(shared) <= set(conf)
    for key, value in shared.items():
        if key == "worker_class":
            assert conf[key].__mro__[1:] == value.__mro__[1:]
        elif not callable(value):
            assert conf[key] == value, key
    assert conf["bind"] == ["127.0.0.1:9200"]
    assert conf["workers"] == 5


@pytest.mark.parametrize(("host", "keys", "warned"), [
    ("0.0.0.0", (), True), ("192.168.1.10", (), True), ("0.0.0.0", ("sk-1",), False),
    ("127.0.0.1", (), False), ("::1", (), False), ("localhost", (), False),
])
def test_listening_beyond_loopback_without_keys_is_warned(host, keys, warned):
    config = build_config({"host": host, "api_keys": list(keys)})
    said: list[str] = []

    class Log:
        info = said.append

    class Server:
        log = Log()

    gunicorn_settings(config, {})["when_ready"](Server())
    assert said[0].startswith("toolcall-proxy listening on http://")
    assert any("without api_keys" in line for line in said) is warned


def test_help_names_the_server_options():
    result = subprocess.run([sys.executable, "app.py", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0
    for word in ("--upstream", "--dev", "healthcheck", "GUNICORN_WORKERS"):
        assert word in result.stdout


@pytest.mark.parametrize("server", ["app.py", "app.py --dev"])
def test_the_ollama_port_serves_the_same_app(fake, server):
    """`--ollama-port`: gunicorn (or Werkzeug) binds a second port with the same app, where
    Ollama's clients find Ollama's API and the OpenAI routes beside it (VS Code Copilot
    chats on `/v1/chat/completions` of the URL it was given for Ollama)."""
    fake.answer(Answer(body=vllm_completion(None, tool_calls=[vllm_tool_call(
        "read", '{"path": "a"}')], finish_reason="tool_calls")))
    port, second = free_port(), free_port()
    process = subprocess.Popen(
        [*SERVERS[server], "--port", str(port), "--ollama-port", str(second),
         "--upstream", fake.url], cwd=ROOT, env=_env(GUNICORN_WORKERS="1"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, seconds=30)
        url = f"http://127.0.0.1:{second}"
        client = ollama.Client(host=url, timeout=20)
        assert [model.model for model in client.list().models] == [MODEL]
        read = {"type": "function", "function": {"name": "read", "parameters": {
            "type": "object", "properties": {"path": {"type": "string"}}}}}
        (call,) = client.chat(MODEL, [{"role": "user", "content": "x"}], tools=[read],
                              stream=False).message.tool_calls
        assert call.function.arguments == {"path": "a"}
        chat = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=20)
        answer = chat.chat.completions.create(model=MODEL, tools=[read],
                                              messages=[{"role": "user", "content": "x"}])
        assert answer.choices[0].finish_reason == "tool_calls"
        assert requests.get(url + "/proxy/health", timeout=5).status_code == 200
    finally:
        log = stop(process)
    assert f"http://127.0.0.1:{port} and http://127.0.0.1:{second}" in log


@pytest.mark.parametrize(("host", "ollama_keys", "warned"), [
    ("0.0.0.0", [], True), ("0.0.0.0", ["sk-ha"], False), ("0.0.0.0", None, False),
    ("127.0.0.1", [], False),
])
def test_a_keyless_ollama_port_beyond_loopback_is_warned(host, ollama_keys, warned):
    config = build_config({"host": host, "api_keys": ["sk-1"], "ollama_port": 11434,
                           "ollama_api_keys": ollama_keys})
    said: list[str] = []
    _announce(config, said.append)
    assert any("Ollama port 11434" in line and "no keys" in line for line in said) is warned


def test_a_booted_worker_keeps_the_collector_off_what_it_loaded():
    import gc

    from proxy.shell.server.serve import GC_YOUNG, settle_collector

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    loaded = Cycle()  # a cycle that exists at boot: frozen, never walked again
    gc.unfreeze()
    thresholds = gc.get_threshold()
    try:
        settle_collector()
        assert gc.get_freeze_count() > 0
        # the young generation collected less often, the older ones as before
        assert gc.get_threshold() == (GC_YOUNG, *thresholds[1:])
        assert thresholds[0] < GC_YOUNG
        assert not any(obj is loaded for obj in gc.get_objects())
        later = Cycle()  # what a request allocates afterwards is still collected
        assert any(obj is later for obj in gc.get_objects())
        del later
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
