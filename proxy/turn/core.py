"""What a tool turn decides, from data to data: the upstream's answer in, the turn's typed
result (normalised, policies applied; `TurnResult`, which each front renders) or the error
out. The server, `replay` and
`doctor` all decide here; none of them has a policy of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ..base import bulk_decode
from ..base.errors import (
    ProxyError,
    answer_not_completion,
    answer_not_json,
    from_upstream,
)
from ..base.frozen import quick_init
from .context_window import Refit, overflow_of, refit
from .normalize import UpstreamShapeError, normalize
from .plan import TurnPlan
from .rescue.upstream_error import Rescued, as_completion, rescued
from .result import Outcome, TurnResult, first_calls_only


@quick_init
@dataclass(frozen=True)
class UpstreamReply:
    """A buffered upstream answer: status, headers and the whole body (or, `parsed`, the
    answer already as data: a streamed one, assembled by `turn.live`). `rescue`: the body is
    an error whose model text `parsed` already holds as a completion (`turn.rescue`; a
    stream's error event, with what the stream sent before it)."""

    status: int
    headers: dict[str, str]
    body: bytes
    parsed: Any = field(default=None, repr=False)
    rescue: Rescued | None = None


@quick_init
@dataclass(frozen=True)
class Answer:
    """The result the client gets (rendered by its front), and what was decided on the way."""

    result: TurnResult
    notes: tuple[str, ...] = ()
    upstream_status: int | None = None
    received: Any = field(default=None, repr=False)  # upstream's body, for `log_bodies`
    dropped_calls: int = 0  # by `parallel_tool_calls: false`

    @property
    def outcome(self) -> Outcome:
        """What normalisation repaired and refused."""
        return self.result.outcome


@quick_init
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
    rescue = reply.rescue
    received = body
    if status >= 400 and rescue is None:
        rescue = rescued(body) if plan.extraction.tools else None
        if rescue is None:
            error = from_upstream(status, reply.body, reply.headers)
            return Failure(error, upstream_status=status, received=body,
                           fit=_fitting(plan, error))
        body = as_completion(rescue, plan.model)
    try:
        result = normalize(body, plan.extraction)
    except UpstreamShapeError as exc:
        return Failure(answer_not_completion(exc), upstream_status=status, received=body)
    notes = []
    if rescue is not None:
        if not (rescue.whole or result.outcome.tool_calls):  # a fragment is no answer
            return Failure(from_upstream(status, reply.body, reply.headers),
                           upstream_status=status, received=received)
        notes.append(rescue.note)
    dropped = 0
    if not plan.parallel_tool_calls:
        result, dropped = first_calls_only(result)
    if dropped:
        notes.append("parallel_tool_calls_false:kept_first_call")
    if plan.tool_call_required and not result.outcome.tool_calls:
        notes.append("tool_call_required_but_none_found")
        return Failure(required_call_unmet(plan.config.required_call_retries), result.outcome,
                       tuple(notes), status, received, ask_again=True)
    return Answer(result, tuple(notes), status, received, dropped)


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
