"""Long tool turns: heartbeats, errors after the stream started, timeouts, disconnects."""

from __future__ import annotations

import json
import time

import orjson
import pytest
import requests

from tests.clients import raw_request, read_until
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion, vllm_error, vllm_stream_chunks

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "Plan the trip."}]
CALL_TEXT = ('Looking it up.\n<tool_call>{"name": "get_weather", "arguments": '
             '{"city": "Bergen", "days": 3}}</tool_call>')


def _sse_payloads(raw: bytes) -> list[str]:
    """The `data:` payloads and comment lines of a (possibly chunk-encoded) SSE body."""
    found = []
    for line in raw.split(b"\n"):
        line = line.strip(b"\r")
        if line.startswith(b"data: "):
            found.append(line[6:].decode())
        elif line.startswith(b": "):
            found.append(line.decode())
    return found


def _body(**extra):
    return {"model": "qwen", "messages": MESSAGES, "tools": TOOLS, "stream": True, **extra}


def test_role_chunk_then_heartbeats_while_upstream_works(fake, start_proxy):
    proxy = start_proxy(heartbeat_seconds=0.2, commit_window_seconds=0.1)
    fake.answer(Answer(body=vllm_completion(CALL_TEXT), delay=1.5))
    with raw_request(proxy.url, _body()) as sock:
        head = read_until(sock, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert b"X-Accel-Buffering: no" in head
        raw = head + read_until(sock, b"data: [DONE]")
    payloads = _sse_payloads(raw)
    chunks = [json.loads(p) for p in payloads if p.startswith("{")]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    answer_at = next(i for i, c in enumerate(chunks) if c["choices"][0]["delta"].get("content"))
    beats = [c for c in chunks[1:answer_at] if c["choices"][0]["delta"] == {}]
    assert len(beats) >= 3  # 1.5 s of upstream work at one beat per 0.2 s
    assert all(c["choices"][0]["finish_reason"] is None for c in beats)
    assert payloads[-1] == "[DONE]"


def test_comment_heartbeats_when_asked(fake, start_proxy):
    proxy = start_proxy(heartbeat_seconds=0.2, commit_window_seconds=0.1,
                        heartbeat_mode="comment")
    fake.answer(Answer(body=vllm_completion(CALL_TEXT), delay=1.0))
    response = requests.post(proxy.url + "/v1/chat/completions", json=_body(), timeout=10)
    payloads = _sse_payloads(response.content)
    assert payloads.count(": ping") >= 2
    assert not [p for p in payloads if p.startswith("{") and '"delta":{}' in p
                and '"finish_reason":null' in p]


def test_assembled_message_is_identical_with_and_without_heartbeats(fake, start_proxy):
    messages = []
    for heartbeat_seconds in (0.1, 0):
        proxy = start_proxy(heartbeat_seconds=heartbeat_seconds, commit_window_seconds=0.05)
        fake.answer(Answer(body=vllm_completion(CALL_TEXT, reasoning="Weather first."),
                           delay=0.8))
        with proxy.client().chat.completions.stream(model="qwen", messages=MESSAGES,
                                                    tools=TOOLS) as stream:
            final = stream.get_final_completion()
        message = final.choices[0].message.model_dump()
        for call in message["tool_calls"]:
            call.pop("id")
        messages.append((message, final.choices[0].finish_reason))
    assert messages[0] == messages[1]
    assert messages[0][1] == "tool_calls"


def test_upstream_error_after_start_arrives_in_stream(fake, start_proxy):
    proxy = start_proxy(heartbeat_seconds=0.2, commit_window_seconds=0.1)
    answer = vllm_error(500, "EngineCore died")
    answer.delay = 0.7
    fake.answer(answer)
    response = requests.post(proxy.url + "/v1/chat/completions", json=_body(), timeout=10)
    assert response.status_code == 200
    payloads = _sse_payloads(response.content)
    assert payloads[-1] == "[DONE]"
    error = json.loads(payloads[-2])["error"]
    assert error["message"] == "EngineCore died"
    assert error["code"] == "500"


def test_error_within_commit_window_keeps_its_status(fake, start_proxy):
    proxy = start_proxy(commit_window_seconds=2)
    answer = vllm_error(429, "Too many requests", "RateLimitError")
    answer.headers["Retry-After"] = "3"
    fake.answer(answer)
    response = requests.post(proxy.url + "/v1/chat/completions", json=_body(), timeout=10)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "3"
    assert response.json()["error"]["message"] == "Too many requests"


def test_buffered_total_limit_ends_the_stream_with_an_error(fake, start_proxy):
    proxy = start_proxy(heartbeat_seconds=0.1, commit_window_seconds=0.1,
                        buffered_timeout_seconds=0.6)
    fake.answer(Answer(body=vllm_completion(CALL_TEXT), delay=3))
    response = requests.post(proxy.url + "/v1/chat/completions", json=_body(), timeout=10)
    payloads = _sse_payloads(response.content)
    assert payloads[-1] == "[DONE]"
    assert json.loads(payloads[-2])["error"]["code"] == "upstream_timeout"
    deadline = time.monotonic() + 3
    while not fake.disconnects and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.disconnects  # the upstream call was cut, so vLLM stops generating


def test_client_leaving_cuts_the_upstream_call_within_a_heartbeat(fake, start_proxy):
    proxy = start_proxy(heartbeat_seconds=1.0, commit_window_seconds=0.1)
    fake.answer(Answer(body=vllm_completion(CALL_TEXT), delay=20))
    sock = raw_request(proxy.url, _body())
    assert b"data: " in read_until(sock, b"data: ")
    # The role chunk goes out after the commit window, whether or not the call has reached
    # upstream yet (on a loaded machine it may not have): leave once it has.
    assert fake.wait_chat_requests(), "the call never reached upstream"
    sock.close()
    left = time.monotonic()
    deadline = left + 5
    while not fake.disconnects and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.disconnects, "the proxy kept the upstream call open"
    assert fake.disconnects[0][1] - left < 1.5
    fake.answer(Answer(body=vllm_completion(CALL_TEXT)))
    follow_up = proxy.client().chat.completions.create(model="q", messages=MESSAGES,
                                                       tools=TOOLS)
    assert follow_up.choices[0].finish_reason == "tool_calls"


def test_client_leaving_a_passthrough_stream_closes_upstream(fake, proxy):
    fake.answer(Answer(chunks=vllm_stream_chunks("word " * 200, pieces=200), chunk_gap=0.05))
    sock = raw_request(proxy.url, {"model": "q", "messages": MESSAGES, "stream": True})
    assert b"data: " in read_until(sock, b"data: ")
    sock.close()
    deadline = time.monotonic() + 5
    while not fake.disconnects and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.disconnects, "the upstream stream ran to its end for nobody"


@pytest.mark.parametrize("first", [0, 1])
def test_client_leaving_a_silent_passthrough_stream_closes_upstream_at_once(fake, proxy, first):
    """Upstream sent its head (and maybe an event), then is silent for long (a prefill): the
    client leaving must reach it without waiting for upstream's next bytes."""
    chunks = vllm_stream_chunks("word " * 10, pieces=4)
    fake.answer(Answer(chunks=[*chunks[:first + 1], chunks[-1]], chunk_gap=30))
    sock = raw_request(proxy.url, {"model": "q", "messages": MESSAGES, "stream": True})
    head = read_until(sock, b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")  # the head arrives before upstream's first event
    assert b"X-Accel-Buffering: no" in head
    left = time.monotonic()
    sock.close()
    deadline = left + 5
    while not fake.disconnects and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.disconnects, "the upstream stream outlived its client"
    assert fake.disconnects[0][1] - left < 1.5


def test_a_passthrough_stream_cut_mid_event_ends_with_whole_events(fake, proxy):
    chunks = vllm_stream_chunks("hello there", pieces=2)
    half = chunks[1][:len(chunks[1]) // 2]
    fake.answer(Answer(chunks=[chunks[0], chunks[1] + half, chunks[-1]], cut_after=2))
    raw = requests.post(proxy.url + "/v1/chat/completions", timeout=10, json={
        "model": "q", "messages": MESSAGES, "stream": True}).content
    events = [event for event in raw.split(b"\n\n") if event]
    assert events[:2] == [chunks[0].strip(), chunks[1].strip()]
    assert orjson.loads(events[2][6:])["error"]["code"] == "upstream_stream_cut"
    assert events[3:] == [b"data: [DONE]"]
