"""The streamed mode on the Responses and Messages fronts (issue 19, item 4): the same turn,
so text and reasoning flow while upstream writes, a call arrives whole, and the finished
answer is the buffered mode's. Read with each API's official SDK."""

from __future__ import annotations

import queue
import threading
from typing import Any

import anthropic
import pytest

from tests.fake_vllm import Answer, paused_after, vllm_answer, vllm_completion, vllm_stream_of

# Text flows live from a model whose template opens no thinking block (with `auto`, the
# content would wait for a lone closer that may still come).
LIVE = {"stream_mode": "stream", "thinking_opened_by_template": "false"}
LIVE_IF = {"stream": LIVE, "buffer": {"stream_mode": "buffer"}}

pytestmark = pytest.mark.integration

PROSE = "Let me look that up for you, it takes a moment. "
CALL = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call>")
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
LIMIT = 20


def _paused_after_text(completion: dict, marker: str) -> tuple[Answer, threading.Event]:
    """The streamed answer, paused once what it has written holds `marker`."""
    return paused_after(vllm_stream_of(completion, size=6), marker)


def _read_on_a_thread(events: Any) -> queue.Queue:
    seen: queue.Queue = queue.Queue()

    def run() -> None:
        try:
            for event in events:
                seen.put(event)
        finally:
            seen.put(None)

    threading.Thread(target=run, daemon=True).start()
    return seen


def _until(seen: queue.Queue, test: Any) -> list:
    got = []
    while (event := seen.get(timeout=LIMIT)) is not None:
        got.append(event)
        if test(event):
            return got
    raise AssertionError(f"the stream ended first: {[getattr(e, 'type', e) for e in got]}")


def _rest(seen: queue.Queue) -> list:
    got = []
    while (event := seen.get(timeout=LIMIT)) is not None:
        got.append(event)
    return got


# -- Responses ------------------------------------------------------------------------------

def _responses_request(proxy: Any, **extra: Any) -> Any:
    return proxy.client().responses.create(
        model="qwen", input="What is the weather in Paris?", stream=True, store=False,
        tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER}], **extra)


def test_responses_text_flows_while_upstream_writes_and_the_call_arrives_whole(
        fake, start_proxy, tmp_path):
    proxy = start_proxy(**LIVE, responses_store_path=str(tmp_path / "r.db"))
    answer, resume = _paused_after_text(vllm_completion(PROSE + CALL), "moment")
    fake.answer(answer)
    try:
        seen = _read_on_a_thread(_responses_request(proxy))
        _until(seen, lambda e: e.type == "response.output_text.delta")
        assert not resume.is_set()  # the text came while upstream was paused
    finally:
        resume.set()
    events = _rest(seen)
    final = events[-1]
    assert final.type == "response.completed"
    output = final.response.output
    assert [item.type for item in output] == ["message", "function_call"]
    assert output[0].content[0].text == PROSE.rstrip()
    assert (output[1].name, output[1].arguments) == ("get_weather", '{"city":"Paris"}')


def test_responses_streamed_and_buffered_end_alike(fake, start_proxy, tmp_path):
    finals = []
    for mode in ("buffer", "stream"):
        proxy = start_proxy(**LIVE_IF[mode], responses_store_path=str(tmp_path / f"{mode}.db"))
        fake.answer(vllm_answer(vllm_completion(PROSE + CALL, reasoning="Paris, then.")))
        final = _rest(_read_on_a_thread(_responses_request(proxy)))[-1].response
        finals.append([(item.type, item.model_dump(exclude={"id", "call_id"}))
                       for item in final.output])
    assert finals[0] == finals[1]
    assert fake.chat_requests()[0].json["stream"] is False
    assert fake.chat_requests()[1].json["stream"] is True


# -- Messages -------------------------------------------------------------------------------

def _claude(proxy: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                               timeout=LIMIT)


def _messages_stream(proxy: Any) -> Any:
    return _claude(proxy).messages.create(
        model="qwen", max_tokens=256, stream=True,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[{"name": "get_weather", "input_schema": WEATHER}])


def test_messages_text_flows_while_upstream_writes_and_the_call_arrives_whole(
        fake, start_proxy):
    proxy = start_proxy(**LIVE)
    answer, resume = _paused_after_text(vllm_completion(PROSE + CALL), "moment")
    fake.answer(answer)
    try:
        seen = _read_on_a_thread(_messages_stream(proxy))
        _until(seen, lambda e: e.type == "content_block_delta" and e.delta.type == "text_delta")
        assert not resume.is_set()
    finally:
        resume.set()
    events = _rest(seen)
    tool = [e for e in events if e.type == "content_block_start"
            and e.content_block.type == "tool_use"]
    assert [e.content_block.name for e in tool] == ["get_weather"]
    stop = [e for e in events if e.type == "message_delta"]
    assert stop[0].delta.stop_reason == "tool_use"


def test_messages_streamed_and_buffered_end_alike(fake, start_proxy):
    finals = []
    for mode in ("buffer", "stream"):
        proxy = start_proxy(**LIVE_IF[mode])
        fake.answer(vllm_answer(vllm_completion(PROSE + CALL, reasoning="Paris, then.")))
        with _claude(proxy).messages.stream(
                model="qwen", max_tokens=256,
                messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                tools=[{"name": "get_weather", "input_schema": WEATHER}]) as stream:
            message = stream.get_final_message()
        finals.append(([block.model_dump(exclude={"id"}) for block in message.content],
                       message.stop_reason))
    assert finals[0] == finals[1]
    assert [block["type"] for block in finals[0][0]] == ["thinking", "text", "tool_use"]
