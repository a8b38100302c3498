"""The Ollama front's answer: the turn's result as Ollama's `ChatResponse` (`/api/chat`) or
`GenerateResponse` (`/api/generate`), built from one set of pieces for the JSON object and
the NDJSON lines alike: the message (or `response`), `done`, `done_reason` and the metrics.

Ollama's shapes (its `api/types.go`): `created_at` an RFC 3339 time; a message's `content`
always present, `thinking` only when there is some; a call as `{"id", "function": {"index",
"name", "arguments"}}` with `arguments` an object (the call's JSON text, byte for byte);
`done_reason` `stop` or `length` (a turn that ended in calls is `stop`, as Ollama says it);
durations in nanoseconds and counts with Go's `omitempty` (a zero is left out).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from ...turn.plan import TurnPlan
from ...turn.result import LENGTH, Call, Choice, TurnResult

CHAT = "chat"
GENERATE = "generate"


@dataclass(frozen=True)
class OllamaData:
    """What rendering needs from the request (the turn's `front` data): the model as the
    client named it, which endpoint asked (`chat` or `generate`), and when the request came
    (`time.monotonic_ns`, for `total_duration`)."""

    model: str
    kind: str = CHAT
    started_ns: int = 0


def created_at() -> str:
    """Now, as Ollama writes `created_at` (RFC 3339, UTC, to the microsecond)."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def tool_calls(calls: tuple[Call, ...]) -> list[dict[str, Any]]:
    """The calls in Ollama's shape: arguments an object (the call's own JSON text)."""
    return [{"id": call.id, "function": {"index": index, "name": call.name,
                                         "arguments": orjson.Fragment(call.arguments)}}
            for index, call in enumerate(calls)]


def piece(data: OllamaData, content: str = "", thinking: str | None = None,
          calls: tuple[Call, ...] = ()) -> dict[str, Any]:
    """One not-yet-done object: some content, thinking or calls (the fields an NDJSON line
    and the final object share)."""
    out: dict[str, Any] = {"model": data.model, "created_at": created_at()}
    if data.kind == CHAT:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        if calls:
            message["tool_calls"] = tool_calls(calls)
        out["message"] = message
    else:
        out["response"] = content
        if thinking:
            out["thinking"] = thinking
        if calls:
            out["tool_calls"] = tool_calls(calls)
    out["done"] = False
    return out


def done_reason(choice: Choice) -> str:
    """Ollama's `done_reason`: `length` when cut by the token limit, else `stop`."""
    return "length" if choice.finish == LENGTH else "stop"


def finished(data: OllamaData, result: TurnResult, whole: dict[str, Any]) -> dict[str, Any]:
    """`whole` (a piece) made the last object: `done`, `done_reason`, durations and counts."""
    elapsed = max(time.monotonic_ns() - data.started_ns, 1) if data.started_ns else 0
    usage = result.usage
    metrics = {"total_duration": elapsed,
               "prompt_eval_count": usage.prompt_tokens if usage else None,
               "eval_count": usage.completion_tokens if usage else None,
               # The upstream reports no timing of its own: the whole turn's time (so that a
               # rate a client computes is a floor, never a division by zero).
               "eval_duration": elapsed}
    whole.update(done=True, done_reason=done_reason(result.first))
    whole.update({key: value for key, value in metrics.items() if value})
    return whole


def answer_of(plan: TurnPlan[OllamaData], result: TurnResult) -> dict[str, Any]:
    """The one object of a non-streaming answer (the first choice: Ollama has no `n`)."""
    data = plan.front_data
    choice = result.first
    return finished(data, result, piece(data, choice.content or "", choice.reasoning,
                                        choice.calls))


def loaded(data: OllamaData, unload: bool) -> dict[str, Any]:
    """What Ollama answers a request that only loads (or unloads) the model: done at once.
    The upstream keeps its model loaded: nothing is asked of it."""
    return {**piece(data), "done": True, "done_reason": "unload" if unload else "load"}


def render_json(plan: TurnPlan[OllamaData], result: TurnResult) -> bytes:
    """The body of a non-streaming answer."""
    return orjson.dumps(answer_of(plan, result))
