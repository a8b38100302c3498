"""Upstream replicas through the real proxy, before real fake vLLMs: a conversation stays on
one replica from every proxy instance; a replica that is not there is passed over, the turn
going to another once, before its first byte; what the proxy reports of each replica."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from proxy.shell.config_load import build_config
from tests.conftest import TOOLS, RunningProxy
from tests.fake_vllm import (
    Answer,
    FakeVLLM,
    vllm_completion,
    vllm_error,
    vllm_stream_chunks,
    vllm_tool_call,
)
from tests.metrics_text import metric
from tests.serving import wait_for

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
CALL = vllm_completion(tool_calls=[vllm_tool_call("read", '{"path": "a"}')],
                       finish_reason="tool_calls")


@pytest.fixture
def fakes() -> Iterator[list[FakeVLLM]]:
    servers = [FakeVLLM(), FakeVLLM()]
    for server in servers:
        server.answer(Answer(body=CALL))
    yield servers
    for server in servers:
        server.close()


@pytest.fixture
def start() -> Iterator:
    started: list[RunningProxy] = []

    def run(upstream, **settings) -> RunningProxy:
        proxy = RunningProxy(build_config({"upstream": upstream, "log_level": "warning",
                                           **settings}))
        started.append(proxy)
        return proxy

    yield run
    for proxy in started:
        proxy.close()


def turn(proxy: RunningProxy, task: str, history: int = 0, **headers: str) -> requests.Response:
    messages = [{"role": "system", "content": "You are an agent."},
                {"role": "user", "content": task}]
    for i in range(history):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a"}'}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"}]
    return requests.post(proxy.url + "/v1/chat/completions", timeout=20, headers=headers,
                         json={"model": "qwen", "messages": messages, "tools": TOOLS})


def tasks_on(fake: FakeVLLM) -> list[str]:
    """The first user message of each chat request a fake received."""
    return [r.json["messages"][1]["content"] for r in fake.chat_requests()]


def app_of(proxy: RunningProxy):
    return proxy.server.app.extensions["toolcall_proxy"]


def test_a_conversation_stays_on_one_replica_from_every_proxy_instance(fakes, start):
    """Two proxy instances sharing nothing (listing the replicas in another order) send each
    conversation, turn after turn, to the same replica; the conversations spread."""
    urls = [fake.url for fake in fakes]
    first, second = start(urls), start(list(reversed(urls)))
    tasks = [f"task {i}" for i in range(24)]  # all on one replica: 2 in 2**24
    for history in range(3):
        for i, task in enumerate(tasks):
            response = turn(first if (i + history) % 2 else second, task, history)
            assert response.status_code == 200, response.text
    on = [set(tasks_on(fake)) for fake in fakes]
    assert on[0]
    assert on[1]
    assert on[0] | on[1] == set(tasks)
    assert not on[0] & on[1]
    assert all(len(tasks_on(fake)) == 3 * len(on[i]) for i, fake in enumerate(fakes))


def test_a_session_header_keeps_a_session_on_one_replica(fakes, start):
    proxy = start([fake.url for fake in fakes])
    for i in range(8):
        assert turn(proxy, f"task {i}", **{"X-Session-Affinity": "ses_42"}).status_code == 200
    assert sorted(len(fake.chat_requests()) for fake in fakes) == [0, 8]


def test_claude_code_s_session_header_on_the_messages_front(fakes, start):
    """Claude Code's `X-Claude-Code-Session-Id`, through the Messages front: its
    conversations (other first messages each) stay where the session is."""
    proxy = start([fake.url for fake in fakes])
    tools = [{"name": "read", "input_schema": {"type": "object", "properties": {
        "path": {"type": "string"}}}}]
    for i in range(8):
        response = requests.post(proxy.url + "/v1/messages", timeout=20, headers={
            "X-Claude-Code-Session-Id": "6f1c2d3e", "anthropic-version": "2023-06-01"},
            json={"model": "qwen", "max_tokens": 64, "tools": tools,
                  "messages": [{"role": "user", "content": f"task {i}"}]})
        assert response.status_code == 200, response.text
        assert response.json()["content"][-1]["type"] == "tool_use"
    assert sorted(len(fake.chat_requests()) for fake in fakes) == [0, 8]


def test_a_refusing_replica_is_passed_over_once_and_reported(fakes, start, log_lines):
    fake = fakes[0]
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}"
        proxy = start([refused, fake.url], log_level="info", upstream_down_seconds=300)
        for i in range(20):  # none of them hashed to the refused replica: 1 in 2**20
            assert turn(proxy, f"task {i}").status_code == 200
        assert len(fake.chat_requests()) == 20  # each turn answered once
        metrics = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
        # the first conversation that hashed to it failed over; then it was down
        assert metric(metrics, "toolcall_proxy_replica_failovers_total", replica=refused) == 1
        assert metric(metrics, "toolcall_proxy_replica_requests_total", replica=refused,
                      result="upstream_unreachable") == 1
        assert metric(metrics, "toolcall_proxy_replica_requests_total", replica=fake.url,
                      result="ok") == 20
        assert metric(metrics, "toolcall_proxy_replica_up", replica=refused) == 0
        health = requests.get(proxy.url + "/proxy/health?upstream=1", timeout=10)
    assert health.status_code == 503
    reports = {r["url"]: r for r in health.json()["upstreams"]}
    assert reports[refused]["up"] is False
    assert reports[refused]["in_flight"] == 0
    assert "could not be reached" in reports[refused]["last_error"]
    assert reports[fake.url]["up"] is True
    assert reports[fake.url]["last_error"] is None
    assert health.json()["upstream"] == [refused, fake.url]
    lines = [line for line in log_lines(20) if line["path"] == "/v1/chat/completions"]
    assert {line["replica"] for line in lines} == {fake.url}
    assert sum("failover:upstream_unreachable" in line.get("notes", []) for line in lines) == 1


def test_a_gateway_error_goes_to_the_other_replica_once(fakes, start):
    for fake in fakes:
        fake.answer(vllm_error(503, "overloaded", "ServiceUnavailableError"))
    proxy = start([fake.url for fake in fakes])
    response = turn(proxy, "task")
    assert response.status_code == 503
    assert [len(fake.chat_requests()) for fake in fakes] == [1, 1]  # never a third time
    assert {r["up"] for r in app_of(proxy).replica_reports()} == {False}


def test_a_gateway_error_then_an_answer(fakes, start):
    proxy = start([fake.url for fake in fakes])
    assert turn(proxy, "task").status_code == 200
    chosen = next(fake for fake in fakes if fake.chat_requests())
    chosen.answer(vllm_error(502, "bad gateway", "BadGateway"))
    response = turn(proxy, "task")
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read"
    other = next(fake for fake in fakes if fake is not chosen)
    assert len(other.chat_requests()) == 1
    assert len(chosen.chat_requests()) == 2


def test_a_stream_that_has_begun_is_never_sent_again(fakes, start):
    """The streamed mode: text flowed to the client, then the replica cut the stream: the
    client sees the error in its stream, and no other replica is asked."""
    for fake in fakes:
        fake.answer(Answer(chunks=vllm_stream_chunks("Reading the file now, then more."),
                           cut_after=3))
    # The text flows live at once (no template that may open thinking holds it).
    proxy = start([fake.url for fake in fakes], stream_mode="stream",
                  thinking_opened_by_template="false")
    response = requests.post(proxy.url + "/v1/chat/completions", timeout=20, json={
        "model": "qwen", "stream": True, "tools": TOOLS,
        "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 200
    assert b'"code":"upstream_stream_cut"' in response.content
    assert sum(len(fake.chat_requests()) for fake in fakes) == 1


def test_a_stream_refused_before_its_first_event_goes_to_the_other(fakes, start):
    for fake in fakes:
        fake.answer(Answer(chunks=vllm_stream_chunks("All good.")))
    proxy = start([fake.url for fake in fakes], stream_mode="stream")
    body = {"model": "qwen", "stream": True, "tools": TOOLS,
            "messages": [{"role": "user", "content": "hi"}]}
    requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=20)
    chosen = next(fake for fake in fakes if fake.chat_requests())
    chosen.answer(vllm_error(504, "gateway timeout", "GatewayTimeout"))
    response = requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=20)
    assert response.status_code == 200
    assert b"All" in response.content
    assert b'"error"' not in response.content
    assert [len(fake.chat_requests()) for fake in fakes].count(1) == 1


def test_a_replica_marked_down_comes_back_after_its_probe(fakes, start):
    proxy = start([fake.url for fake in fakes], upstream_down_seconds=0.2)
    turn(proxy, "task")
    chosen = next(fake for fake in fakes if fake.chat_requests())
    chosen.answer(vllm_error(503, "loading", "ServiceUnavailableError"))
    assert turn(proxy, "task").status_code == 200  # failed over
    state = {r["url"]: r for r in app_of(proxy).replica_reports()}
    assert state[chosen.url]["up"] is False
    assert state[chosen.url]["last_error"] == "HTTP 503"
    chosen.answer(Answer(body=CALL))  # it is back
    app = app_of(proxy)

    def back() -> bool:
        turn(proxy, "another task")  # each look at the replicas may start its probe
        return {r["url"]: r for r in app.replica_reports()}[chosen.url]["up"]

    wait_for(back)
    assert any(r.path == "/health" for r in chosen.received)
    before = len(chosen.chat_requests())
    assert turn(proxy, "task").status_code == 200
    assert len(chosen.chat_requests()) == before + 1  # the conversation is home again


def test_one_upstream_is_as_it_always_was(fakes, start, log_lines):
    """One URL (or a list of one): never marked down, never probed, no replica in the log."""
    fake = fakes[0]
    fake.answer(vllm_error(503, "loading", "ServiceUnavailableError"))
    proxy = start([fake.url], log_level="info", upstream_down_seconds=0.01)
    assert proxy.config.upstream == fake.url
    for _ in range(3):
        assert turn(proxy, "task").status_code == 503
    assert len(fake.chat_requests()) == 3
    # never probed (what the upstream's profile reads of it aside: /v1/models, /tokenize)
    assert [r.path for r in fake.received if r.path in ("/health",)] == []
    assert all("replica" not in line for line in log_lines(3))
    assert app_of(proxy).replica_reports()[0]["up"] is True


def test_a_request_without_a_conversation_goes_to_the_least_busy(fakes, start):
    release = threading.Event()
    for fake in fakes:
        fake.answer(lambda r: Answer(body=CALL if r.path.startswith("/v1/chat")
                                     and release.wait(15) else {"version": "0.33"}))
    proxy = start([fake.url for fake in fakes])
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(turn, proxy, "a long task")
        wait_for(lambda: any(fake.chat_requests() for fake in fakes))
        busy = next(fake for fake in fakes if fake.chat_requests())
        for _ in range(3):
            response = requests.get(proxy.url + "/version", timeout=10)
            assert response.status_code == 200
            # its call is in flight until the server has closed the response (just after the
            # client read it): the next request then sees only the held turn
            wait_for(lambda: sum(r["in_flight"] for r in app_of(proxy).replica_reports()) == 1)
        release.set()
        assert held.result().status_code == 200
    idle = next(fake for fake in fakes if fake is not busy)
    assert [r.path for r in idle.received] == ["/version"] * 3
    # (beside the one turn, the busy one was asked only what its profile reads of it)
    assert [r.path for r in busy.received if r.path.startswith("/v1/chat")] == [
        "/v1/chat/completions"]


def _fake_process(delay: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "tests.fake_vllm", str(delay)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def test_killing_one_of_two_replicas_in_the_middle_of_100_turns(start):
    """Four agents at a time, 100 tool turns (the client streams, with the openai SDK);
    one replica is killed after the 50th: every turn succeeds, each answered once."""
    processes = [_fake_process(0.05) for _ in range(2)]
    try:
        proxy = start([url for _, url in processes], connect_timeout_seconds=2)
        client = proxy.client(timeout=30)
        done = threading.Semaphore(0)

        def one(i: int) -> list:
            stream = client.chat.completions.create(
                model="qwen", stream=True, tools=TOOLS,
                messages=[{"role": "user", "content": f"task {i}"}])
            chunks = list(stream)
            done.release()
            return chunks

        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(one, i) for i in range(100)]
            for _ in range(50):
                done.acquire(timeout=60)
            os.killpg(processes[0][0].pid, signal.SIGKILL)
            results = [future.result() for future in futures]
        for chunks in results:
            calls = [call for chunk in chunks for call in (chunk.choices[0].delta.tool_calls
                                                           or []) if chunk.choices]
            finishes = [chunk.choices[0].finish_reason for chunk in chunks
                        if chunk.choices and chunk.choices[0].finish_reason]
            assert [call.function.name for call in calls if call.id] == ["read"]
            assert finishes == ["tool_calls"]
        reports = {r["url"]: r for r in app_of(proxy).replica_reports()}
        assert reports[processes[0][1]]["up"] is False
        assert reports[processes[1][1]]["up"] is True
        assert all(r["in_flight"] == 0 for r in reports.values())
        metrics = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
        assert metric(metrics, "toolcall_proxy_replica_failovers_total",
                      replica=processes[0][1]) >= 1
    finally:
        for process, _ in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.mark.parametrize("tools", [True, False])
def test_a_replica_that_is_slow_to_answer_is_not_asked_twice(fakes, start, tools):
    """A read timeout alone is no sign of a replica gone (it may be generating): the request
    is not sent to another, and the replica, probed, answers its /health: it stays up."""
    for fake in fakes:  # busy generating, as vLLM is: its /health answers at once
        fake.answer(lambda r: Answer(body=CALL, delay=3) if r.path.startswith("/v1/chat")
                    else Answer(body={}))
    proxy = start([fake.url for fake in fakes], read_timeout_seconds=0.3,
                  buffered_timeout_seconds=0.3)
    body = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}]}
    if tools:
        body["tools"] = TOOLS
    response = requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=20)
    assert response.status_code == 504
    assert sum(len(fake.chat_requests()) for fake in fakes) == 1
    (asked,) = [fake for fake in fakes if fake.chat_requests()]
    wait_for(lambda: any(r.path == "/health" for r in asked.received))
    assert {r["up"] for r in app_of(proxy).replica_reports()} == {True}


@pytest.mark.parametrize("tools", [True, False])
def test_a_replica_that_accepts_and_never_answers_is_marked_down(fakes, start, tools):
    """A socket that accepts connections (the kernel's backlog) and never answers: the turn
    routed there waits its time and fails; its replica, probed, does not answer either and
    is marked down, so the same conversation's next turn goes to the other."""
    fake = fakes[0]
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        mute = f"http://127.0.0.1:{silent.getsockname()[1]}"
        proxy = start([mute, fake.url], read_timeout_seconds=0.5,
                      buffered_timeout_seconds=0.5, upstream_down_seconds=300)
        body = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}]}
        if tools:
            body["tools"] = TOOLS
        for i in range(40):  # a conversation at home on the silent one: 1 in 2 each
            body["messages"][0]["content"] = f"task {i}"
            first = requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=20)
            if first.status_code == 504:
                break
        assert first.status_code == 504
        reports = lambda: {r["url"]: r for r in app_of(proxy).replica_reports()}  # noqa: E731
        wait_for(lambda: not reports()[mute]["up"])
        asked = len(fake.chat_requests())
        again = requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=20)
        assert again.status_code == 200
        assert len(fake.chat_requests()) == asked + 1
        assert "probe" in reports()[mute]["last_error"]


def test_the_model_list_asks_one_replica_and_passes_over_one_that_is_down(fakes, start):
    proxy = start([fake.url for fake in fakes])
    listed = requests.get(proxy.url + "/v1/models", timeout=10)
    assert [m["id"] for m in listed.json()["data"]] == [fakes[0].model]
    asked = [sum(r.path == "/v1/models" for r in fake.received) for fake in fakes]
    assert sorted(asked) == [0, 1]
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}"
        proxy = start([refused, fakes[1].url])
        listed = requests.get(proxy.url + "/v1/models", timeout=10)  # the first refuses
        assert listed.status_code == 200
        assert [m["id"] for m in listed.json()["data"]] == [fakes[1].model]


def test_a_replica_over_its_bounded_share_passes_turns_to_the_next(fakes, start):
    """Eight turns of one session at once (answers held): the session's replica takes them
    while it holds at most ⌈1.25 × the average⌉ in flight, the next replica the rest; when
    they are done, the session's turns go home again."""
    release = threading.Event()
    for fake in fakes:
        fake.answer(lambda r: Answer(body=CALL) if release.wait(15) else Answer(status=500))
    proxy = start([fake.url for fake in fakes])
    session = {"X-Session-Affinity": "ses_busy"}
    with ThreadPoolExecutor(8) as pool:
        held = []
        for i in range(8):
            held.append(pool.submit(turn, proxy, f"task {i}", **session))
            wait_for(lambda n=i + 1: sum(len(f.chat_requests()) for f in fakes) == n)
        counts = sorted(len(fake.chat_requests()) for fake in fakes)
        release.set()
        assert all(future.result().status_code == 200 for future in held)
    # the n-th finds room ⌈1.25 n / 2⌉: home takes the 1st, 2nd, 4th, 5th and 7th
    assert counts == [3, 5]
    home = max(fakes, key=lambda fake: len(fake.chat_requests()))
    assert turn(proxy, "task 9", **session).status_code == 200
    assert len(home.chat_requests()) == 6
