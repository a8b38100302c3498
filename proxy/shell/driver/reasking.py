"""The driver's side of a turn's calls asked for once more: each upstream call's body (the
turn's own, a constrained re-ask's, `constrain_every_call`'s tag), the policy stepped over
each decision, the upstream's profile read and told of refusals, and what the log line
counts. The rules are the core's (`turn.constrained`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from ...telemetry.request_log import ReAskSeen, RequestLog
from ...turn.constrained import policy as reask
from ...turn.constrained.dialects import (
    JSON,
    Constraint,
    Dialect,
    constrained_body,
    constraint_for,
    dialects_of,
    pick,
    wrapper_of,
)
from ...turn.constrained.profile import UpstreamProfile
from ...turn.core import Answer, Decision
from ...turn.plan import TurnPlan
from ..upstream.profiles import Learning, Profiles


class ReAsking:
    """One turn's re-asks: `body` for each upstream call, `decided` for each decision."""

    def __init__(self, plan: TurnPlan, profiles: Profiles, url: Callable[[], str],
                 headers: dict[str, str], log: RequestLog,
                 learning: Learning | None = None) -> None:
        config = plan.config
        self.plan = plan
        self._profiles = profiles
        self._url = url  # the replica the route chose (it may fail over)
        # the profile learned beside the turn, for the replica first chosen (the turn's
        # first call waited for it, within the probe's deadline)
        self._learning = learning
        self._learned_url = url()
        self._headers = headers
        self._log = log
        self.state = reask.Asking(config.constrained_reask, config.required_call_retries,
                                  plan.tool_call_required)
        self.budget = reask.budget(config.constrained_reask, config.required_call_retries,
                                   plan.tool_call_required)
        self._next: reask.ReAsk | None = None
        self._asked: tuple[reask.ReAsk, float] | None = None  # the re-ask under way, since
        self._every_call: Callable[[bytes], bytes] | None = None
        # `constrain_every_call`'s tag, made with the first body (once the profile is in)
        self._every_call_due = bool(config.constrain_every_call and plan.extraction.tools)

    def profile(self) -> UpstreamProfile:
        """The profile of the turn's model on the chosen replica, never waited for here:
        what was learned beside the turn, else what is known (the generic profile while
        another replica's is being learned)."""
        plan = self.plan
        url = self._url()
        if self._learning is None or url != self._learned_url:
            self._learning = self._profiles.learning(url, plan.model, plan.config,
                                                     self._headers)
            self._learned_url = url
        return self._learning.result()

    def body(self, base: bytes) -> bytes:
        """`base` as the next upstream call sends it: with `constrain_every_call`'s tag, or
        constrained for the re-ask the last decision asked for."""
        if self._every_call_due:
            self._every_call_due = False
            self._every_call = self._every_call_constraint()
        ask, self._next = self._next, None
        self._asked = None if ask is None else (ask, time.monotonic())
        if ask is None or ask.dialect is None:
            if ask is not None:
                self._log.notes.append("tool_call_required:asked_again")
            return base if self._every_call is None else self._every_call(base)
        profile = self.profile()
        self._log.notes.append(f"reask:{ask.label}")
        return constrained_body(base, ask.dialect, self._constraint(ask.reason, ask.tool),
                                wrapper_of(self.plan.config.formats, profile), profile.kind)

    def plan_for_answer(self) -> TurnPlan:
        """The plan the next answer is decided with: a JSON-constrained answer is the array
        of calls alone, read by any format."""
        last = self.state.last
        if last is not None and last.dialect is not None and last.dialect.shape == JSON:
            return replace(self.plan, extraction=replace(self.plan.extraction,
                                                         formats=("auto",)))
        return self.plan

    @property
    def asking(self) -> bool:
        """Whether the next upstream call is one the policy asked for (a re-ask or retry)."""
        return self._next is not None

    def recovered(self, decision: Decision) -> bool:
        """Whether `decision` is a later generation's answer, not the first one's (which a
        re-ask that did not mend falls back to)."""
        return (isinstance(decision, Answer) and bool(self.state.asked)
                and decision is not self.state.fallback)

    def decided(self, decision: Decision, held: bool = True) -> Decision:
        """What the waiting machine is told of the core's `decision` (asked again, the
        first answer kept, today's 502), with the refusal remembered and the re-ask counted.
        `held`: nothing that could be the call has gone out live (`reask.step`)."""
        plan = self.plan
        self.state, then = reask.step(self.state, decision, self._choose, plan.extraction.tools,
                                      held)
        if then.refused is not None:
            asked = self._asked[0].dialect if self._asked is not None else None
            if asked is not None:  # checked without the client's schemas before it counts
                self._profiles.refused(self._url(), plan.model, asked,
                                       wrapper_of(plan.config.formats, self.profile()),
                                       plan.config, self._headers)
            self._log.notes.append(f"constraint_refused:{then.refused}")
        if self._asked is not None:
            self._log.reasks.append(_seen(*self._asked, then))
            self._asked = None
        self._next = then.ask
        return then.decision

    def _constraint(self, reason: str, tool: str | None) -> Constraint:
        extraction = self.plan.extraction
        return constraint_for(extraction.tools, extraction.only, self.plan.parallel_tool_calls,
                              reason, tool)

    def _choose(self, reason: str, tool: str | None) -> Dialect | None:
        """The dialect the turn's upstream takes for a re-ask (None: none fits)."""
        profile = self.profile()
        return pick(dialects_of(profile), self._constraint(reason, tool),
                    wrapper_of(self.plan.config.formats, profile))

    def _every_call_constraint(self) -> Callable[[bytes], bytes] | None:
        """How each call is given a triggered structural tag (`constrain_every_call`), when
        the upstream takes one and the model's call wrapper is known."""
        plan = self.plan
        profile = self.profile()
        wrapper = wrapper_of(plan.config.formats, profile)
        only = plan.extraction.only
        tools = plan.extraction.tools
        constraint = Constraint(tools if only is None else {only: tools[only]},
                                forced=plan.tool_call_required,
                                parallel=plan.parallel_tool_calls)
        dialect = pick([d for d in dialects_of(profile) if d.shape != JSON], constraint,
                       wrapper)
        if dialect is None:
            self._log.notes.append("every_call_not_constrained")
            return None
        self._log.rewrites.append(f"every_call_constrained:{dialect.name}")
        return lambda body: constrained_body(body, dialect, constraint, wrapper, profile.kind)


def _seen(ask: reask.ReAsk, since: float, then: reask.Next) -> ReAskSeen:
    """What the log line, metrics and status page count of a re-ask that was answered."""
    decision = then.decision
    if then.refused is not None:
        result = "refused"
    elif isinstance(decision, Answer) and decision.outcome.tool_calls:
        result = "recovered"
    else:
        result = "unmet"
    dialect = ask.dialect.name if ask.dialect is not None else "unconstrained"
    return ReAskSeen(ask.reason, dialect, result, round((time.monotonic() - since) * 1000, 1))
