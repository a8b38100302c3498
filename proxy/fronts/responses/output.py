"""The turn's result as the Responses API answers it: output items, usage and the
`response` object, the same for JSON, the stream's last event and what the store keeps.

Item ids derive from a secret of the turn's own and the item's kind and place in `output`,
so that every rendering of one answer (the stream, `GET` from the store) names its items
alike, while an item id says nothing of the response id (ids end up in client logs).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from ...base.errors import ProxyError
from ...turn.result import LENGTH, Call, Choice, TurnResult, Usage
from ..chat import worded
from .tools import ToolRef, call_item

_PREFIX = {"reasoning": "rs", "message": "msg", "function_call": "fc",
           "custom_tool_call": "ctc"}


@dataclass(frozen=True)
class ResponsesData:
    """The front's own data for one turn (`TurnPlan.front_data`): the response's identity, the
    request fields the response object repeats, and how chat names map back to tools."""

    id: str
    created_at: int
    echo: dict[str, Any]
    refs: dict[str, ToolRef]
    store: bool = False
    previous: str | None = None
    items: tuple[dict[str, Any], ...] = ()  # the request's own input items
    item_secret: bytes = field(default_factory=lambda: secrets.token_bytes(16), repr=False)

    @classmethod
    def new(cls, echo: dict[str, Any], refs: dict[str, ToolRef], **kwargs: Any,
            ) -> ResponsesData:
        """A turn with a fresh response id, minted before upstream has answered."""
        return cls(f"resp_{secrets.token_hex(24)}", int(time.time()), echo, refs, **kwargs)

    def item_id(self, kind: str, index: int) -> str:
        """The id of the output item of `kind` at `index`: random to anyone without the
        turn's secret, the same for every rendering of the turn."""
        digest = hashlib.blake2b(f"{kind}:{index}".encode(), key=self.item_secret,
                                 digest_size=24).hexdigest()
        return f"{_PREFIX[kind]}_{digest}"


def reasoning_item(turn: ResponsesData, index: int, text: str) -> dict[str, Any]:
    """A `reasoning` item with the model's reasoning as its summary text."""
    return {"id": turn.item_id("reasoning", index), "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}], "status": "completed"}


def text_part(text: str) -> dict[str, Any]:
    """An `output_text` content part."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(turn: ResponsesData, index: int, parts: list[dict[str, Any]],
                 status: str = "completed") -> dict[str, Any]:
    """An assistant `message` item."""
    return {"id": turn.item_id("message", index), "type": "message", "status": status,
            "role": "assistant", "content": parts}


def message_parts(choice: Choice) -> list[dict[str, Any]]:
    """The visible text (and refusal) of an answer, as content parts."""
    parts = []
    if choice.content:
        parts.append(text_part(choice.content))
    if choice.refusal:
        parts.append({"type": "refusal", "refusal": choice.refusal})
    return parts


def output_items(turn: ResponsesData, result: TurnResult) -> list[dict[str, Any]]:
    """The answer's output items: reasoning, message, then each call (of the first choice:
    the Responses API has no `n`)."""
    choice = result.first
    items: list[dict[str, Any]] = []
    if choice.reasoning:
        items.append(reasoning_item(turn, len(items), choice.reasoning))
    parts = message_parts(choice)
    if parts:
        status = "incomplete" if choice.finish == LENGTH else "completed"
        items.append(message_item(turn, len(items), parts, status))
    for call in choice.calls:
        kind = "custom_tool_call" if _custom(call, turn) else "function_call"
        items.append(call_item(call, turn.refs, turn.item_id(kind, len(items))))
    return items


def _custom(call: Call, turn: ResponsesData) -> bool:
    """Whether the call is to one of the request's custom tools (raw `input`, not JSON)."""
    ref = turn.refs.get(call.name)
    return ref is not None and ref.custom


def usage_of(usage: Usage | None) -> dict[str, Any] | None:
    """The turn's usage as Responses usage: integer counts and their details."""
    if usage is None:
        return None
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    # No cache writes are reported by chat servers: 0, as the schema wants an integer.
    return {"input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens,
                                     "cache_write_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.total_tokens or prompt + completion}


def response_object(turn: ResponsesData, status: str, output: list[dict[str, Any]], *,
                    usage: dict[str, Any] | None = None, error: dict[str, Any] | None = None,
                    incomplete: bool = False) -> dict[str, Any]:
    """The `response` object, in any state."""
    return {"id": turn.id, "object": "response", "created_at": turn.created_at,
            "status": status, "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            **turn.echo, "output": output, "usage": usage}


def status_of(result: TurnResult) -> str:
    """`incomplete` when the answer was cut by the token limit, else `completed`."""
    return "incomplete" if result.first.finish == LENGTH else "completed"


def final_response(turn: ResponsesData, result: TurnResult,
                   output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The finished response for the turn's result (`output`: the items as a stream sent
    them, when they are known already)."""
    status = status_of(result)
    items = output_items(turn, result) if output is None else output
    return response_object(turn, status, items, usage=usage_of(result.usage),
                           incomplete=status == "incomplete")


def failure_detail(error: ProxyError) -> dict[str, Any]:
    """An error as `response.failed` carries it: its code and message, with the codes
    agents act on (Codex backs off on `rate_limit_exceeded`, reading "try again in Ns" from
    the message, and stops retrying on `context_length_exceeded`)."""
    error = worded(error, "input")  # a refusal for the window: `context_length_exceeded`
    code, message = error.code, error.message
    if error.status == 429:
        code = "rate_limit_exceeded"
        retry = next((v for k, v in error.headers.items() if k.lower() == "retry-after"), "")
        if retry.isdigit():
            message = f"{message} Please try again in {retry}s."
    return {"code": code or error.type, "message": message}
