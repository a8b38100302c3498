"""The streamed mode (`stream_mode: stream`, issue 19) through real HTTP: the proxy in front of
the fake vLLM, read with the OpenAI SDK. Text and reasoning flow while upstream is still
writing; what could be a call waits; the answer is the buffered mode's; faults end cleanly."""

from __future__ import annotations

import time
from typing import Any

import openai
import orjson
import pytest
import requests

from proxy.base.config import Config
from proxy.diagnose.replay import format_report, parse_exchanges, replay_exchange
from tests.clients import Reader, delta, raw_request, read_until
from tests.conftest import TOOLS
from tests.fake_vllm import (
    Answer,
    paused_after,
    vllm_answer,
    vllm_completion,
    vllm_error,
    vllm_stream_of,
    vllm_tool_call,
)
from tests.streamed_cases import assembled
from tests.toolcalls.test_formats import NEGATIVE, POSITIVE

# Text flows live from a model whose template opens no thinking block (with `auto`, the
# content would wait for a lone closer that may still come).
LIVE = {"stream_mode": "stream", "thinking_opened_by_template": "false"}

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
PROSE = "Let me look that up for you, it takes a moment. "
CALL = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n'
        "</tool_call>")
LIMIT = 20  # seconds: every wait in these tests is bounded by this, far above what they take


def _request(**extra: Any) -> dict[str, Any]:
    return {"model": "qwen", "messages": MESSAGES, "tools": TOOLS, "stream": True, **extra}


def test_text_reaches_the_client_while_upstream_is_still_writing(fake, start_proxy):
    proxy = start_proxy(**LIVE)
    events = vllm_stream_of(vllm_completion(PROSE + "And more text after the pause."), size=6)
    answer, resume = paused_after(events, "moment")
    fake.answer(answer)
    try:
        reader = Reader(proxy.client().chat.completions.create(**_request()))
        first = reader.next_where(lambda chunk: delta(chunk).get("content"))
        assert first is not None
        assert not resume.is_set()  # it came while upstream was paused mid-answer
        text = "".join(delta(chunk).get("content", "") for chunk in reader.seen)
        assert PROSE.startswith(text)
    finally:
        resume.set()
    chunks = reader.rest()
    assert "".join(delta(c).get("content", "") for c in chunks) == (
        PROSE + "And more text after the pause.")
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_reasoning_flows_at_once_under_the_configured_field(fake, start_proxy):
    proxy = start_proxy(**LIVE, reasoning_field="reasoning")
    completion = vllm_completion(CALL, reasoning="The user wants the weather; I will call it.")
    answer, resume = paused_after(vllm_stream_of(completion, size=5), "will")
    fake.answer(answer)
    try:
        reader = Reader(proxy.client().chat.completions.create(**_request()))
        first = reader.next_where(lambda chunk: delta(chunk).get("reasoning"))
        assert not resume.is_set()
        assert "reasoning_content" not in delta(first)
    finally:
        resume.set()
    chunks = reader.rest()
    assert "".join(delta(c).get("reasoning", "") for c in chunks) == (
        "The user wants the weather; I will call it.")


def test_a_frame_is_held_until_the_end_and_its_call_sent_whole(fake, start_proxy):
    proxy = start_proxy(**LIVE)
    answer, resume = paused_after(vllm_stream_of(vllm_completion(PROSE + CALL), size=4),
                                   "Paris")
    fake.answer(answer)
    try:
        reader = Reader(proxy.client().chat.completions.create(**_request()))
        reader.next_where(lambda chunk: "moment." in "".join(
            delta(c).get("content", "") for c in [*reader.seen, chunk]))
        time.sleep(0.3)  # upstream is paused inside the call's JSON: nothing more may come
        assert reader.chunks.empty()
    finally:
        resume.set()
    chunks = reader.rest()
    content = "".join(delta(c).get("content", "") for c in chunks)
    assert content == PROSE.rstrip()
    calls = [call for c in chunks for call in delta(c).get("tool_calls", ())]
    assert calls[0]["function"] == {"name": "get_weather", "arguments": ""}
    assert orjson.loads(calls[1]["function"]["arguments"]) == {"city": "Paris", "days": 3}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("shape", [{}, {"cumulative": True}, {"cumulative": True, "ids": False},
                                   {"indexes": False}])
def test_upstreams_own_call_deltas_are_accumulated_never_passed_on_piecemeal(
        fake, start_proxy, shape):
    proxy = start_proxy(**LIVE)
    arguments = '{"city": "Paris", "days": 3, "notes": {"units": ["C", "km/h"]}}'
    completion = vllm_completion("Checking.", tool_calls=[
        vllm_tool_call("get_weather", arguments), vllm_tool_call("read", '{"path": "/a"}')],
        finish_reason="tool_calls")
    answer, resume = paused_after(vllm_stream_of(completion, size=5, **shape), "units")
    fake.answer(answer)
    try:
        reader = Reader(proxy.client().chat.completions.create(**_request()))
        assert delta(reader.next_where(lambda c: delta(c).get("content")))["content"] == (
            "Checking.")
        time.sleep(0.3)  # paused inside the first call's arguments: no call may come yet
        assert reader.chunks.empty()
    finally:
        resume.set()
    calls = [call for c in reader.rest() for call in delta(c).get("tool_calls", ())]
    assert [(c["index"], c["function"]["name"]) for c in calls if c.get("id")] == [
        (0, "get_weather"), (1, "read")]
    assert [orjson.loads(c["function"]["arguments"]) for c in calls if not c.get("id")] == [
        orjson.loads(arguments), {"path": "/a"}]


def test_heartbeats_only_while_nothing_else_flows(fake, start_proxy):
    proxy = start_proxy(**LIVE, heartbeat_seconds=0.5, commit_window_seconds=0.1)
    events = vllm_stream_of(vllm_completion("one two three four five six seven."), size=3)
    fake.answer(Answer(chunks=events, pauses={len(events) // 2: 2.5}))
    chunks = list(proxy.client().chat.completions.create(**_request()))
    kinds = ["beat" if delta(c) == {} and c.choices and not c.choices[0].finish_reason
             else "text" if delta(c).get("content") else "other" for c in chunks]
    text_at = [i for i, kind in enumerate(kinds) if kind == "text"]
    beats_at = [i for i, kind in enumerate(kinds) if kind == "beat"]
    assert beats_at  # the 2.5 s pause was filled
    assert all(text_at[0] < i < text_at[-1] for i in beats_at)  # and only the pause
    assert len(beats_at) <= 6


def test_an_error_before_the_first_byte_keeps_its_status(fake, start_proxy):
    proxy = start_proxy(**LIVE)
    fake.answer(vllm_error(400, "This model's maximum context length is 32768 tokens."))
    with pytest.raises(openai.BadRequestError) as caught:
        list(proxy.client().chat.completions.create(**_request()))
    assert "maximum context length" in caught.value.message
    fake.answer(Answer(status=429, body={"error": {"message": "busy", "type": "x", "code": 429}},
                       headers={"Retry-After": "3"}))
    response = requests.post(proxy.url + "/v1/chat/completions", json=_request(), timeout=LIMIT)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "3"


def _raw_events(proxy: Any) -> list[bytes]:
    raw = requests.post(proxy.url + "/v1/chat/completions", json=_request(),
                        timeout=LIMIT).content
    return [event for event in raw.split(b"\n\n") if event]


@pytest.mark.parametrize(("case", "code"), [
    ("error_event", "500"), ("cut", "upstream_stream_cut"), ("no_done", "upstream_stream_cut"),
    ("half_event", "upstream_stream_cut"), ("not_json", "upstream_invalid_json"),
])
def test_a_fault_after_the_first_byte_ends_the_stream_with_an_error(
        fake, start_proxy, case, code):
    proxy = start_proxy(**LIVE)
    events = vllm_stream_of(vllm_completion(PROSE + "The end."), size=8)
    body = events[:4]
    answer = {
        "error_event": Answer(chunks=[*body, b'data: {"error": {"message": "engine died", '
                                             b'"type": "InternalServerError", "code": 500}}\n\n',
                                      b"data: [DONE]\n\n"]),
        "cut": Answer(chunks=events, cut_after=4),
        "no_done": Answer(chunks=events[:-1]),
        "half_event": Answer(chunks=[*body, events[4][:20]]),
        "not_json": Answer(chunks=[*body, b"data: <html>oops</html>\n\n", events[-1]]),
    }[case]
    fake.answer(answer)
    events_out = _raw_events(proxy)
    assert events_out[-1] == b"data: [DONE]"
    error = orjson.loads(events_out[-2].removeprefix(b"data: "))["error"]
    assert error["code"] == code
    texts = [orjson.loads(e.removeprefix(b"data: "))["choices"][0]["delta"].get("content")
             for e in events_out[:-2]]
    flowed = "".join(t or "" for t in texts)
    assert flowed  # text had flowed before the fault
    assert (PROSE + "The end.").startswith(flowed)
    with pytest.raises(openai.APIError):
        list(proxy.client().chat.completions.create(**_request()))


def test_a_client_that_leaves_closes_the_upstream_stream_within_a_heartbeat(fake, start_proxy):
    proxy = start_proxy(**LIVE, heartbeat_seconds=1.0, commit_window_seconds=0.1)
    events = vllm_stream_of(vllm_completion(PROSE + "more"), size=8)
    fake.answer(Answer(chunks=events, pauses={2: 20.0}))
    sock = raw_request(proxy.url, _request())
    assert b"content" in read_until(sock, b'"content":"Let')
    sock.close()
    left = time.monotonic()
    gone = fake.first_disconnect(within=5)
    assert gone is not None, "the proxy kept reading the upstream stream for nobody"
    assert gone - left < 1.5


def test_a_stopping_server_ends_a_flowing_stream_retryably(fake, start_proxy):
    proxy = start_proxy(**LIVE, commit_window_seconds=0.1)
    fake.answer(Answer(chunks=vllm_stream_of(vllm_completion(PROSE), size=8), pauses={2: 20.0}))
    reader = Reader(proxy.client().chat.completions.create(**_request()))
    assert reader.next_where(lambda chunk: delta(chunk).get("content"))
    proxy.server.app.extensions["toolcall_proxy"].drain(0)
    reader.rest()
    assert isinstance(reader.error, openai.APIError)
    assert "restarting" in str(reader.error)


@pytest.mark.parametrize(("limit", "code"), [("buffered_timeout_seconds", "upstream_timeout"),
                                             ("read_timeout_seconds", "upstream_timeout")])
def test_a_stream_that_goes_on_too_long_or_goes_silent_ends_with_a_504(
        fake, start_proxy, limit, code):
    proxy = start_proxy(**LIVE, **{limit: 1.0})
    fake.answer(Answer(chunks=vllm_stream_of(vllm_completion(PROSE), size=8), pauses={2: 5.0}))
    events = _raw_events(proxy)
    assert events[-1] == b"data: [DONE]"
    assert orjson.loads(events[-2].removeprefix(b"data: "))["error"]["code"] == code


def test_upstream_is_asked_to_stream_with_usage_and_the_client_gets_usage_if_it_asked(
        fake, start_proxy):
    proxy = start_proxy(**LIVE)
    fake.answer(vllm_answer(vllm_completion(PROSE)))
    chunks = list(proxy.client().chat.completions.create(**_request()))
    sent = fake.chat_requests()[-1].json
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert all(chunk.usage is None for chunk in chunks)
    chunks = list(proxy.client().chat.completions.create(
        **_request(stream_options={"include_usage": True})))
    assert chunks[-1].usage.total_tokens == 52


def test_a_tool_choice_that_demands_a_call_is_answered_buffered(fake, start_proxy):
    """Another generation replaces an answer without the call; text already shown could not
    be taken back, so such a turn is buffered while a retry or a constrained re-ask is
    configured."""
    fake.answer(vllm_answer(vllm_completion(CALL)))
    required = _request(tool_choice="required")
    list(start_proxy(**LIVE).client().chat.completions.create(**required))
    assert fake.chat_requests()[-1].json["stream"] is False
    list(start_proxy(**LIVE, required_call_retries=0).client().chat.completions.create(
        **required))
    assert fake.chat_requests()[-1].json["stream"] is False
    proxy = start_proxy(**LIVE, required_call_retries=0, constrained_reask="off")
    chunks = list(proxy.client().chat.completions.create(**required))
    assert fake.chat_requests()[-1].json["stream"] is True
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_stream_mode_per_model_and_only_for_clients_that_stream(fake, start_proxy):
    proxy = start_proxy(models={"qwen*": LIVE})
    fake.answer(vllm_answer(vllm_completion(PROSE + CALL)))
    client = proxy.client()
    list(client.chat.completions.create(**_request(model="qwen3")))
    assert fake.chat_requests()[-1].json["stream"] is True
    list(client.chat.completions.create(**_request(model="llama")))
    assert fake.chat_requests()[-1].json["stream"] is False
    whole = client.chat.completions.create(**_request(model="qwen3", stream=False))
    assert fake.chat_requests()[-1].json["stream"] is False
    assert whole.choices[0].message.tool_calls[0].function.name == "get_weather"


def test_an_upstream_that_answers_json_to_a_stream_request_still_answers(fake, start_proxy):
    proxy = start_proxy(**LIVE)
    fake.answer(Answer(body=vllm_completion(PROSE + CALL)))  # ignores `stream: true`
    chunks = list(proxy.client().chat.completions.create(**_request()))
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def _sdk_message(proxy: Any, **extra: Any) -> dict[str, Any]:
    raw = requests.post(proxy.url + "/v1/chat/completions", timeout=LIMIT,
                        json=_request(stream_options={"include_usage": True}, **extra)).content
    return assembled(raw)


# ~10 s of CPU on an idle machine (hundreds of turns over HTTP, read by the SDK): the suite's
# 60 s limit is a guard against hangs, and a heavily loaded runner tripped it.
@pytest.mark.timeout(600)
def test_the_format_cases_give_the_same_message_in_both_modes_over_http(fake, start_proxy):
    buffered, streamed = start_proxy(), start_proxy(**LIVE)
    for _, text, *_ in [*POSITIVE, *NEGATIVE]:
        completion = vllm_completion(text, reasoning="Thinking about it.")
        fake.answer(vllm_answer(completion, size=3))
        assert _sdk_message(streamed) == _sdk_message(buffered), text


def test_the_log_line_names_the_mode_and_when_text_first_flowed(
        fake, start_proxy, log_lines):
    proxy = start_proxy(**LIVE, log_level="info")
    fake.answer(vllm_answer(vllm_completion(PROSE + CALL)))
    list(proxy.client().chat.completions.create(**_request()))
    (line,) = log_lines(1)
    assert line["mode"] == "streamed"
    assert 0 < line["first_text_ms"] <= line["total_ms"]
    assert line["tool_calls"] == 1
    assert line["heartbeats"] == 0


def test_a_streamed_turn_captured_in_the_log_replays_to_what_the_client_got(
        fake, start_proxy, log_lines):
    """With `log_bodies`, the line holds the completion the stream added up to: `replay`
    decides on it as the server did."""
    proxy = start_proxy(**LIVE, log_bodies=True, log_level="info")
    fake.answer(vllm_answer(vllm_completion(PROSE + CALL, reasoning="Plan."), size=3))
    got = assembled(requests.post(proxy.url + "/v1/chat/completions", json=_request(),
                                  timeout=LIMIT).content)
    (line,) = log_lines(1)
    (exchange,) = parse_exchanges(orjson.dumps(line), "proxy.log")
    replay = replay_exchange(exchange, Config(stream_mode="stream"))
    assert replay.diagnostics["mode"] == "streamed"
    assert assembled(replay.output) == got
    assert "tool calls  1: get_weather" in format_report(replay)


def test_a_stream_the_upstream_compresses_reads_as_the_plain_one(fake, start_proxy):
    """A gzip-encoded event stream is decoded (a plain one is read as sent)."""
    import zlib

    proxy = start_proxy(**LIVE)
    events = vllm_stream_of(vllm_completion(PROSE + CALL), size=6)
    packer = zlib.compressobj(wbits=31)  # gzip
    packed = [packer.compress(event) + packer.flush(zlib.Z_SYNC_FLUSH) for event in events]
    packed[-1] += packer.flush()
    fake.answer(Answer(chunks=packed, headers={"Content-Type": "text/event-stream",
                                               "Content-Encoding": "gzip"}))
    raw = requests.post(proxy.url + "/v1/chat/completions", json=_request(),
                        timeout=LIMIT).content
    choice = assembled(raw)["choices"][0]
    assert choice["message"]["content"] == PROSE.strip()
    assert [call["function"]["name"] for call in choice["message"]["tool_calls"]] == [
        "get_weather"]
    assert choice["finish_reason"] == "tool_calls"
