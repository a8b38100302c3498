"""What the fifth adversarial probe of the production server found (issue 42), as regressions
against `python app.py` (gunicorn, two gevent workers, both ports, real headers): web pages
driving a keyless proxy (a foreign Host, a foreign Origin), the Ollama port's own keys, and a
port that answered before any worker could serve."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion
from tests.serving import Served, answer_hermes_call, free_port, served, wait_for

pytestmark = pytest.mark.integration

USER = [{"role": "user", "content": "hi"}]
CHAT = {"model": "q", "messages": USER, "tools": TOOLS}


@contextlib.contextmanager
def two_ports(upstream: str, env: dict[str, str] | None = None) -> Iterator[tuple[Served, str]]:
    """The proxy on its main port and on the Ollama port, two workers: the server, and the
    Ollama port's URL."""
    ollama = free_port()
    with served(upstream, {"TOOLCALL_PROXY_OLLAMA_PORT": str(ollama), **(env or {})},
                workers=2) as server:
        yield server, f"http://127.0.0.1:{ollama}"


def _ollama_error(reply: requests.Response) -> str:
    """The message of Ollama's own envelope, `{"error": "…"}` (a string, never an object)."""
    body = reply.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"], str), body
    return body["error"]


# -- 1. a keyless proxy that web pages cannot drive -------------------------------------------

REBOUND = "attacker.example"  # a page's own name, made to resolve to 127.0.0.1 (DNS rebinding)


@pytest.mark.parametrize("keys", [{}, {"TOOLCALL_PROXY_API_KEYS": "sk-main"}])
def test_a_host_the_proxy_does_not_answer_to_is_refused_on_every_path_and_port(fake, keys):
    """DNS rebinding: the browser sends the page's own name as Host. Refused (403) before
    anything else, on both ports, keyed or not, in the envelope of the front the path
    belongs to; upstream never hears of it."""
    key = {"Authorization": "Bearer sk-main"} if keys else {}
    with two_ports(fake.url, {**keys, "TOOLCALL_PROXY_LOG_BODIES": "true"}) as (server, ollama):
        for url in (server.url, ollama):
            host = {"Host": f"{REBOUND}:{url.rsplit(':', 1)[1]}", **key}
            for method, path in (("GET", "/proxy/status.json"), ("GET", "/proxy/health"),
                                 ("GET", "/v1/models"), ("GET", "/v1/responses/resp_1"),
                                 ("POST", "/v1/chat/completions"), ("OPTIONS", "/v1/models")):
                reply = requests.request(method, url + path, headers=host, timeout=10,
                                         json=CHAT if method == "POST" else None)
                assert reply.status_code == 403, (url, path)
                assert reply.json()["error"]["code"] == "host_not_allowed"
                assert "Access-Control-Allow-Origin" not in reply.headers
            for path in ("/api/tags", "/api/version"):
                reply = requests.get(url + path, headers=host, timeout=10)
                assert reply.status_code == 403
                assert "allowed_hosts" in _ollama_error(reply)
            messages = requests.post(url + "/v1/messages", headers=host, timeout=10,
                                     json={"model": "q", "max_tokens": 5, "messages": USER})
            assert messages.status_code == 403
            assert messages.json()["type"] == "error"  # Anthropic's envelope
        assert fake.received == []
        # Addressed as the proxy, the same requests are served.
        for url in (server.url, ollama):
            assert requests.get(url + "/api/tags", headers=key, timeout=10).status_code == 200
            local = {"Host": "localhost", **key}
            assert requests.get(url + "/v1/models", headers=local, timeout=10).ok


def test_the_names_and_addresses_the_proxy_answers_to(fake):
    """Loopback, this machine's name, an address that is not public, and the names listed
    (`allowed_hosts`, a `*.suffix` too); a public address that is not this machine's, and
    any other name, are refused."""
    listed = {"TOOLCALL_PROXY_ALLOWED_HOSTS": "gpubox.lan,*.home.arpa"}
    with two_ports(fake.url, listed) as (server, ollama):
        for url in (server.url, ollama):
            for host in ("127.0.0.1", "localhost", "[::1]:8003", "app.localhost",
                         socket.gethostname(), "192.168.1.10:11434", "10.1.2.3",
                         "gpubox.lan:11434", "GPUBOX.LAN.", "ha.home.arpa"):
                reply = requests.get(url + "/api/tags", headers={"Host": host}, timeout=10)
                assert reply.status_code == 200, host
            for host in ("8.8.8.8", "evil.lan", "home.arpa", "gpubox.lan.attacker.example",
                         "localhost.attacker.example", "127.0.0.1.nip.io", "a b"):
                reply = requests.get(url + "/api/tags", headers={"Host": host}, timeout=10)
                assert reply.status_code == 403, host


def test_a_page_of_another_origin_cannot_drive_a_keyless_proxy(fake):
    """A "simple" request (POST as text/plain: no preflight) from a page elsewhere would
    run a turn, and its answer would be read through DNS rebinding. Any Origin that is not
    the proxy's own or listed is refused, preflight or not, on both ports."""
    with two_ports(fake.url) as (server, ollama):
        for url in (server.url, ollama):
            page = {"Origin": "http://attacker.example", "Content-Type": "text/plain"}
            body = b'{"model": "q", "messages": [{"role": "user", "content": "hi"}]}'
            chat = requests.post(url + "/v1/chat/completions", data=body, headers=page,
                                 timeout=10)
            assert chat.status_code == 403
            assert chat.json()["error"]["code"] == "origin_not_allowed"
            ollama_chat = requests.post(url + "/api/chat", data=body, headers=page, timeout=10)
            assert ollama_chat.status_code == 403
            assert "allowed_origins" in _ollama_error(ollama_chat)
            tags = requests.get(url + "/api/tags", headers=page, timeout=10)
            assert tags.status_code == 403
            status = requests.get(url + "/proxy/status.json", headers=page, timeout=10)
            assert status.status_code == 403
            preflight = requests.options(url + "/api/chat", timeout=10, headers={
                "Origin": "http://attacker.example", "Access-Control-Request-Method": "POST"})
            assert preflight.status_code == 403
            assert "Access-Control-Allow-Origin" not in preflight.headers
            null = requests.post(url + "/api/chat", data=body, timeout=10,
                                 headers={"Origin": "null", "Content-Type": "text/plain"})
            assert null.status_code == 403
        assert fake.received == []
        # The proxy's own pages (same origin) and programs (no Origin) are served.
        fake.answer(Answer(body=vllm_completion("fine")))
        own = requests.post(server.url + "/v1/chat/completions", timeout=10,
                            json={"model": "q", "messages": USER},
                            headers={"Origin": server.url})
        assert own.status_code == 200
        assert requests.get(ollama + "/api/tags", timeout=10).status_code == 200


def test_a_listed_origin_is_let_in_and_may_read_the_answer(fake):
    listed = {"TOOLCALL_PROXY_ALLOWED_ORIGINS": "http://localhost:*"}
    with two_ports(fake.url, listed) as (server, ollama):
        for url in (server.url, ollama):
            page = {"Origin": "http://localhost:3000"}
            reply = requests.get(url + "/api/tags", headers=page, timeout=10)
            assert reply.status_code == 200
            assert reply.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
            preflight = requests.options(url + "/api/chat", timeout=10, headers={
                **page, "Access-Control-Request-Method": "POST"})
            assert preflight.status_code == 204
            other = requests.get(url + "/api/tags", timeout=10,
                                 headers={"Origin": "http://localhost.attacker.example"})
            assert other.status_code == 403


# -- 2. keys per port -------------------------------------------------------------------------

MAIN = {"TOOLCALL_PROXY_API_KEYS": "sk-main", "TOOLCALL_PROXY_LOG_BODIES": "true"}


def test_a_keyless_ollama_port_opens_nothing_the_main_ports_keys_keep(fake):
    """`ollama_api_keys: []`: Home Assistant, Zed and Open WebUI need no key on the Ollama
    port, while the main port keeps its keys, and its stored answers, captures and status
    stay behind them on both ports."""
    with two_ports(fake.url, {**MAIN, "TOOLCALL_PROXY_OLLAMA_API_KEYS": ""}) as (server, ollama):
        assert requests.get(ollama + "/api/tags", timeout=10).status_code == 200
        assert requests.get(server.url + "/api/tags", timeout=10).status_code == 401
        main = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-main", max_retries=0,
                             timeout=20)
        fake.answer(Answer(body=vllm_completion("The main port's secret answer.")))
        kept = main.responses.create(model="q", input="the main port's secret prompt")
        assert main.responses.retrieve(kept.id).output_text == "The main port's secret answer."
        stranger = openai.OpenAI(base_url=ollama + "/v1", api_key="anything", max_retries=0,
                                 timeout=20)
        with pytest.raises(openai.NotFoundError):
            stranger.responses.retrieve(kept.id)
        keyed = {"Authorization": "Bearer sk-main"}
        status = {}
        for _ in range(200):  # built at most once a second
            status = requests.get(server.url + "/proxy/status.json", headers=keyed,
                                  timeout=10).json()
            if any("capture" in turn for turn in status["turns"]):
                break
            time.sleep(0.05)
        capture = next(turn["capture"] for turn in status["turns"] if "capture" in turn)
        for path in ("/proxy/status.json", "/proxy/status", "/proxy/" + capture,
                     "/proxy/health?upstream=1"):
            refused = requests.get(ollama + path, timeout=10)
            assert refused.status_code == 401, path
            assert "secret" not in refused.text
        assert requests.get(ollama + "/proxy/status.json", headers=keyed, timeout=10).ok
        # The keyless port's own turns are served, and recorded for the operator to see.
        answer_hermes_call(fake)
        turn = requests.post(ollama + "/api/chat", timeout=20, json={
            "model": "q", "stream": False, "messages": USER, "tools": TOOLS})
        assert turn.status_code == 200
        assert turn.json()["message"]["tool_calls"][0]["function"]["name"] == "read"


def test_the_ollama_port_can_have_keys_of_its_own(fake):
    """`ollama_api_keys: [k]`: only k opens the Ollama port (a wrong one gets Ollama's
    envelope, 401, which Home Assistant answers by asking for the key again), k opens nothing
    on the main port, and neither key ever goes upstream."""
    own = {**MAIN, "TOOLCALL_PROXY_OLLAMA_API_KEYS": "sk-ha"}
    with two_ports(fake.url, own) as (server, ollama):
        for key in ("wrong", "sk-main", ""):
            reply = requests.get(ollama + "/api/tags", timeout=10,
                                 headers={"Authorization": f"Bearer {key}"})
            assert reply.status_code == 401, key
            assert _ollama_error(reply)
            assert reply.headers["WWW-Authenticate"] == "Bearer"
        ha = {"Authorization": "Bearer sk-ha"}
        assert requests.get(ollama + "/api/tags", headers=ha, timeout=10).status_code == 200
        assert requests.get(server.url + "/api/tags", headers=ha, timeout=10).status_code == 401
        assert requests.get(server.url + "/v1/models", headers=ha, timeout=10).status_code == 401
        main = {"Authorization": "Bearer sk-main"}
        assert requests.get(server.url + "/api/tags", headers=main, timeout=10).ok
        answer_hermes_call(fake)
        turn = requests.post(ollama + "/api/chat", headers=ha, timeout=20, json={
            "model": "q", "stream": False, "messages": USER, "tools": TOOLS})
        assert turn.status_code == 200
        assert fake.received
        for received in fake.received:
            assert "sk-ha" not in str(received.headers)
            assert "sk-main" not in str(received.headers)


# -- 8. the port opens when a worker can serve ------------------------------------------------


@contextlib.contextmanager
def _opened(gate: Path) -> Iterator[None]:
    """The block, then the gate open whatever happened (no worker is left held at it)."""
    try:
        yield
    finally:
        gate.touch()


def _refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return False
    except ConnectionRefusedError:
        return True


def test_nothing_is_accepted_and_systemd_hears_nothing_before_a_worker_can_serve(
        fake, tmp_path: Path):
    """gunicorn's master listened (and told systemd READY=1) before any worker had loaded the
    app: a request that came meanwhile waited unread. With both workers held before they load
    it, the port refuses connections and systemd has heard nothing; once one is ready, the
    port opens, systemd hears READY=1, and a request sent at the moment the port opens is
    served."""
    notify_path = str(tmp_path / "notify")
    gate = tmp_path / "gate"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(notify_path)
        env = {"GUNICORN_WORKER_CLASS": "tests.gated_worker.Gated",
               "TOOLCALL_TEST_GATE": str(gate), "NOTIFY_SOCKET": notify_path}
        with served(fake.url, env, workers=2, healthy=False) as server, _opened(gate):
            wait_for(lambda: len(list(tmp_path.glob("gate.waiting.*"))) == 2, 30)
            assert _refused(server.port)
            notify.setblocking(False)
            with pytest.raises(BlockingIOError):
                notify.recv(4096)
            gate.touch()
            while True:  # sent the moment the port opens
                try:
                    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                    break
                except ConnectionRefusedError:
                    assert server.process.poll() is None
                    time.sleep(0.001)
            with sock:
                sock.sendall(b"GET /proxy/health HTTP/1.1\r\nHost: localhost\r\n"
                             b"Connection: close\r\n\r\n")
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 200")
            notify.settimeout(30)
            said = notify.recv(4096).decode()
            assert said.startswith("READY=1")
    assert "opened the port" in server.log


def test_without_a_notify_socket_the_server_still_opens_its_port(fake):
    """No NOTIFY_SOCKET (not under systemd): nothing to tell, and the port opens as the first
    worker is ready."""
    with served(fake.url, {"NOTIFY_SOCKET": ""}, workers=2) as server:
        assert requests.get(server.url + "/proxy/health", timeout=10).status_code == 200
    assert "opened the port" in server.log
