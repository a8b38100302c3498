"""The Messages front's answer: the turn's completion as Anthropic's content blocks (built
once, for the JSON `message` and the event stream alike), its stop reason and usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ...ids import random_alnum
from ...turn.plan import TurnPlan

_STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}


@dataclass(frozen=True)
class MessagesData:
    """What rendering needs from the request (the turn's `front` data)."""

    model: str
    stop_sequences: tuple[str, ...] = ()


def _tool_id(call_id: str) -> str:
    """A chat call id as an Anthropic tool_use id (`call_X` → `toolu_X`, else a fresh one)."""
    tail = call_id.removeprefix("call_")
    return "toolu_" + (tail if tail.isalnum() and tail != call_id else random_alnum(24))


def _reasoning(message: dict[str, Any]) -> str:
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return reasoning if isinstance(reasoning, str) else ""


def _tool_uses(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(id, name, arguments JSON) of each call, in order."""
    return [(_tool_id(call["id"]), call["function"]["name"], call["function"]["arguments"])
            for call in message.get("tool_calls") or ()]


def content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message's content blocks, in Anthropic's order: thinking, text, then a tool_use
    per call, whose `input` is still the call's arguments as JSON text (the JSON message
    holds it byte for byte, `as_json`; the stream sends it as one `input_json_delta`)."""
    blocks: list[dict[str, Any]] = []
    if reasoning := _reasoning(message):
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    blocks.extend({"type": "tool_use", "id": tool_id, "name": name,
                   "input": arguments}
                  for tool_id, name, arguments in _tool_uses(message))
    return blocks


def as_json(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as the JSON message holds it: a tool_use's arguments, byte for byte."""
    if block["type"] != "tool_use":
        return block
    return {**block, "input": orjson.Fragment(block["input"])}


def stop_of(choice: dict[str, Any], stop_sequences: tuple[str, ...]) -> tuple[str, str | None]:
    """Anthropic's `stop_reason` and `stop_sequence` for a finished choice: a plain stop is
    `stop_sequence` when vLLM's `stop_reason` names one of the request's stop strings."""
    finish = choice.get("finish_reason")
    if finish == "stop" and choice.get("stop_reason") in stop_sequences:
        return "stop_sequence", choice["stop_reason"]
    return _STOP_REASONS.get(finish, "end_turn"), None


def usage_of(usage: Any) -> dict[str, int]:
    """Chat usage as Anthropic's: input tokens not read from the prefix cache, those read,
    and output tokens (the three input counts add up to the prompt, as Anthropic's do)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt = usage.get("prompt_tokens", 0)
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
    cached = cached if isinstance(cached, int) else 0
    return {"input_tokens": max(prompt - cached, 0), "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
            "output_tokens": usage.get("completion_tokens", 0)}


def message_shell(message_id: str, model: str) -> dict[str, Any]:
    """A `message` with no content and no stop reason yet."""
    return {"id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None}


def message_of(plan: TurnPlan, completion: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic `message` for a finished completion (its first choice)."""
    front: MessagesData = plan.front_data
    choice = completion["choices"][0]
    out = message_shell("msg_" + random_alnum(24), front.model)
    out["content"] = [as_json(block) for block in content_blocks(choice["message"])]
    out["stop_reason"], out["stop_sequence"] = stop_of(choice, front.stop_sequences)
    out["usage"] = usage_of(completion.get("usage"))
    return out


def render_json(plan: TurnPlan, completion: dict[str, Any]) -> bytes:
    """The body of a non-streaming answer."""
    return orjson.dumps(message_of(plan, completion))
