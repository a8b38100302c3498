"""A turn's calls asked for once more, as the machine keeps them: each upstream call's body
(the turn's own, a constrained re-ask's, `constrain_every_call`'s tag), the re-ask policy
(`turn.constrained.policy`) stepped over each decision, and what the log line is told of
it. Pure: the profile comes with the events, the time too; the log's words are actions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...base.frozen import replaced
from ..constrained import policy as reask
from ..constrained.dialects import (
    JSON,
    Constraint,
    Dialect,
    constrained_body,
    constraint_for,
    dialects_of,
    pick,
    wrapper_of,
)
from ..constrained.profile import UpstreamProfile
from ..core import Answer, Decision
from ..plan import TurnPlan
from .events import Action, Note, ReAsked, Refused


def may_constrain(plan: TurnPlan[Any]) -> bool:
    """Whether a turn may ask under a constraint (its profile names the dialect): it offers
    tools, and constrained re-asks or `constrain_every_call` are on."""
    config = plan.config
    return bool(plan.extraction.tools) and (config.constrained_reask != reask.OFF
                                            or config.constrain_every_call)


class Asks:
    """One turn's re-asks: `body` for each upstream call, `decided` for each decision."""

    def __init__(self, plan: TurnPlan[Any]) -> None:
        config = plan.config
        self.plan = plan
        self.state = reask.Asking(config.constrained_reask, config.required_call_retries,
                                  plan.tool_call_required)
        self.budget = reask.budget(config.constrained_reask, config.required_call_retries,
                                   plan.tool_call_required)
        self._next: reask.ReAsk | None = None
        self._asked: tuple[reask.ReAsk, float] | None = None  # the re-ask under way, since
        self._every_call: Callable[[bytes], bytes] | None = None
        # `constrain_every_call`'s tag, made with the first body (once the profile is in)
        self._every_call_due = bool(config.constrain_every_call and plan.extraction.tools)

    @property
    def asking(self) -> bool:
        """Whether the next upstream call is one the policy asked for (a re-ask or retry)."""
        return self._next is not None

    def body(self, base: bytes, profile: UpstreamProfile, now: float,
             ) -> tuple[bytes, str | None, list[Action]]:
        """`base` as the next upstream call sends it (with `constrain_every_call`'s tag, or
        constrained for the re-ask the last decision asked for), the re-ask's label, and the
        log's words for it."""
        told: list[Action] = []
        if self._every_call_due:
            self._every_call_due = False
            self._every_call = self._every_call_constraint(profile, told)
        ask, self._next = self._next, None
        self._asked = None if ask is None else (ask, now)
        if ask is None or ask.dialect is None:
            if ask is not None:
                told.append(Note("tool_call_required:asked_again"))
            body = base if self._every_call is None else self._every_call(base)
            return body, None if ask is None else ask.label, told
        told.append(Note(f"reask:{ask.label}"))
        return (constrained_body(base, ask.dialect, self._constraint(ask.reason, ask.tool),
                                 wrapper_of(self.plan.config.formats, profile), profile.kind),
                ask.label, told)

    def plan_for_answer(self) -> TurnPlan[Any]:
        """The plan the next answer is decided with: a JSON-constrained answer is the array
        of calls alone, read by any format."""
        last = self.state.last
        if last is not None and last.dialect is not None and last.dialect.shape == JSON:
            return replaced(self.plan, extraction=replaced(self.plan.extraction,
                                                           formats=("auto",)))
        return self.plan

    def recovered(self, decision: Decision) -> bool:
        """Whether `decision` is a later generation's answer, not the first one's (which a
        re-ask that did not mend falls back to)."""
        return (isinstance(decision, Answer) and bool(self.state.asked)
                and decision is not self.state.fallback)

    def decided(self, decision: Decision, held: bool, profile: UpstreamProfile, now: float,
                ) -> tuple[Decision, list[Action]]:
        """What the wait is told of the core's `decision` (asked again, the first answer
        kept, today's 502), and the actions it asks: a refusal to remember, the re-ask
        counted. `held`: nothing that could be the call has gone out live (`reask.step`)."""
        plan = self.plan
        told: list[Action] = []

        def choose(reason: str, tool: str | None) -> Dialect | None:
            """The dialect the turn's upstream takes for a re-ask (None: none fits)."""
            return pick(dialects_of(profile), self._constraint(reason, tool),
                        wrapper_of(plan.config.formats, profile))

        self.state, then = reask.step(self.state, decision, choose, plan.extraction.tools,
                                      held)
        if then.refused is not None:
            asked = self._asked[0].dialect if self._asked is not None else None
            if asked is not None:
                told.append(Refused(asked, wrapper_of(plan.config.formats, profile)))
            told.append(Note(f"constraint_refused:{then.refused}"))
        if self._asked is not None:
            told.append(_seen(*self._asked, then, now))
            self._asked = None
        self._next = then.ask
        return then.decision, told

    def _constraint(self, reason: str, tool: str | None) -> Constraint:
        extraction = self.plan.extraction
        return constraint_for(extraction.tools, extraction.only, self.plan.parallel_tool_calls,
                              reason, tool)

    def _every_call_constraint(self, profile: UpstreamProfile, told: list[Action],
                               ) -> Callable[[bytes], bytes] | None:
        """How each call is given a triggered structural tag (`constrain_every_call`), when
        the upstream takes one and the model's call wrapper is known."""
        plan = self.plan
        wrapper = wrapper_of(plan.config.formats, profile)
        only = plan.extraction.only
        tools = plan.extraction.tools
        constraint = Constraint(tools if only is None else {only: tools[only]},
                                forced=plan.tool_call_required,
                                parallel=plan.parallel_tool_calls)
        dialect = pick([d for d in dialects_of(profile) if d.shape != JSON], constraint,
                       wrapper)
        if dialect is None:
            told.append(Note("every_call_not_constrained"))
            return None
        told.append(Note(f"every_call_constrained:{dialect.name}", rewrite=True))
        kind = profile.kind
        return lambda body: constrained_body(body, dialect, constraint, wrapper, kind)


def _seen(ask: reask.ReAsk, since: float, then: reask.Next, now: float) -> ReAsked:
    """What the log line, metrics and status page count of a re-ask that was answered."""
    decision = then.decision
    if then.refused is not None:
        result = "refused"
    elif isinstance(decision, Answer) and decision.outcome.tool_calls:
        result = "recovered"
    else:
        result = "unmet"
    dialect = ask.dialect.name if ask.dialect is not None else "unconstrained"
    return ReAsked(ask.reason, dialect, result, round((now - since) * 1000, 1))
