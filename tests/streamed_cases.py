"""The streamed mode's equivalence harness: one upstream answer, run through the turn both ways
(buffered: one body; streamed: the same answer as vLLM streams it, fed event by event), each
rendered by a front's stream writer and assembled by that front's official SDK: the OpenAI
SDK's chat and Responses stream states, the Anthropic SDK's `accumulate_event`.

Also the test corpus: every text the tool-call tests use (their module-level cases, their
parametrize lists and the string literals in their source) and the fuzzer's outputs.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import orjson
from anthropic._streaming import SSEDecoder as AnthropicSseDecoder
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message
from ollama import ChatResponse as OllamaChatResponse
from openai._streaming import SSEDecoder as OpenAISseDecoder
from openai._types import omit
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

from proxy.base.sse import SseDecoder
from proxy.fronts import Front, Incoming, StreamWriter
from proxy.fronts.registry import FRONTS, front_named
from proxy.shell.config_load import build_config
from proxy.turn.core import Answer, Failure, UpstreamReply, decide
from proxy.turn.live import LiveTurn, written
from proxy.turn.plan import TurnPlan
from tests.fake_vllm import vllm_completion, vllm_stream_of
from tools.fuzz import mutate

TESTS = Path(__file__).parent
# (delete_file, search_web, fetch_url: the tools tests/toolcalls/test_improvised.py names)
TOOL_NAMES = ("get_weather", "read", "exec", "write", "get_time", "count", "tool",
              "delete_file", "search_web", "fetch_url")
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
         for name in TOOL_NAMES]
FRONT_NAMES = tuple(front.name for front in FRONTS)
_HI = [{"role": "user", "content": "hi"}]
# The same request in each front's language: the same tools, a client that streams (chat's
# with usage; a Messages request needs its `max_tokens`).
REQUESTS: dict[str, dict[str, Any]] = {
    "chat": {"messages": _HI, "tools": TOOLS, "stream_options": {"include_usage": True}},
    "responses": {"input": "hi", "tools": [{"type": "function", **tool["function"]}
                                           for tool in TOOLS]},
    "messages": {"max_tokens": 256, "messages": _HI,
                 "tools": [{"name": tool["function"]["name"],
                            "input_schema": tool["function"]["parameters"]} for tool in TOOLS]},
    "ollama": {"messages": _HI, "tools": TOOLS},
}


def _front(name: str) -> Front:
    front = front_named(name)
    assert front is not None, name
    return front


def plans(front: str = "chat", **settings: Any) -> tuple[TurnPlan, TurnPlan]:
    """The same request to `front` planned buffered and streamed (a client that streams),
    as the front parses it."""
    raw = orjson.dumps({"model": "m", "stream": True, **REQUESTS[front]})
    made = []
    for mode in ("buffer", "stream"):
        config = build_config({"stream_mode": mode, **settings})
        plan = _front(front).parse(Incoming.post(_front(front).path, raw), config)
        assert isinstance(plan, TurnPlan)
        made.append(plan)
    buffered, streamed = made
    assert not buffered.streamed
    assert streamed.streamed
    return buffered, streamed


def _finish(writer: StreamWriter, decision: Answer | Failure) -> bytes:
    """The end of the client's stream once the turn is decided: the answer's rest, or the
    error. (The one place the harness hands a decision to a writer.)"""
    if isinstance(decision, Answer):
        return writer.answer(decision.result)
    return writer.error(decision.error)


def buffered_stream(plan: TurnPlan, completion: dict[str, Any], front: str = "chat") -> bytes:
    """The client's stream in buffered mode (the upstream answered with one body)."""
    writer = _front(front).stream_writer(plan)
    decision = decide(plan, UpstreamReply(200, {}, orjson.dumps(completion)))
    return writer.head() + _finish(writer, decision)


def streamed_stream(plan: TurnPlan, events: list[bytes], cut: bool = False,
                    front: str = "chat") -> tuple[bytes, list[bytes]]:
    """The client's stream in streamed mode, fed the upstream's SSE pieces one by one as
    the server does; also the live parts that went out before the end."""
    writer = _front(front).stream_writer(plan)
    live = LiveTurn(plan)
    decoder = SseDecoder()
    out = writer.head()
    flowed = []
    for piece in events:
        if live.feed(decoder.feed(piece)):
            flowed.append(written(live.release(), writer))
            out += flowed[-1]
    return out + _finish(writer, decide(plan, live.reply(cut))), flowed


_MINTED = re.compile(r"(chatcmpl|resp|rs|msg|fc|ctc|call|toolu)_[0-9A-Za-z]+")


def _shaped(value: Any) -> Any:
    """`value` with the ids minted per answer (response, message, item and call ids) and
    its creation time reduced to their shape: they differ between any two answers."""
    if isinstance(value, list):
        return [_shaped(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in ("id", "call_id", "item_id") and isinstance(item, str) and _MINTED.fullmatch(
                item):
            item = item.split("_", 1)[0] + "_…"
        elif key == "created_at":
            item = 0
        out[key] = _shaped(item)
    return out


def assembled(raw: bytes) -> dict[str, Any]:
    """What the OpenAI SDK assembles from a chat completion stream: each choice's message
    and finish_reason, the usage, or the error the stream ended with. Call ids are minted
    per answer, so they are compared by shape only."""
    state = ChatCompletionStreamState()
    for data in SseDecoder().feed(raw):
        if data == b"[DONE]":
            break
        chunk = orjson.loads(data)
        if "error" in chunk:
            return {"error": chunk["error"]["code"]}
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    final = state.current_completion_snapshot  # (the final one, without its parsing)
    choices = []
    for choice in final.choices:
        message = choice.message.model_dump(exclude_none=True)
        for call in message.get("tool_calls") or ():
            call["id"] = call["id"][:5] + "…" if call["id"].startswith("call_") else call["id"]
        choices.append({"message": message, "finish_reason": choice.finish_reason})
    usage = final.usage.model_dump(exclude_none=True) if final.usage else None
    return {"choices": choices, "usage": usage}


class _ResponsesSeen:
    """What a Responses stream assembled on the way to its end, as the SDK's stream state
    reports it: each text and arguments snapshot (built from their deltas; texts the SDK
    keeps no snapshot of, such as reasoning summaries, added up here), and the items each
    `response.output_item.done` finished."""

    def __init__(self) -> None:
        self.deltas: dict[tuple[int, int, str], str] = {}
        self.done: dict[int, dict[str, Any]] = {}

    def see(self, event: Any) -> None:
        kind = event.type
        if kind.endswith(".delta"):
            key = _delta_key(kind, vars(event))
            snapshot = getattr(event, "snapshot", None)
            self.deltas[key] = (snapshot if snapshot is not None
                                else self.deltas.get(key, "") + event.delta)
        elif kind == "response.output_item.done":
            assert event.output_index not in self.done, f"item {event.output_index} done twice"
            self.done[event.output_index] = event.item.to_dict()

    def check(self, output: list[dict[str, Any]]) -> None:
        """The final response's output is what the stream assembled."""
        _adds_up(self.deltas, self.done, output)


def _delta_key(kind: str, event: dict[str, Any]) -> tuple[int, int, str]:
    """Which text a delta event adds to: (output index, part, event type)."""
    part = event.get("content_index", event.get("summary_index"))
    return event["output_index"], 0 if part is None else part, kind


def _adds_up(deltas: dict[tuple[int, int, str], str], done: dict[int, dict[str, Any]],
             output: list[dict[str, Any]]) -> None:
    """A final response's `output` is what its stream assembled: the items it finished, in
    order, each text of them what its deltas added up to, and no delta for another text."""
    assert sorted(done) == list(range(len(output))), "an item finished twice, or never"
    assert [done[index] for index in range(len(output))] == output
    texts = {key: text for index, item in enumerate(output) for key, text in _texts(index, item)}
    assert {key: deltas.get(key, "") for key in texts} == texts
    assert set(deltas) <= set(texts), "a delta for no text of the response"


# The Responses event classes by their `type`. The SDK's decoding of an event first validates
# it against their union (then, should that fail, constructs the class its `type` names):
# validated against that class alone, a valid event comes out the same, several times
# faster, and an invalid one fails the test.
_RESPONSES_EVENTS = {get_args(variant.model_fields["type"].annotation)[0]: variant
                     for variant in get_args(get_args(ResponseStreamEvent)[0])}


def _responses_event(data: str) -> Any:
    """One Responses stream event as the SDK decodes it from its data."""
    payload = orjson.loads(data)
    return _RESPONSES_EVENTS[payload["type"]].model_validate(payload)


def responses_assembled(raw: bytes) -> dict[str, Any]:
    """What the OpenAI SDK assembles from a Responses event stream (its `ResponseStream`'s
    decoding and stream state): the final response, checked against what its deltas and
    finished items added up to, ids and time by shape; or the error's code."""
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    seen = _ResponsesSeen()
    final = None
    for sse in OpenAISseDecoder().iter_bytes(iter([raw])):
        for event in state.handle_event(_responses_event(sse.data)):
            assert final is None, f"{event.type} after the response's end"
            seen.see(event)
            if event.type == "response.failed":
                return {"error": event.response.error.code}
            if event.type in ("response.completed", "response.incomplete"):
                final = event.response
    assert final is not None, "the stream ended without its response"
    response = Response.model_validate(final.to_dict()).model_dump(exclude_none=True)
    seen.check(response["output"])
    return _shaped(response)


def responses_read(raw: bytes) -> dict[str, Any]:
    """A Responses event stream read as its events say, without the SDK (a third of its
    cost): the final response, checked against the items the stream finished and what their
    deltas added up to, ids and time by shape; or the error's code. (`responses_assembled`
    reads the same with the SDK.)"""
    deltas: dict[tuple[int, int, str], str] = {}
    done: dict[int, dict[str, Any]] = {}
    final = None
    for data in SseDecoder().feed(raw):
        event = orjson.loads(data)
        kind = event["type"]
        assert final is None, f"{kind} after the response's end"
        if kind.endswith(".delta"):
            key = _delta_key(kind, event)
            deltas[key] = deltas.get(key, "") + event["delta"]
        elif kind == "response.output_item.done":
            assert event["output_index"] not in done, f"item {event['output_index']} done twice"
            done[event["output_index"]] = event["item"]
        elif kind == "response.failed":
            return {"error": event["response"]["error"]["code"]}
        elif kind in ("response.completed", "response.incomplete"):
            final = event["response"]
    assert final is not None, "the stream ended without its response"
    _adds_up(deltas, done, final["output"])
    return _shaped(final)


def _texts(index: int, item: dict[str, Any]) -> list[tuple[tuple[int, int, str], str]]:
    """Each text of a finished output item, keyed as the delta events that add it up are
    (output index, part, event type)."""
    kind = item["type"]
    if kind == "message":
        return [((index, part, f"response.{content['type']}.delta"),
                 content["text"] if content["type"] == "output_text" else content["refusal"])
                for part, content in enumerate(item["content"])]
    if kind == "reasoning":
        return [((index, part, "response.reasoning_summary_text.delta"), summary["text"])
                for part, summary in enumerate(item["summary"])]
    if kind == "function_call":
        return [((index, 0, "response.function_call_arguments.delta"), item["arguments"])]
    return [((index, 0, "response.custom_tool_call_input.delta"), item["input"])]


def messages_assembled(raw: bytes) -> dict[str, Any]:
    """What the Anthropic SDK assembles from a Messages event stream (its `Stream`'s event
    handling, then `accumulate_event` as `MessageStream` does): the message, ids by shape;
    or the error's type."""
    snapshot = None
    buffers: dict[int, bytes] = {}
    stopped = False
    for sse in AnthropicSseDecoder().iter_bytes(iter([raw])):
        if sse.event == "ping" or sse.event is None or not sse.data:
            continue
        if sse.event == "error":
            return {"error": sse.json()["error"]["type"]}
        assert not stopped, f"{sse.event} after message_stop"
        event = sse.json()
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
        stopped = event["type"] == "message_stop"
    assert snapshot is not None, "the stream ended without its message_start"
    assert stopped, "the stream ended without its message_stop"
    message = Message.model_validate(snapshot.to_dict()).model_dump(exclude_none=True)
    return _shaped(message)


def ollama_assembled(raw: bytes) -> dict[str, Any]:
    """What an Ollama client assembles from an NDJSON stream, each line read as the official
    `ollama` client reads it (a `ChatResponse`, an `error` line raised): the message's
    content, thinking and calls, the done line's reason and counts (its times and
    `created_at` differ between any two answers); or the error's words."""
    content, thinking, calls = "", "", []
    final = None
    for line in raw.splitlines():
        part = orjson.loads(line)
        if part.get("error"):
            return {"error": part["error"]}
        assert final is None, "a line after the done line"
        response = OllamaChatResponse(**part)
        content += response.message.content or ""
        thinking += response.message.thinking or ""
        calls += [{"id": call["id"], **call["function"]}
                  for call in part["message"].get("tool_calls") or ()]
        if response.done:
            final = response
    assert final is not None, "the stream ended without its done line"
    return _shaped({"content": content, "thinking": thinking, "calls": calls,
                    "done_reason": final.done_reason,
                    "prompt_eval_count": final.prompt_eval_count,
                    "eval_count": final.eval_count})


ASSEMBLERS: dict[str, Callable[[bytes], dict[str, Any]]] = {
    "chat": assembled, "responses": responses_assembled, "messages": messages_assembled,
    "ollama": ollama_assembled}


def both_modes(completion: dict[str, Any], *, front: str = "chat",
               settings: dict[str, Any] | None = None, **stream: Any,
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(buffered, streamed) as the front's SDK assembles them, for one upstream answer."""
    buffered, streamed = plans(front, **(settings or {}))
    raw, _ = streamed_stream(streamed, vllm_stream_of(completion, **stream), front=front)
    assemble = ASSEMBLERS[front]
    return assemble(buffered_stream(buffered, completion, front)), assemble(raw)


def answers_for(text: str) -> list[dict[str, Any]]:
    """The upstream answers a model text is tried in: as the content; as the reasoning, with
    nothing visible (calls recovered from the reasoning); as the content after a think block
    and after a lone `</think>`; cut by `length`."""
    return [
        vllm_completion(text),
        vllm_completion(None, reasoning=text),
        vllm_completion("<think>Let me see.</think>\n\n" + text),
        vllm_completion("Thinking it over</think>" + text),
        vllm_completion(text, reasoning="Plan: answer.", finish_reason="length"),
    ]


def _collect(value: Any, into: set[str], depth: int = 0) -> None:
    if isinstance(value, str):
        into.add(value)
    elif depth < 6 and isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _collect(item, into, depth + 1)
    elif depth < 6 and isinstance(value, dict):
        for key, item in value.items():
            _collect(key, into, depth + 1)
            _collect(item, into, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        _collect(dataclasses.astuple(value), into, depth + 1)


def corpus(limit: int = 20_000) -> list[str]:
    """Every text of the tool-call tests (tests/toolcalls/test_*.py) and of the SSE property
    test: module-level cases, parametrize lists, and every string literal in their source."""
    texts: set[str] = set()
    paths = [*sorted((TESTS / "toolcalls").glob("test_*.py")),
             TESTS / "base" / "test_sse_properties.py"]
    for path in paths:
        module = importlib.import_module(f"tests.{path.parent.name}.{path.stem}")
        for value in vars(module).values():
            _collect(value, texts)
            for mark in getattr(value, "pytestmark", ()):
                if mark.name == "parametrize":
                    _collect(mark.args[1], texts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.add(node.value)
    return sorted(text for text in texts if text.strip() and len(text) <= limit
                  and _encodable(text))


def _encodable(text: str) -> bool:
    """Whether `text` can be in an upstream body (no lone surrogates: JSON cannot carry
    them as text, and they are the engine's own tests' business)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def fuzzed(count: int, seed: int = 19) -> list[str]:
    """`count` model outputs from the fuzzer (`tools.fuzz.mutate`), reproducibly."""
    rng = random.Random(seed)
    return [text for text in (mutate(rng) for _ in range(count)) if _encodable(text)]
