"""What a tool turn decides, from data to data: the upstream's answer in, the client's
completion (normalised, policies applied) or the error out. The server, `replay` and
`doctor` all decide here; none of them has a policy of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import bulk_decode
from ..errors import (
    ProxyError,
    answer_not_completion,
    answer_not_json,
    from_upstream,
)
from .context_window import Refit, overflow_of, refit
from .normalize import Outcome, UpstreamShapeError, normalize_completion
from .plan import TurnPlan


@dataclass(frozen=True)
class UpstreamReply:
    """A buffered upstream answer: status, headers and the whole body (or, `parsed`, the
    answer already as data: a streamed one, assembled by `turn.live`)."""

    status: int
    headers: dict[str, str]
    body: bytes
    parsed: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class Answer:
    """The completion the client gets, and what was decided on the way."""

    completion: dict[str, Any]
    outcome: Outcome
    notes: tuple[str, ...] = ()
    upstream_status: int | None = None
    received: Any = field(default=None, repr=False)  # upstream's body, for `log_bodies`
    dropped_calls: int = 0  # by `parallel_tool_calls: false`


@dataclass(frozen=True)
class Failure:
    """The error the client gets instead. `ask_again`: the answer broke the request's
    `tool_choice` (no call came), and another generation may keep it. `fit`: upstream
    refused a completion longer than its context window leaves; asked so, it would fit."""

    error: ProxyError
    outcome: Outcome | None = None
    notes: tuple[str, ...] = ()
    upstream_status: int | None = None
    received: Any = field(default=None, repr=False)
    ask_again: bool = False
    fit: Refit | None = None


Decision = Answer | Failure


def decide(plan: TurnPlan, reply: UpstreamReply | ProxyError) -> Decision:
    """The turn's result for upstream's `reply` (or the failure that replaced it)."""
    if isinstance(reply, ProxyError):
        return Failure(reply)
    status = reply.status
    try:
        body: Any = reply.parsed if reply.parsed is not None else bulk_decode.loads(reply.body)
    except orjson.JSONDecodeError:
        text = reply.body.decode("utf-8", "replace")
        error = (from_upstream(status, reply.body, reply.headers) if status >= 400
                 else answer_not_json())
        return Failure(error, upstream_status=status, received=text)
    if status >= 400:
        error = from_upstream(status, reply.body, reply.headers)
        return Failure(error, upstream_status=status, received=body,
                       fit=_fitting(plan, error))
    try:
        completion, outcome = normalize_completion(body, plan.extraction)
    except UpstreamShapeError as exc:
        return Failure(answer_not_completion(exc), upstream_status=status, received=body)
    notes = []
    dropped = 0 if plan.parallel_tool_calls else keep_first_call(completion, outcome)
    if dropped:
        notes.append("parallel_tool_calls_false:kept_first_call")
    if plan.tool_call_required and not outcome.tool_calls:
        notes.append("tool_call_required_but_none_found")
        return Failure(required_call_unmet(plan.config.required_call_retries), outcome,
                       tuple(notes), status, body, ask_again=True)
    return Answer(completion, outcome, tuple(notes), status, body, dropped)


def _fitting(plan: TurnPlan, error: ProxyError) -> Refit | None:
    """How to ask again, when `error` is upstream refusing a completion longer than the
    context window leaves and what it leaves is worth a generation."""
    if not plan.config.fit_max_tokens or error.status != 400:
        return None
    overflow = overflow_of(error.message)
    return None if overflow is None else refit(overflow)


def required_call_unmet(retries: int) -> ProxyError:
    """`tool_choice` demanded a call and every answer (`retries` + 1 of them) came without."""
    return ProxyError(
        502, "tool_choice asked for a tool call and the model answered without one"
        + (f" (asked {retries + 1} times)." if retries else "."),
        type_="upstream_error", code="tool_call_required_unmet")


def keep_first_call(completion: dict[str, Any], outcome: Outcome | None = None) -> int:
    """`parallel_tool_calls: false`: only each choice's first call is emitted; returns how
    many calls were dropped, and keeps `outcome`'s counts to the calls emitted."""
    dropped = 0
    kept_formats: list[str] = []
    position = 0
    for choice in completion["choices"]:
        calls = choice["message"].get("tool_calls") or []
        if outcome is not None and calls:
            kept_formats.append(outcome.call_formats[position])
            position += len(calls)
        if len(calls) > 1:
            dropped += len(calls) - 1
            choice["message"]["tool_calls"] = calls[:1]
    if outcome is not None and dropped:
        outcome.call_formats = kept_formats
        outcome.tool_calls -= dropped
    return dropped
