"""The waiting of one turn as a small state machine: `step(state, event) -> (state, actions)`.

The turn machine (`turn.machine`; for a relayed request's headers, the passthrough) tells it
what happened (time passed, upstream sent text the client may see, upstream finished, the
turn decided) and passes on what it answers (wait, send the stream's head, live text or a
heartbeat, ask upstream again, deliver, fail, give up on a client that left). In the
streamed mode text arrives between the looks at the client: the machine keeps to the Wait
it was given (its looks stay on time) and tells each arrival as it comes; heartbeats are
sent only while nothing else flows. Every rule of the wait is a row of
`TABLE`, which `step` reads (in the spirit of h11's `_state.py`): the first row whose phase,
event and condition hold applies; an event with no row raises `NoTransition`, and one after
the end has a row of its own. Its caller has no rule of its own. `TABLE`, rendered (a test
keeps this copy equal to it; "live" is waiting or streaming):

    live       Tick, deadline passed               Fail              -> done
    live       Tick, client gone                   Abandon           -> done
    live       Tick, server stopping               Fail              -> done
    waiting    Tick, commit window passed          Commit, Wait      -> streaming
    streaming  Tick, heartbeat due                 Heartbeat, Wait
    live       Tick, otherwise                     Wait
    waiting    Arrived, client streams             Commit, Flow      -> streaming
    waiting    Arrived, client does not stream     nothing
    streaming  Arrived                             Flow
    live       UpstreamDone                        Collect
    live       Decided, an answer                  Deliver           -> done
    live       Decided, fit given, not yet fitted  AskAgain, Wait
    live       Decided, ask again, a retry left    AskAgain, Wait
    live       Decided, otherwise                  Fail              -> done
    done       any event                           nothing
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, TypeVar

from ..base.errors import ProxyError, proxy_restarting
from ..base.frozen import quick_init, replaced
from .context_window import Refit
from .core import Answer, Decision

CHECK_SECONDS = 0.5  # how often a waiting turn looks at its client and the server


class Phase(Enum):
    """Where the client's response stands."""

    WAITING = "waiting"  # nothing sent yet: an error keeps its HTTP status
    STREAMING = "streaming"  # the stream's head is out: errors go in the stream
    DONE = "done"


@quick_init
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

@quick_init
@dataclass(frozen=True)
class Tick:
    """A wait ended without upstream finishing: the time, and what the shell saw."""

    now: float
    client_gone: bool = False
    draining: bool = False


@quick_init
@dataclass(frozen=True)
class UpstreamDone:
    """The upstream call has ended (its reply or failure waits to be collected)."""

    now: float


@quick_init
@dataclass(frozen=True)
class Decided:
    """What the turn core made of the collected reply."""

    now: float
    decision: Decision


@quick_init
@dataclass(frozen=True)
class Arrived:
    """Upstream sent reasoning or text that the client may see now (the streamed mode)."""

    now: float


Event = Tick | UpstreamDone | Decided | Arrived


# -- actions ---------------------------------------------------------------------------------

@quick_init
@dataclass(frozen=True)
class Wait:
    """Wait for upstream at most this long, then tell the machine (Tick or UpstreamDone)."""

    seconds: float


@quick_init
@dataclass(frozen=True)
class Commit:
    """Send the stream's head: from now on the client's response is a stream."""


@quick_init
@dataclass(frozen=True)
class Flow:
    """Send the reasoning and text that upstream sent and the client may see now."""


@quick_init
@dataclass(frozen=True)
class Heartbeat:
    """Send a frame that keeps the client's idle watchdog (and every proxy between) calm."""


@quick_init
@dataclass(frozen=True)
class Collect:
    """Take the upstream call's reply and have the core decide (then send Decided)."""


@quick_init
@dataclass(frozen=True)
class AskAgain:
    """Start a new upstream call with the same body (from now on asking the completion
    tokens `fit` says, when set)."""

    fit: Refit | None = None


@quick_init
@dataclass(frozen=True)
class Deliver:
    """Send the answer; the turn is over."""

    answer: Answer


@quick_init
@dataclass(frozen=True)
class Fail:
    """Cut the upstream call and send the error; the turn is over."""

    error: ProxyError


@quick_init
@dataclass(frozen=True)
class Abandon:
    """The client left: cut the upstream call, send nothing more."""


Action = Wait | Commit | Flow | Heartbeat | Collect | AskAgain | Deliver | Fail | Abandon


def step(state: Waiting, event: Event) -> tuple[Waiting, list[Action]]:
    """The next state and what the shell must do, for `event`: what its row says."""
    return row_for(state, event).act(state, event)


def row_for(state: Waiting, event: Event) -> Row:
    """The row of `TABLE` that `step` follows for `event` in `state`."""
    row = first_row(TABLE, _ROWS_OF, state.phase, state, event)
    if row is None:
        raise NoTransition(f"no row for {type(event).__name__} in phase {state.phase.value}")
    return row


class _EventRow(Protocol):
    """A table row, as read by its event's type, its phases and its condition."""

    @property
    def event(self) -> type: ...

    @property
    def phases(self) -> tuple[Any, ...]: ...

    @property
    def when(self) -> Callable[[Any, Any], bool]: ...


R = TypeVar("R", bound=_EventRow)


def rows_by_type(table: tuple[R, ...], known: dict[type, tuple[R, ...]],
                 kind: type) -> tuple[R, ...]:
    """The rows of `table` whose event type `kind` is (or inherits), in the table's order,
    kept in `known`: a table read by the event's type, so a token's events skip the rows of
    the others. The turn machine's table is read the same way."""
    rows = known.get(kind)
    if rows is None:
        rows = known[kind] = tuple(row for row in table if issubclass(kind, row.event))
    return rows


def first_row(table: tuple[R, ...], known: dict[type, tuple[R, ...]], phase: Any,
              state: Any, event: Any) -> R | None:
    """The first row of `table` for `event`'s type (rows_by_type, kept in `known`) that
    applies in `phase` and whose condition holds for `state` and `event`, a row whose
    condition is `always` not asked; None when none does. The turn machine's table is read
    the same way."""
    rows = known.get(type(event))  # (rows_by_type's own look-up, a call less per event)
    for row in rows if rows is not None else rows_by_type(table, known, type(event)):
        if phase in row.phases and (row.when is always or row.when(state, event)):
            return row
    return None


def always(state: Any, event: Any) -> bool:
    """The condition of a row that holds whenever its phase and event do (never called by
    first_row)."""
    return True


_ROWS_OF: dict[type, tuple[Row, ...]] = {}


# -- the table -------------------------------------------------------------------------------

class NoTransition(Exception):
    """`step` was told an event that no row of its table takes: the shell has a bug."""


@dataclass(frozen=True)
class Row:
    """One transition: in one of `phases`, on an event of type `event` for which `when`
    holds (`condition` in words), `act` answers actions of the kinds `does`, in that order,
    and the phase becomes `to` (None: unchanged)."""

    phases: tuple[Phase, ...]
    event: type
    condition: str
    when: Callable[[Waiting, Any], bool]
    does: tuple[type, ...]
    to: Phase | None
    act: Callable[[Waiting, Any], tuple[Waiting, list[Action]]]


LIVE = (Phase.WAITING, Phase.STREAMING)


def row_words(phases: tuple[Enum, ...], live: tuple[Enum, ...], event: type, condition: str,
              to: Enum | None) -> tuple[str, str, str]:
    """A table row's phases, event (with its condition) and next phase as a docstring shows
    them: this table's and the turn machine's (`machine.turn.render`)."""
    named = "live" if phases == live else " ".join(str(p.value) for p in phases)
    said = "any event" if event is object else event.__name__
    said += f", {condition}" if condition else ""
    return named, said, f"-> {to.value}" if to else ""


def render(table: tuple[Row, ...]) -> str:
    """The table as the module's docstring shows it, one row a line."""
    lines = []
    for row in table:
        phases, event, to = row_words(row.phases, LIVE, row.event, row.condition, row.to)
        does = ", ".join(kind.__name__ for kind in row.does) or "nothing"
        lines.append(f"{phases:<10} {event:<35} {does:<17} {to}".rstrip())
    return "\n".join(lines)


def _done(state: Waiting, action: Action) -> tuple[Waiting, list[Action]]:
    return replaced(state, phase=Phase.DONE), [action]


def _timed_out(state: Waiting, event: Tick) -> tuple[Waiting, list[Action]]:
    return _done(state, Fail(ProxyError(
        504, f"The upstream did not answer within {state.limit:g} s.",
        type_="upstream_error", code="upstream_timeout")))


def _commit(state: Waiting, event: Tick | Arrived) -> Waiting:
    """The stream's head goes out now: the first heartbeat a beat later."""
    return replaced(state, phase=Phase.STREAMING, next_beat=event.now + state.beat)


def _commit_and_wait(state: Waiting, event: Tick) -> tuple[Waiting, list[Action]]:
    state = _commit(state, event)
    return state, [Commit(), _wait(state, event.now)]


def _beat(state: Waiting, event: Tick) -> tuple[Waiting, list[Action]]:
    state = replaced(state, next_beat=event.now + state.beat)
    return state, [Heartbeat(), _wait(state, event.now)]


def _commit_and_flow(state: Waiting, event: Arrived) -> tuple[Waiting, list[Action]]:
    """Live text goes out at once, committing the stream."""
    return _commit(state, event), [Commit(), Flow()]


def _flow(state: Waiting, event: Arrived) -> tuple[Waiting, list[Action]]:
    """Live text goes out at once and puts off the next heartbeat."""
    return replaced(state, next_beat=event.now + state.beat), [Flow()]


def _fit(state: Waiting, event: Decided) -> tuple[Waiting, list[Action]]:
    state = replaced(state, fitted=True)
    decision = event.decision
    assert not isinstance(decision, Answer)  # the row's guard (_to_fit): a failure with a fit
    return state, [AskAgain(decision.fit), _wait(state, event.now)]


def _retry(state: Waiting, event: Decided) -> tuple[Waiting, list[Action]]:
    state = replaced(state, retries_left=state.retries_left - 1)
    return state, [AskAgain(), _wait(state, event.now)]


def _to_fit(state: Waiting, event: Decided) -> bool:
    decision = event.decision
    return not isinstance(decision, Answer) and decision.fit is not None and not state.fitted


def _to_retry(state: Waiting, event: Decided) -> bool:
    decision = event.decision
    return not isinstance(decision, Answer) and decision.ask_again and state.retries_left > 0


_STREAMING, _WAITING, _DONE = (Phase.STREAMING,), (Phase.WAITING,), (Phase.DONE,)

TABLE: tuple[Row, ...] = (
    Row(LIVE, Tick, "deadline passed", lambda s, e: e.now >= s.deadline,
        (Fail,), Phase.DONE, _timed_out),
    Row(LIVE, Tick, "client gone", lambda s, e: e.client_gone,
        (Abandon,), Phase.DONE, lambda s, e: _done(s, Abandon())),
    Row(LIVE, Tick, "server stopping", lambda s, e: e.draining,
        (Fail,), Phase.DONE, lambda s, e: _done(s, Fail(proxy_restarting()))),
    Row(_WAITING, Tick, "commit window passed",
        lambda s, e: s.commit_at is not None and e.now >= s.commit_at,
        (Commit, Wait), Phase.STREAMING, _commit_and_wait),
    Row(_STREAMING, Tick, "heartbeat due", lambda s, e: bool(s.beat) and e.now >= s.next_beat,
        (Heartbeat, Wait), None, _beat),
    Row(LIVE, Tick, "otherwise", always, (Wait,), None, lambda s, e: (s, [_wait(s, e.now)])),
    Row(_WAITING, Arrived, "client streams", lambda s, e: s.commit_at is not None,
        (Commit, Flow), Phase.STREAMING, _commit_and_flow),
    # a client that does not stream gets the text with the answer
    Row(_WAITING, Arrived, "client does not stream", always, (), None, lambda s, e: (s, [])),
    Row(_STREAMING, Arrived, "", always, (Flow,), None, _flow),
    Row(LIVE, UpstreamDone, "", always, (Collect,), None, lambda s, e: (s, [Collect()])),
    Row(LIVE, Decided, "an answer", lambda s, e: isinstance(e.decision, Answer),
        (Deliver,), Phase.DONE, lambda s, e: _done(s, Deliver(e.decision))),
    Row(LIVE, Decided, "fit given, not yet fitted", _to_fit, (AskAgain, Wait), None, _fit),
    Row(LIVE, Decided, "ask again, a retry left", _to_retry, (AskAgain, Wait), None, _retry),
    Row(LIVE, Decided, "otherwise", always,
        (Fail,), Phase.DONE, lambda s, e: _done(s, Fail(e.decision.error))),
    # the turn is over: what comes after its end (a late Tick, say) changes nothing
    Row(_DONE, object, "", always, (), None, lambda s, e: (s, [])),
)


def _wait(state: Waiting, now: float) -> Wait:
    """Until the next thing that can happen without upstream: the deadline, a look at the
    client, the commit window's end, the next heartbeat."""
    wake = min(state.deadline, now + CHECK_SECONDS)
    if state.phase is Phase.WAITING and state.commit_at is not None:
        wake = min(wake, state.commit_at)
    if state.phase is Phase.STREAMING and state.beat:
        wake = min(wake, state.next_beat)
    return Wait(min(CHECK_SECONDS, max(0.0, wake - now)))  # `now + CHECK - now` may round up
