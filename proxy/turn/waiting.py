"""The waiting of one turn as a small state machine: `step(state, event) -> (state, actions)`.

The shell tells it what happened (time passed, upstream sent text the client may see,
upstream finished, the turn decided) and carries out what it answers (wait, send the
stream's head, live text or a heartbeat, ask upstream again, deliver, fail, give up on a
client that left). In the streamed mode text arrives between the looks at the client: the
shell keeps to the Wait it was given (its looks stay on time) and tells each arrival as it
comes; heartbeats are sent only while nothing else flows. Every rule of the wait is in this
table (in the spirit of h11's `_state.py`); the shell has none of its own.

    phase      event                           actions
    any        Tick, deadline passed           Fail(upstream_timeout)              -> done
    any        Tick, client gone               Abandon                             -> done
    any        Tick, server stopping           Fail(proxy_restarting)              -> done
    waiting    Tick, commit window passed      Commit (the stream's head), Wait    -> streaming
    streaming  Tick, heartbeat due             Heartbeat, Wait
    waiting    Arrived (streamed mode)         Commit, Flow                        -> streaming
    streaming  Arrived                         Flow (the next heartbeat a beat later)
    any        UpstreamDone                    Collect (the shell decides, see core.decide)
    any        Decided(Answer)                 Deliver                             -> done
    any        Decided(Failure ask_again), a retry left
                                               AskAgain, Wait
    any        Decided(Failure fit), not yet fitted
                                               AskAgain(fit), Wait
    any        Decided(Failure)                Fail                                -> done
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from ..base.errors import ProxyError, proxy_restarting
from .context_window import Refit
from .core import Answer, Decision

CHECK_SECONDS = 0.5  # how often a waiting turn looks at its client and the server


class Phase(Enum):
    """Where the client's response stands."""

    WAITING = "waiting"  # nothing sent yet: an error keeps its HTTP status
    STREAMING = "streaming"  # the stream's head is out: errors go in the stream
    DONE = "done"


@dataclass(frozen=True)
class Waiting:
    """The state: the phase and the times that matter to it."""

    phase: Phase
    started: float
    limit: float  # seconds from `started` that upstream has to answer
    commit_at: float | None  # when a streaming client's head goes out; None: not streaming
    beat: float  # seconds between heartbeats once streaming; 0: none
    next_beat: float
    retries_left: int
    fitted: bool = False  # asked again once with the max_tokens the window leaves

    @property
    def deadline(self) -> float:
        """When the turn fails with upstream_timeout."""
        return self.started + self.limit


def start(started: float, limit: float, *, commit_after: float | None = None,
          beat: float = 0.0, retries: int = 0) -> Waiting:
    """The state of a turn that began at `started` (its upstream call under way).
    `commit_after`: the commit window of a streaming client (None: it does not stream)."""
    commit_at = None if commit_after is None else started + commit_after
    return Waiting(Phase.WAITING, started, limit, commit_at, beat, 0.0, retries)


# -- events ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tick:
    """A wait ended without upstream finishing: the time, and what the shell saw."""

    now: float
    client_gone: bool = False
    draining: bool = False


@dataclass(frozen=True)
class UpstreamDone:
    """The upstream call has ended (its reply or failure waits to be collected)."""

    now: float


@dataclass(frozen=True)
class Decided:
    """What the turn core made of the collected reply."""

    now: float
    decision: Decision


@dataclass(frozen=True)
class Arrived:
    """Upstream sent reasoning or text that the client may see now (the streamed mode)."""

    now: float


Event = Tick | UpstreamDone | Decided | Arrived


# -- actions ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Wait:
    """Wait for upstream at most this long, then tell the machine (Tick or UpstreamDone)."""

    seconds: float


@dataclass(frozen=True)
class Commit:
    """Send the stream's head: from now on the client's response is a stream."""


@dataclass(frozen=True)
class Flow:
    """Send the reasoning and text that upstream sent and the client may see now."""


@dataclass(frozen=True)
class Heartbeat:
    """Send a frame that keeps the client's idle watchdog (and every proxy between) calm."""


@dataclass(frozen=True)
class Collect:
    """Take the upstream call's reply and have the core decide (then send Decided)."""


@dataclass(frozen=True)
class AskAgain:
    """Start a new upstream call with the same body (from now on asking the completion
    tokens `fit` says, when set)."""

    fit: Refit | None = None


@dataclass(frozen=True)
class Deliver:
    """Send the answer; the turn is over."""

    answer: Answer


@dataclass(frozen=True)
class Fail:
    """Cut the upstream call and send the error; the turn is over."""

    error: ProxyError


@dataclass(frozen=True)
class Abandon:
    """The client left: cut the upstream call, send nothing more."""


Action = Wait | Commit | Flow | Heartbeat | Collect | AskAgain | Deliver | Fail | Abandon


def step(state: Waiting, event: Event) -> tuple[Waiting, list[Action]]:
    """The next state and what the shell must do, for `event`."""
    if state.phase is Phase.DONE:
        return state, []
    if isinstance(event, UpstreamDone):
        return state, [Collect()]
    if isinstance(event, Decided):
        return _decided(state, event)
    if isinstance(event, Arrived):
        return _arrived(state, event)
    return _tick(state, event)


def _arrived(state: Waiting, event: Arrived) -> tuple[Waiting, list[Action]]:
    """Live text goes out at once (committing the stream if it has not begun), and puts off
    the next heartbeat; a client that does not stream gets it all with the answer."""
    if state.commit_at is None:
        return state, []
    actions: list[Action] = []
    if state.phase is Phase.WAITING:
        actions.append(Commit())
    state = dataclasses.replace(state, phase=Phase.STREAMING, next_beat=event.now + state.beat)
    return state, [*actions, Flow()]


def _done(state: Waiting, action: Action) -> tuple[Waiting, list[Action]]:
    return dataclasses.replace(state, phase=Phase.DONE), [action]


def _decided(state: Waiting, event: Decided) -> tuple[Waiting, list[Action]]:
    decision = event.decision
    if isinstance(decision, Answer):
        return _done(state, Deliver(decision))
    if decision.fit is not None and not state.fitted:
        state = dataclasses.replace(state, fitted=True)
        return state, [AskAgain(decision.fit), _wait(state, event.now)]
    if decision.ask_again and state.retries_left > 0:
        state = dataclasses.replace(state, retries_left=state.retries_left - 1)
        return state, [AskAgain(), _wait(state, event.now)]
    return _done(state, Fail(decision.error))


def _tick(state: Waiting, event: Tick) -> tuple[Waiting, list[Action]]:
    now = event.now
    if now >= state.deadline:
        return _done(state, Fail(ProxyError(
            504, f"The upstream did not answer within {state.limit:g} s.",
            type_="upstream_error", code="upstream_timeout")))
    if event.client_gone:
        return _done(state, Abandon())
    if event.draining:
        return _done(state, Fail(proxy_restarting()))
    actions: list[Action] = []
    if state.phase is Phase.WAITING and state.commit_at is not None and now >= state.commit_at:
        state = dataclasses.replace(state, phase=Phase.STREAMING, next_beat=now + state.beat)
        actions.append(Commit())
    elif state.phase is Phase.STREAMING and state.beat and now >= state.next_beat:
        state = dataclasses.replace(state, next_beat=now + state.beat)
        actions.append(Heartbeat())
    return state, [*actions, _wait(state, now)]


def _wait(state: Waiting, now: float) -> Wait:
    """Until the next thing that can happen without upstream: the deadline, a look at the
    client, the commit window's end, the next heartbeat."""
    wake = min(state.deadline, now + CHECK_SECONDS)
    if state.phase is Phase.WAITING and state.commit_at is not None:
        wake = min(wake, state.commit_at)
    if state.phase is Phase.STREAMING and state.beat:
        wake = min(wake, state.next_beat)
    return Wait(min(CHECK_SECONDS, max(0.0, wake - now)))  # `now + CHECK - now` may round up
