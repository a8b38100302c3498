"""The streamed mode's equivalence harness: one upstream answer, run through the turn both ways
(buffered: one body; streamed: the same answer as vLLM streams it, fed event by event), each
rendered by the chat front and assembled by the OpenAI SDK's own stream accumulator.

Also the test corpus: every text the tool-call tests use (their module-level cases, their
parametrize lists and the string literals in their source) and the fuzzer's outputs.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import random
from pathlib import Path
from typing import Any

import orjson
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from proxy.config_load import build_config
from proxy.fronts.chat import ChatStream
from proxy.sse import SseDecoder
from proxy.turn.core import Answer, UpstreamReply, decide
from proxy.turn.live import LiveTurn, written
from proxy.turn.plan import TurnPlan, plan_turn
from tests.fake_vllm import vllm_completion, vllm_stream_of
from tools.fuzz import mutate

TESTS = Path(__file__).parent
TOOL_NAMES = ("get_weather", "read", "exec", "write", "get_time", "count", "tool")
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
         for name in TOOL_NAMES]


def plans(**settings: Any) -> tuple[TurnPlan, TurnPlan]:
    """The same request planned buffered and streamed (a client that streams, with usage)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            "stream": True, "stream_options": {"include_usage": True}}
    made = []
    for mode in ("buffer", "stream"):
        config = build_config({"stream_mode": mode, **settings})
        made.append(plan_turn(dict(body), config, client_stream=True, include_usage=True))
    buffered, streamed = made
    assert not buffered.streamed
    assert streamed.streamed
    return buffered, streamed


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


def buffered_stream(plan: TurnPlan, completion: dict[str, Any]) -> bytes:
    """The client's stream in buffered mode (the upstream answered with one body)."""
    writer = ChatStream.for_plan(plan)
    decision = decide(plan, UpstreamReply(200, {}, orjson.dumps(completion)))
    if isinstance(decision, Answer):
        return writer.head() + writer.answer(decision.result)
    return writer.head() + writer.error(decision.error)


def streamed_stream(plan: TurnPlan, events: list[bytes], cut: bool = False,
                    ) -> tuple[bytes, list[bytes]]:
    """The client's stream in streamed mode, fed the upstream's SSE pieces one by one as
    the server does; also the live parts that went out before the end."""
    writer = ChatStream.for_plan(plan)
    live = LiveTurn(plan)
    decoder = SseDecoder()
    out = writer.head()
    flowed = []
    for piece in events:
        if live.feed(decoder.feed(piece)):
            flowed.append(written(live.release(), writer))
            out += flowed[-1]
    decision = decide(plan, live.reply(cut))
    if isinstance(decision, Answer):
        return out + writer.answer(decision.result), flowed
    return out + writer.error(decision.error), flowed


def both_modes(completion: dict[str, Any], *, settings: dict[str, Any] | None = None,
               **stream: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(buffered, streamed) as the SDK assembles them, for one upstream answer."""
    buffered, streamed = plans(**(settings or {}))
    raw, _ = streamed_stream(streamed, vllm_stream_of(completion, **stream))
    return assembled(buffered_stream(buffered, completion)), assembled(raw)


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
             TESTS / "proxy" / "test_sse_properties.py"]
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
