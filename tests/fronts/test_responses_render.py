"""The Responses front's second half, pure: a completion → the `response` object, the
official event stream (checked against the openai SDK's own event types), and errors."""

from __future__ import annotations

import orjson
import pytest
from openai.types.responses import Response, ResponseFailedEvent, ResponseStreamEvent
from pydantic import TypeAdapter

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.fronts import Incoming
from proxy.fronts.responses import FRONT, PATH, keep, parse, render_json
from proxy.fronts.responses.stream import ResponsesStream
from proxy.turn.result import Call, Choice, TurnResult, Usage

EVENTS = TypeAdapter(ResponseStreamEvent)
TOOLS = [{"type": "function", "name": "read",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
         {"type": "custom", "name": "apply_patch"},
         {"type": "namespace", "name": "agents", "description": "d",
          "tools": [{"type": "function", "name": "spawn"}]},
         {"type": "web_search"}]


def plan(**body):
    raw = orjson.dumps({"model": "m", "input": "x", "tools": TOOLS, **body})
    return parse(Incoming.post(PATH, raw), Config(heartbeat_mode="chunk"))


def completion(content=None, *, reasoning=None, calls=(), finish="stop", refusal=None):
    """A turn's result, as the core hands it to the front."""
    choice = Choice(0, content, reasoning, tuple(
        Call(f"call_{i}", name, args) for i, (name, args) in enumerate(calls)), finish,
        refusal=refusal)
    return TurnResult("chatcmpl-1", 1, "m", (choice,), Usage(
        prompt_tokens=10, completion_tokens=5, total_tokens=15,
        prompt_details={"cached_tokens": 4}))


FULL = completion("Let me look.", reasoning="The user wants files.",
                  calls=[("read", '{"path":"a"}'), ("apply_patch", '{"input":"*** Begin"}'),
                         ("agents__spawn", '{"task":"t"}')], finish="tool_calls")


def events(data: bytes) -> list[dict]:
    """The stream's events, each checked: an `event:` line naming its type, then its data."""
    out = []
    for frame in data.split(b"\n\n"):
        if not frame or frame.startswith(b":"):
            continue
        name, payload = frame.split(b"\n")
        event = orjson.loads(payload.removeprefix(b"data: "))
        assert name == b"event: " + event["type"].encode()
        out.append(event)
    return out


def strictly_valid(event: dict) -> None:
    """The SDK's event types accept the event as it is (pydantic validation, stricter than
    the SDK's own parsing); a failure's code is checked apart (agents read codes the SDK's
    list does not hold, such as `context_length_exceeded`)."""
    if event["type"] == "response.failed":
        event = {**event, "response": {**event["response"],
                                       "error": {**event["response"]["error"],
                                                 "code": "server_error"}}}
    EVENTS.validate_python(event)


def test_the_response_object_holds_reasoning_message_and_calls():
    turn = plan()
    response = orjson.loads(render_json(turn, FULL))
    parsed = Response.model_validate(response)
    assert parsed.id == turn.front_data.id
    assert parsed.status == "completed"
    assert [item.type for item in parsed.output] == [
        "reasoning", "message", "function_call", "custom_tool_call", "function_call"]
    assert parsed.output[0].summary[0].text == "The user wants files."
    assert parsed.output_text == "Let me look."
    read, patch, spawn = parsed.output[2:]
    assert (read.call_id, read.name, read.arguments, read.namespace) == (
        "call_0", "read", '{"path":"a"}', None)
    assert (patch.call_id, patch.name, patch.input) == ("call_1", "apply_patch", "*** Begin")
    assert (spawn.name, spawn.namespace, spawn.arguments) == ("spawn", "agents", '{"task":"t"}')
    assert parsed.usage.input_tokens == 10
    assert parsed.usage.output_tokens == 5
    assert parsed.usage.total_tokens == 15
    assert parsed.usage.input_tokens_details.cached_tokens == 4
    assert parsed.usage.output_tokens_details.reasoning_tokens == 0
    assert parsed.tools[0].name == "read"
    assert parsed.model == "m"
    assert parsed.store is True
    assert len({item.id for item in parsed.output}) == 5


def test_the_stream_follows_the_official_sequence():
    turn = plan(stream=True)
    writer = FRONT.stream_writer(turn)
    seen = events(writer.head() + writer.heartbeat() + writer.answer(FULL))
    for event in seen:
        strictly_valid(event)
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert [e["type"] for e in seen[:3]] == ["response.created", "response.in_progress",
                                             "response.in_progress"]
    kinds = [e["type"] for e in seen[3:]]
    assert kinds == [
        "response.output_item.added", "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.output_item.added", "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed"]
    final = seen[-1]["response"]
    assert final == orjson.loads(render_json(turn, FULL))  # the same answer either way
    added = [e for e in seen if e["type"] == "response.output_item.added"]
    done = [e for e in seen if e["type"] == "response.output_item.done"]
    assert [e["output_index"] for e in added] == [0, 1, 2, 3, 4]
    assert [e["item"] for e in done] == final["output"]
    assert added[2]["item"]["arguments"] == ""
    assert added[2]["item"]["status"] == "in_progress"
    assert all(e["item"]["arguments"] for e in done if e["item"]["type"] == "function_call")


def test_live_deltas_then_the_answer_give_the_same_final_response():
    turn = plan(stream=True)
    whole = ResponsesStream.for_plan(turn)
    alone = events(whole.head() + whole.answer(FULL))
    live = ResponsesStream.for_plan(turn)
    data = live.head() + live.reasoning("The user ") + live.heartbeat()
    data += live.reasoning("wants files.") + live.text("Let ") + live.text("me look.")
    data += live.answer(FULL)
    streamed = events(data)
    for event in streamed:
        strictly_valid(event)
    assert [e["sequence_number"] for e in streamed] == list(range(len(streamed)))
    assert streamed[-1]["response"] == alone[-1]["response"]
    deltas = "".join(e["delta"] for e in streamed if e["type"] == "response.output_text.delta")
    assert deltas == "Let me look."
    thought = "".join(e["delta"] for e in streamed
                      if e["type"] == "response.reasoning_summary_text.delta")
    assert thought == "The user wants files."
    added = [e["item"]["type"] for e in streamed if e["type"] == "response.output_item.added"]
    assert added == ["reasoning", "message", "function_call", "custom_tool_call",
                     "function_call"]


def test_live_text_the_answer_rewrote_is_not_sent_twice():
    turn = plan(stream=True)
    writer = ResponsesStream.for_plan(turn)
    seen = events(writer.head() + writer.text("Draft") + writer.answer(completion("Final.")))
    deltas = [e["delta"] for e in seen if e["type"] == "response.output_text.delta"]
    assert deltas == ["Draft"]
    assert seen[-1]["response"]["output"][0]["content"][0]["text"] == "Final."


def test_length_is_incomplete_with_the_reason():
    turn = plan(stream=True)
    cut = completion("The answer is", finish="length")
    response = orjson.loads(render_json(turn, cut))
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][0]["status"] == "incomplete"
    writer = ResponsesStream.for_plan(turn)
    seen = events(writer.head() + writer.answer(cut))
    assert seen[-1]["type"] == "response.incomplete"
    assert seen[-1]["response"] == response
    strictly_valid(seen[-1])


def test_a_refusal_is_a_refusal_part():
    turn = plan(stream=True)
    refusing = completion(None, refusal="I can't help with that.")
    writer = ResponsesStream.for_plan(turn)
    seen = events(writer.head() + writer.answer(refusing))
    for event in seen:
        strictly_valid(event)
    assert seen[-1]["response"]["output"][0]["content"] == [
        {"type": "refusal", "refusal": "I can't help with that."}]
    assert "response.refusal.done" in [e["type"] for e in seen]


def test_a_custom_call_without_the_input_key_keeps_what_the_model_wrote():
    turn = plan()
    response = orjson.loads(render_json(turn, completion(
        calls=[("apply_patch", '{"patch":"raw text"}'), ("apply_patch", '{"a":1,"b":2}')],
        finish="tool_calls")))
    assert [item["input"] for item in response["output"]] == ["raw text", '{"a":1,"b":2}']


@pytest.mark.parametrize(("error", "code", "message"), [
    (ProxyError(503, "busy", code="upstream_http_503"), "upstream_http_503", "busy"),
    (ProxyError(429, "slow down", headers={"retry-after": "7"}), "rate_limit_exceeded",
     "slow down Please try again in 7s."),
    (ProxyError(400, "This model's maximum context length is 32768 tokens."),
     "context_length_exceeded", "This model's maximum context length is 32768 tokens."),
])
def test_an_error_after_the_start_is_response_failed(error, code, message):
    turn = plan(stream=True)
    writer = ResponsesStream.for_plan(turn)
    seen = events(writer.head() + writer.text("partial") + writer.error(error))
    failed = seen[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": code, "message": message}
    assert [item["type"] for item in failed["response"]["output"]] == ["message"]
    ResponseFailedEvent.model_construct(**failed)  # how the SDK itself reads it
    strictly_valid(failed)
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))


def test_errors_before_the_stream_keep_status_envelope_and_retry_after():
    rendered = FRONT.error_response(ProxyError(429, "slow down", headers={"Retry-After": "3"}))
    assert rendered.status == 429
    assert rendered.headers == {"Retry-After": "3"}
    assert orjson.loads(rendered.body) == {"error": {
        "message": "slow down", "type": "rate_limit_error", "param": None,
        "code": None}}


def test_comment_heartbeats_when_asked():
    raw = orjson.dumps({"input": "x", "stream": True})
    turn = parse(Incoming.post(PATH, raw), Config(heartbeat_mode="both"))
    writer = ResponsesStream.for_plan(turn)
    writer.head()
    beat = writer.heartbeat()
    assert beat.startswith(b": ping\n\n")
    assert events(beat)[0]["type"] == "response.in_progress"


def test_what_the_store_keeps():
    turn = plan(previous_response_id=None)
    kept = keep(turn, FULL)
    assert kept.id == turn.front_data.id
    assert kept.previous is None
    assert kept.items[0]["content"][0]["text"] == "x"
    # Only what a later turn reads back: the reasoning item is in the body, not the items.
    assert [i["type"] for i in kept.items[1:]] == [
        "message", "function_call", "custom_tool_call", "function_call"]
    assert b'"type":"reasoning"' in kept.body
    assert kept.body == render_json(turn, FULL)
    assert keep(plan(store=False), FULL) is None
