"""Several proxy instances, one state: `python app.py` processes (gunicorn, gevent workers)
sharing one real redis-server, read by the official openai SDK. An answer kept through one
instance is continued, read and deleted through another; a Redis that is down or silent is a
503 for the turns that need it and nothing to the others."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion
from tests.redis_server import RedisServer, needs_redis, running_redis
from tests.serving import free_port, stop, tool_turn, wait_for, wait_healthy
from tests.shipped import DEPLOY, shipped_nginx

pytestmark = [pytest.mark.integration, needs_redis]
ROOT = Path(__file__).resolve().parents[3]
KEY_A, KEY_B = "sk-alpha-0123456789", "sk-beta-9876543210"


@dataclass
class Instance:
    """One `python app.py` process."""

    url: str
    process: subprocess.Popen

    def client(self, key: str = KEY_A) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=30)


@pytest.fixture
def start_instance(fake) -> Iterator[Callable[..., Instance]]:
    """Start `python app.py` instances before the fake vLLM (stopped after the test)."""
    started: list[Instance] = []

    def start(store_url: str, workers: int = 2, keys: str = f"{KEY_A},{KEY_B}") -> Instance:
        port = free_port()
        env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": fake.url, "GUNICORN_WORKERS": str(workers),
               "TOOLCALL_PROXY_RESPONSES_STORE_URL": store_url, "TOOLCALL_PROXY_API_KEYS": keys,
               "TOOLCALL_PROXY_LOG_LEVEL": "warning"}
        process = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT,
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        instance = Instance(f"http://127.0.0.1:{port}", process)
        started.append(instance)
        wait_healthy(instance.url, process, seconds=60)
        return instance

    yield start
    for instance in started:
        stop(instance.process)


def _kept_through_one_continued_read_and_deleted_through_another(
        fake, first: openai.OpenAI, second: openai.OpenAI, other_key: openai.OpenAI) -> None:
    """The state two instances share, as the openai SDK sees it (`first` and `second` may be
    the same address, a balancer in front of both)."""
    fake.answer(Answer(body=vllm_completion("The capital is Paris.")))
    kept = first.responses.create(model="qwen", input="Capital of France?")
    fake.answer(Answer(body=vllm_completion("About two million.")))
    more = second.responses.create(model="qwen", input="Its population?",
                                   previous_response_id=kept.id)
    assert more.output_text == "About two million."
    sent = fake.chat_requests()[-1].json["messages"]
    assert [m["content"] for m in sent] == ["Capital of France?", "The capital is Paris.",
                                            "Its population?"]
    assert second.responses.retrieve(kept.id).output_text == "The capital is Paris."
    assert first.responses.retrieve(more.id).output_text == "About two million."
    with pytest.raises(openai.NotFoundError):  # another key's answer, on either
        other_key.responses.retrieve(kept.id)
    second.responses.delete(kept.id)
    for client in (first, second):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(kept.id)
    with pytest.raises(openai.NotFoundError):  # the chain lost a link
        first.responses.create(model="qwen", input="and?", previous_response_id=more.id)


def test_two_instances_share_one_redis(fake, redis_url, start_instance):
    one, two = start_instance(redis_url), start_instance(redis_url)
    _kept_through_one_continued_read_and_deleted_through_another(
        fake, one.client(), two.client(), two.client(KEY_B))
    for instance in (one, two):
        store = requests.get(instance.url + "/proxy/health?upstream=1", timeout=10,
                             headers={"Authorization": f"Bearer {KEY_A}"}).json()["store"]
        assert store == {"backend": "redis", "ok": True}


def test_instances_on_their_own_sqlite_files_do_not_share(fake, tmp_path, start_instance):
    """The contrast: without a shared store, the second instance knows nothing."""
    one = start_instance(f"sqlite://{tmp_path}/one.sqlite3", workers=1)
    two = start_instance(f"sqlite://{tmp_path}/two.sqlite3", workers=1)
    fake.answer(Answer(body=vllm_completion("ok")))
    kept = one.client().responses.create(model="qwen", input="x")
    with pytest.raises(openai.NotFoundError):
        two.client().responses.retrieve(kept.id)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own, which it may stop."""
    with running_redis() as server:
        yield server


def test_redis_down_is_a_503_for_turns_that_need_it_and_nothing_to_others(
        fake, own_redis, start_instance):
    proxy = start_instance(own_redis.url, workers=1)
    client = proxy.client()
    fake.answer(Answer(body=vllm_completion("kept")))
    kept = client.responses.create(model="qwen", input="x")
    own_redis.stop()
    for attempt in (lambda: client.responses.retrieve(kept.id),
                    lambda: client.responses.delete(kept.id),
                    lambda: client.responses.create(model="qwen", input="y",
                                                    previous_response_id=kept.id)):
        with pytest.raises(openai.InternalServerError) as caught:
            attempt()
        assert caught.value.status_code == 503
        assert caught.value.body["code"] == "store_unavailable"
        assert caught.value.response.headers["Retry-After"] == "1"
        assert str(own_redis.port) not in caught.value.message  # where Redis lives: not said
    health = requests.get(proxy.url + "/proxy/health?upstream=1", timeout=10,
                          headers={"Authorization": f"Bearer {KEY_A}"})
    assert health.status_code == 200  # told, not counted: the instance still serves
    assert health.json()["store"]["backend"] == "redis"
    assert health.json()["store"]["ok"] is False
    assert "store_unavailable" not in health.json()["store"]["error"]
    assert "cannot be read" in health.json()["store"]["error"]
    # The plain liveness check never reaches the store: it answers as long as the proxy does.
    assert "store" not in requests.get(proxy.url + "/proxy/health", timeout=10).json()
    fake.answer(Answer(body=vllm_completion("no store needed")))
    assert client.responses.create(model="qwen", input="y",
                                   store=False).output_text == "no store needed"
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')))
    _tool_turn_with_key(proxy.url)
    # A turn that asks to be kept needs the store: refused before upstream is called, never
    # an answer silently not kept.
    asked = len(fake.chat_requests())
    with pytest.raises(openai.InternalServerError) as caught:
        client.responses.create(model="qwen", input="z")
    assert caught.value.status_code == 503
    assert caught.value.body["code"] == "store_unavailable"
    assert len(fake.chat_requests()) == asked
    own_redis.start()  # back on the same port: the store serves again (empty: no persistence)
    wait_for(lambda: requests.get(proxy.url + "/proxy/health?upstream=1", timeout=10,
                                   headers={"Authorization": f"Bearer {KEY_A}"}
                                   ).json()["store"]["ok"], 30)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(kept.id)
    fake.answer(Answer(body=vllm_completion("kept again")))
    again = client.responses.create(model="qwen", input="x")
    assert client.responses.retrieve(again.id).output_text == "kept again"


def test_a_redis_frozen_at_the_write_notes_the_answer_unconfirmed_and_keeps_it(
        fake, own_redis, start_proxy, log_lines):
    """Redis stopped (SIGSTOP) while upstream answers: the write times out, but Redis runs it
    when it wakes. The line says the keeping is unconfirmed, not that the answer was lost."""
    proxy = start_proxy(responses_store_url=own_redis.url + "?socket_timeout=0.5",
                        log_level="info")
    pid = own_redis.process.pid
    fake.answer(Answer(body=vllm_completion("kept")))  # Redis knows the script from now on
    proxy.client().responses.create(model="qwen", input="x")

    def freeze_then_answer(received):
        os.kill(pid, signal.SIGSTOP)
        return Answer(body=vllm_completion("kept while frozen"))

    fake.answer(freeze_then_answer)
    try:
        answer = proxy.client().responses.create(model="qwen", input="y")
    finally:
        os.kill(pid, signal.SIGCONT)
    line = log_lines(2)[-1]
    assert "answer_keep_unconfirmed" in line["notes"]
    assert "answer_not_kept" not in line["notes"]
    assert proxy.client().responses.retrieve(answer.id).output_text == "kept while frozen"


def _tool_turn_with_key(url: str) -> None:
    """The chat front's streaming tool turn (needs no store) with the instance's key."""
    client = openai.OpenAI(base_url=url + "/v1", api_key=KEY_A, max_retries=0, timeout=30)
    stream = client.chat.completions.create(
        model="q", messages=[{"role": "user", "content": "?"}], tools=TOOLS, stream=True)
    names = [call.function.name for chunk in stream for choice in chunk.choices
             for call in choice.delta.tool_calls or () if call.function.name]
    assert names == ["read"]


@contextlib.contextmanager
def _silent_redis() -> Iterator[tuple[int, threading.Event, list]]:
    """A TCP server that accepts and never answers (a Redis that hangs) until `release` is
    set, then stops listening and closes what it accepted; yields its port, the event and
    the accepted list."""
    import socket

    release = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    accepted: list = []

    def serve() -> None:
        while not release.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append(listener.accept()[0])
        listener.close()  # and no more connections: a retry is refused
        for conn in accepted:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], release, accepted
    finally:
        release.set()
        thread.join()


def test_a_silent_redis_holds_only_its_own_turn_under_gevent(fake, start_instance):
    """One gevent worker: a request stuck on a Redis that never answers leaves the worker
    free to serve other turns (the redis client's sockets are gevent's), and ends as a 503
    when the connection breaks."""
    with _silent_redis() as (port, release, accepted):
        proxy = start_instance(f"redis://127.0.0.1:{port}/0?socket_timeout=120", workers=1)
        stuck: list[requests.Response] = []
        probed = len(accepted)  # the health checks' connections, so far
        waiting = threading.Thread(target=lambda: stuck.append(requests.get(
            proxy.url + "/v1/responses/resp_x", timeout=180,
            headers={"Authorization": f"Bearer {KEY_A}"})), daemon=True)
        waiting.start()
        wait_for(lambda: len(accepted) > probed, 60)  # the worker now waits on "Redis"
        fake.answer(Answer(body=vllm_completion(
            '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')))
        _tool_turn_with_key(proxy.url)
        assert not stuck  # still waiting on Redis while the other turn was served
        release.set()
        waiting.join(timeout=60)
    assert stuck[0].status_code == 503
    assert stuck[0].json()["error"]["code"] == "store_unavailable"


def test_the_official_tool_turn_helper_still_applies(fake, redis_url, start_instance):
    """A keyless instance on Redis serves the shared entrypoint's tool turn."""
    proxy = start_instance(redis_url, workers=1, keys="")
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')))
    tool_turn(proxy.url)


def _responses_served(instance: Instance) -> float:
    """How many Responses requests the instance has answered (its Prometheus counter)."""
    text = requests.get(instance.url + "/proxy/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("toolcall_proxy_requests_total{") and
               'front="responses"' in line)


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed here")
def test_two_instances_behind_the_shipped_nginx_site_share_one_redis(
        fake, redis_url, start_instance, tmp_path):
    """The shipped site with both instances in its `upstream` block: nginx takes turns
    between them, and every request finds the state the other instance left."""
    one, two = start_instance(redis_url), start_instance(redis_url)
    servers = ";\n    server ".join(i.url.removeprefix("http://") for i in (one, two))
    with shipped_nginx(tmp_path, servers) as port:
        front = f"http://127.0.0.1:{port}/v1"
        clients = [openai.OpenAI(base_url=front, api_key=key, max_retries=0, timeout=30)
                   for key in (KEY_A, KEY_A, KEY_B)]
        for _ in range(2):  # each step lands on the other instance the second time round
            _kept_through_one_continued_read_and_deleted_through_another(fake, *clients)
    for instance in (one, two):
        wait_for(lambda instance=instance: _responses_served(instance) >= 4, 30)
    site = (DEPLOY / "nginx-toolcall-proxy.conf").read_text()
    assert "# server 127.0.0.1:8005;" in site  # the site shows where a second one goes
