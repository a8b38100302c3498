"""One turn as one sans-I/O machine (h11's and mitmproxy's shape): `handle(event) -> actions`.

It is told what happened (the request, a look at the time, the client and the server, the
profile learned, a streamed call's events, a call's end) and answers what the shell must do
(learn the profile within this deadline, ask upstream with this body, wait, send the head,
live text or a heartbeat, keep the answer, cut the call, deliver, fail, give up). The wait
(`turn.waiting`), the re-ask policy (`turn.constrained.policy`, through `asks`), the
streamed mode's live turn and hold-back (`turn.live`) and the core's decision
(`turn.core.decide`) are its parts; it reads no clock and does no I/O. Every rule is a row
of `TABLE`, which `handle` reads: the first row whose phase, event and condition hold
applies; an event with no row raises `NoTransition`. `TABLE`, rendered (a test keeps this
copy equal to it; "live" is learning or calling; "the wait's" is what `turn.waiting`'s own
table answers for the event):

    start     Requested, a profile to learn     LearnProfile              -> learning
    start     Requested, otherwise              AskUpstream               -> calling
    learning  ProfileLearned                    AskUpstream, Wait         -> calling
    learning  Tick, profile deadline passed     AskUpstream, the wait's   -> calling
    live      Tick, otherwise                   the wait's
    live      ClientGone                        the wait's
    live      Draining                          the wait's
    calling   UpstreamEvents, a live turn       fed; the wait's or Wait
    calling   UpstreamEnded                     Decided, the wait's
    done      any event                         nothing

What the wait answers becomes the machine's actions: its Wait shortened to the profile's
deadline while learning; Flow with what the live turn releases (a streamed call's events
are fed to the turn being heard: Arrived when text may flow, a Tick once the wait under way
is over, else the rest of that wait); AskAgain a new AskUpstream (its body fitted,
re-asked or retried, as the policy says); Deliver after Keep when the front keeps answers;
Fail and Abandon after Cancel of the call under way, or, when the turn's time ran out on
the profile alone, Suspect of its replica. The profile is waited for only as the wait
says: its deadline is one more moment the machine's Wait ends at, not a timeout of its own."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...base.errors import ProxyError
from ...base.frozen import quick_init
from .. import waiting
from ..constrained.profile import UpstreamProfile
from ..context_window import with_max_tokens
from ..core import Answer, Decision, UpstreamReply, decide
from ..live import LiveTurn, as_said, stream_cut
from ..plan import TurnPlan
from ..thinking import ThinkingMemory, learn_from, learn_opened, learned_rule, unseen
from .asks import Asks, may_constrain
from .events import (
    Abandon,
    Action,
    AskUpstream,
    Cancel,
    ClientGone,
    Commit,
    Decided,
    Deliver,
    Draining,
    Event,
    Fail,
    Flow,
    Heartbeat,
    Keep,
    LearnProfile,
    Note,
    ProfileLearned,
    Requested,
    StreamEnd,
    Suspect,
    Tick,
    UpstreamEnded,
    UpstreamEvents,
    UpstreamOutcome,
    Wait,
)


class Phase(Enum):
    """Where the turn's upstream side stands (the client's side is the wait's phase)."""

    START = "start"
    LEARNING = "learning"  # the profile awaited, no call yet
    CALLING = "calling"  # an upstream call under way
    DONE = "done"


class NoTransition(Exception):
    """`handle` was told an event that no row of its table takes: the shell has a bug."""


@quick_init
@dataclass(frozen=True)
class Settings:
    """What the machine is given beside the plan: when the turn began (the wait's clock),
    how long a profile may be waited for, whether the front keeps answers, and what `auto`
    learned of each model's thinking (shared by the turns of a process)."""

    started: float
    profile_seconds: float
    keeps: bool
    thinking: ThinkingMemory


class TurnMachine:
    """One turn: `handle` each event, carry out the actions it answers, in order."""

    def __init__(self, plan: TurnPlan[Any], settings: Settings) -> None:
        config = plan.config
        self._settings = settings
        self._rule = plan.extraction.thinking
        # the first streamed or tool turn of a model: its profile says whether its template
        # opens thinking, so its text flows as the hundredth turn's does, and an output cut
        # by `length` before any closer is all thinking in both modes
        self._opening = ((plan.streamed or bool(plan.extraction.tools))
                         and unseen(self._rule, plan.model, settings.thinking))
        self.needs_profile = self._opening or may_constrain(plan)
        self.plan = plan
        self.asks = Asks(plan)
        self.wait = waiting.start(
            settings.started, config.buffered_timeout_seconds,
            commit_after=config.commit_window_seconds if plan.client_stream else None,
            beat=config.heartbeat_seconds, retries=self.asks.budget)
        self.phase = Phase.START
        self.live: LiveTurn | None = None  # the streamed turn's first generation, which flows
        self.heard: LiveTurn | None = None  # the generation being read (a re-ask's is quiet)
        self.base_body = plan.upstream_body  # the turn's body (its max_tokens fitted)
        self.profile = UpstreamProfile()  # what is known of the replica asked
        self._profile_deadline = 0.0
        self._wake: float | None = None  # when the wait under way ends
        self.asked = False  # an upstream call has been made

    def handle(self, event: Event) -> list[Action]:
        """What the shell must do, in order, for `event`: what its row says."""
        return row_for(self, event).act(self, event)

    # -- what the rows do ---------------------------------------------------------------

    def _requested(self, event: Requested) -> list[Action]:
        if self.needs_profile:
            self.phase = Phase.LEARNING
            self._profile_deadline = event.now + self._settings.profile_seconds
            return [LearnProfile(self._profile_deadline)]
        return self._first_ask(event.now)

    def _learned(self, event: ProfileLearned) -> list[Action]:
        self.profile = event.profile
        actions = self._first_ask(event.now)
        if self._wake is not None:
            actions.append(Wait(max(0.0, self._wake - event.now)))
        return actions

    def _late(self, event: Tick) -> list[Action]:
        """The profile did not come in time: the turn goes on with the generic one."""
        return self._first_ask(event.now) + self._looked(event)

    def _first_ask(self, now: float) -> list[Action]:
        """What the profile decides before the first call (the thinking rule, the live
        turn, the first body), and the call."""
        settings, plan = self._settings, self.plan
        if self._opening:
            learn_opened(plan.model, self.profile.thinking_opened, settings.thinking)
        self.plan = self.asks.plan = plan.with_thinking(
            learned_rule(self._rule, plan.model, settings.thinking))
        if plan.streamed:
            self.live = self.heard = LiveTurn(self.plan)
        self.phase = Phase.CALLING
        return self._ask(now, [])

    def _ask(self, now: float, actions: list[Action]) -> list[Action]:
        body, label, told = self.asks.body(self.base_body, self.profile, now)
        self.asked = True
        # the policy may choose a constraint by the answering replica's profile
        profiled = may_constrain(self.plan)
        return [*actions, *told, AskUpstream(body, self.plan.streamed, label, profiled)]

    def _looked(self, event: Tick | ClientGone | Draining) -> list[Action]:
        look = waiting.Tick(event.now, client_gone=isinstance(event, ClientGone),
                            draining=isinstance(event, Draining))
        return self._waited(event.now, look)

    def _events(self, event: UpstreamEvents) -> list[Action]:
        heard = self.heard
        assert heard is not None  # (the row's condition)
        actions: list[Action] = []
        if heard.feed(event.events) and heard is self.live:
            actions += self._waited(event.now, waiting.Arrived(event.now))
        if self.phase is Phase.DONE:
            return actions
        wake = self._wake if self._wake is not None else event.now
        if event.now >= wake:
            return actions + self._waited(event.now, waiting.Tick(event.now))
        return [*actions, Wait(wake - event.now)]

    def _ended(self, event: UpstreamEnded) -> list[Action]:
        if event.profile is not None:
            self.profile = event.profile
        self.wait, _collect = waiting.step(self.wait, waiting.UpstreamDone(event.now))
        decision, told = self._decide(event.outcome, event.now)
        return [*told, Decided(decision),
                *self._waited(event.now, waiting.Decided(event.now, decision))]

    def _decide(self, outcome: UpstreamOutcome, now: float) -> tuple[Decision, list[Action]]:
        """The core's decision for the call's outcome, as the policy has it."""
        live, heard = self.live, self.heard
        reply: UpstreamReply | ProxyError
        if isinstance(outcome, StreamEnd):
            reply = (heard.reply(outcome.cut) if heard is not None
                     else stream_cut("ended where no stream was read"))
        else:
            reply = outcome
        decision = decide(self.asks.plan_for_answer(), reply)
        learn_from(self.plan.extraction.thinking, self.plan.model, decision.outcome,
                   self._settings.thinking)
        held = (live is None or heard is not live or not isinstance(decision, Answer)
                or live.holds(decision.result))
        decision, told = self.asks.decided(decision, held, self.profile, now)
        if live is not None and self.asks.recovered(decision):
            assert isinstance(decision, Answer)
            decision = dataclasses.replace(decision,
                                           result=as_said(decision.result, live.said()))
        return decision, told

    # -- the wait's answers, as the machine's ------------------------------------------

    def _waited(self, now: float, event: waiting.Event) -> list[Action]:
        self.wait, said = waiting.step(self.wait, event)
        actions: list[Action] = []
        for action in said:
            actions += self._translated(now, action)
        if self.wait.phase is waiting.Phase.DONE:
            self.phase = Phase.DONE
        return actions

    def _translated(self, now: float, action: waiting.Action) -> list[Action]:
        if isinstance(action, waiting.Wait):
            seconds = action.seconds
            if self.phase is Phase.LEARNING:
                seconds = min(seconds, max(0.0, self._profile_deadline - now))
            self._wake = now + seconds
            return [Wait(seconds)]
        if isinstance(action, waiting.Flow):
            assert self.live is not None
            return [Flow(tuple(self.live.release()))]
        if isinstance(action, waiting.AskAgain):
            return self._ask_again(now, action)
        if isinstance(action, waiting.Deliver):
            result = action.answer.result
            kept: list[Action] = [Keep(self.plan, result)] if self._settings.keeps else []
            return [*kept, Deliver(action.answer)]
        if isinstance(action, (waiting.Fail, waiting.Abandon)):
            end: Action = Fail(action.error) if isinstance(action, waiting.Fail) else Abandon()
            timed_out = isinstance(action, waiting.Fail) and action.error.code == (
                "upstream_timeout")
            why = action.error if timed_out and isinstance(action, waiting.Fail) else None
            if self.asked:
                return [Cancel(why), end]
            return [Suspect(why), end] if why is not None else [end]
        return [_CLIENT[type(action)]()]

    def _ask_again(self, now: float, action: waiting.AskAgain) -> list[Action]:
        """The next upstream call: what it asks, and the log's word for why."""
        told: list[Action] = []
        if action.fit is not None:
            tokens = action.fit.max_tokens
            self.base_body = with_max_tokens(self.base_body, tokens)
            told.append(Note(f"max_tokens_fitted:{'window' if tokens is None else tokens}"))
        if self.live is not None and self.asks.asking:
            # a re-ask of a streamed turn is read quietly: its prose never flows (the
            # client has the first generation's), only its calls reach the answer
            self.heard = LiveTurn(self.plan)
        return self._ask(now, told)


# The wait's actions that the machine passes on as they are (no data of their own).
_CLIENT: dict[type, Callable[[], Action]] = {waiting.Commit: Commit,
                                             waiting.Heartbeat: Heartbeat}


# -- the table -------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One transition: in one of `phases`, on an event of type `event` for which `when`
    holds (`condition` in words), `act` answers what `does` says, and the phase becomes
    `to` (None: unchanged, or as the wait ends it)."""

    phases: tuple[Phase, ...]
    event: type
    condition: str
    when: Callable[[TurnMachine, Any], bool]
    does: str
    to: Phase | None
    act: Callable[[TurnMachine, Any], list[Action]]


LIVE = (Phase.LEARNING, Phase.CALLING)
_START, _LEARNING, _CALLING, _DONE = ((Phase.START,), (Phase.LEARNING,), (Phase.CALLING,),
                                      (Phase.DONE,))


TABLE: tuple[Row, ...] = (
    Row(_START, Requested, "a profile to learn", lambda m, e: m.needs_profile,
        "LearnProfile", Phase.LEARNING, TurnMachine._requested),
    Row(_START, Requested, "otherwise", waiting.always,
        "AskUpstream", Phase.CALLING, TurnMachine._requested),
    Row(_LEARNING, ProfileLearned, "", waiting.always,
        "AskUpstream, Wait", Phase.CALLING, TurnMachine._learned),
    Row(_LEARNING, Tick, "profile deadline passed",
        lambda m, e: e.now >= m._profile_deadline,
        "AskUpstream, the wait's", Phase.CALLING, TurnMachine._late),
    Row(LIVE, Tick, "otherwise", waiting.always, "the wait's", None, TurnMachine._looked),
    Row(LIVE, ClientGone, "", waiting.always, "the wait's", None, TurnMachine._looked),
    Row(LIVE, Draining, "", waiting.always, "the wait's", None, TurnMachine._looked),
    Row(_CALLING, UpstreamEvents, "a live turn", lambda m, e: m.heard is not None,
        "fed; the wait's or Wait", None, TurnMachine._events),
    Row(_CALLING, UpstreamEnded, "", waiting.always, "Decided, the wait's", None,
        TurnMachine._ended),
    # the turn is over: what comes after its end (a late Tick, say) changes nothing
    Row(_DONE, object, "", waiting.always, "nothing", None, lambda m, e: []),
)


def row_for(machine: TurnMachine, event: Event) -> Row:
    """The row of `TABLE` that `handle` follows for `event`."""
    row = waiting.first_row(TABLE, _ROWS_OF, machine.phase, machine, event)
    if row is None:
        raise NoTransition(f"no row for {type(event).__name__} in phase {machine.phase.value}")
    return row


_ROWS_OF: dict[type, tuple[Row, ...]] = {}


def render(table: tuple[Row, ...]) -> str:
    """The table as the module's docstring shows it, one row a line."""
    lines = []
    for row in table:
        phases, event, to = waiting.row_words(row.phases, LIVE, row.event, row.condition,
                                              row.to)
        lines.append(f"{phases:<9} {event:<33} {row.does:<25} {to}".rstrip())
    return "\n".join(lines)
