"""The Messages front's answer: the turn's result as Anthropic's content blocks (built
once, for the JSON `message` and the event stream alike), its stop reason and usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ...base.ids import random_alnum
from ...turn.plan import TurnPlan
from ...turn.result import CONTENT_FILTER, LENGTH, STOP, TOOL_CALLS, Choice, TurnResult, Usage

_STOP_REASONS = {TOOL_CALLS: "tool_use", LENGTH: "max_tokens", CONTENT_FILTER: "refusal"}


@dataclass(frozen=True)
class MessagesData:
    """What rendering needs from the request (the turn's `front` data)."""

    model: str
    stop_sequences: tuple[str, ...] = ()


def _tool_id(call_id: str) -> str:
    """A chat call id as an Anthropic tool_use id (`call_X` → `toolu_X`, else a fresh one)."""
    tail = call_id.removeprefix("call_")
    return "toolu_" + (tail if tail.isalnum() and tail != call_id else random_alnum(24))


def content_blocks(choice: Choice) -> list[dict[str, Any]]:
    """The answer's content blocks, in Anthropic's order: thinking, text, then a tool_use
    per call, whose `input` is still the call's arguments as JSON text (the JSON message
    holds it byte for byte, `as_json`; the stream sends it as one `input_json_delta`)."""
    blocks: list[dict[str, Any]] = []
    if choice.reasoning:
        blocks.append({"type": "thinking", "thinking": choice.reasoning, "signature": ""})
    if choice.content:
        blocks.append({"type": "text", "text": choice.content})
    blocks.extend({"type": "tool_use", "id": _tool_id(call.id), "name": call.name,
                   "input": call.arguments} for call in choice.calls)
    return blocks


def as_json(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as the JSON message holds it: a tool_use's arguments, byte for byte."""
    if block["type"] != "tool_use":
        return block
    return {**block, "input": orjson.Fragment(block["input"])}


def stop_of(choice: Choice, stop_sequences: tuple[str, ...]) -> tuple[str, str | None]:
    """Anthropic's `stop_reason` and `stop_sequence` for a finished answer: a plain stop is
    `stop_sequence` when the stop string that ended it is one of the request's."""
    if choice.finish == STOP and choice.stop_sequence in stop_sequences:
        return "stop_sequence", choice.stop_sequence
    return _STOP_REASONS.get(choice.finish, "end_turn"), None


def usage_of(usage: Usage | None) -> dict[str, int]:
    """The turn's usage as Anthropic's: input tokens not read from the prefix cache, those
    read, and output tokens (the three input counts add up to the prompt, as Anthropic's
    do)."""
    usage = usage or Usage()
    prompt = usage.prompt_tokens or 0
    cached = usage.cached_tokens
    return {"input_tokens": max(prompt - cached, 0), "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
            "output_tokens": usage.completion_tokens or 0}


def message_shell(message_id: str, model: str) -> dict[str, Any]:
    """A `message` with no content and no stop reason yet."""
    return {"id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None}


def message_of(plan: TurnPlan[MessagesData], result: TurnResult) -> dict[str, Any]:
    """The Anthropic `message` for the turn's result (its first choice: no `n` here)."""
    front = plan.front_data
    choice = result.first
    out = message_shell("msg_" + random_alnum(24), front.model)
    out["content"] = [as_json(block) for block in content_blocks(choice)]
    out["stop_reason"], out["stop_sequence"] = stop_of(choice, front.stop_sequences)
    out["usage"] = usage_of(result.usage)
    return out


def render_json(plan: TurnPlan[MessagesData], result: TurnResult) -> bytes:
    """The body of a non-streaming answer."""
    return orjson.dumps(message_of(plan, result))
