"""What the turn machine is told and what it asks, as frozen data: the upstream's outcome (one
named type, which the shell's client produces), the events (time, the client, the server,
the upstream, the profile) and the actions (ask upstream, learn the profile, wait, send,
keep, record, fail, end)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...base.errors import ProxyError
from ...base.frozen import quick_init
from ...toolcalls.formats.spec import FormatSpec
from ..assemble import Piece
from ..constrained.dialects import Dialect
from ..constrained.profile import UpstreamProfile
from ..core import Answer, Decision, UpstreamReply
from ..plan import TurnPlan
from ..result import TurnResult

# -- the upstream's outcome --------------------------------------------------------------


@quick_init
@dataclass(frozen=True)
class StreamEnd:
    """An upstream stream read to its end; `cut`: it ended in the middle of an event (its
    events were told as they came, `UpstreamEvents`)."""

    cut: bool = False


class Unreached(ProxyError):
    """No answer came from this upstream at all: it refused or did not accept the connection
    (`connecting`: a replica that is not there), or the connection broke before the status
    line (one that went away, or a kept-alive connection it closed as it was reused).
    Another replica may take the same request."""

    connecting = False


# How one upstream call ended: a whole reply (buffered, or a stream's error status), a
# stream's end, or the failure that took the reply's place.
UpstreamOutcome = UpstreamReply | StreamEnd | ProxyError

ANOTHER_REPLICA = frozenset({502, 503, 504})  # a gateway's word that the replica is not there


def another_replica(outcome: UpstreamOutcome) -> bool:
    """Whether a buffered call's outcome is one another replica may do better with (nothing
    of it reached the client): unreached, cut before its end, or a gateway's 502/503/504."""
    if isinstance(outcome, ProxyError):
        return isinstance(outcome, Unreached) or outcome.code == "upstream_cut"
    return isinstance(outcome, UpstreamReply) and outcome.status in ANOTHER_REPLICA


# -- events ------------------------------------------------------------------------------


@quick_init
@dataclass(frozen=True)
class Requested:
    """The client's request has been read into the machine's plan: the turn begins."""

    now: float


@quick_init
@dataclass(frozen=True)
class Tick:
    """A wait ended with nothing else to tell: the time."""

    now: float


@quick_init
@dataclass(frozen=True)
class ClientGone:
    """A look at the client found it gone (or a write to it failed)."""

    now: float


@quick_init
@dataclass(frozen=True)
class Draining:
    """A look at the server found it stopping."""

    now: float


@quick_init
@dataclass(frozen=True)
class ProfileLearned:
    """The profile the machine asked for came (within its deadline)."""

    now: float
    profile: UpstreamProfile


@quick_init
@dataclass(frozen=True)
class UpstreamEvents:
    """A streamed call's events that arrived since the last, in order (the streamed mode)."""

    now: float
    events: tuple[bytes, ...]


@quick_init
@dataclass(frozen=True)
class UpstreamEnded:
    """The upstream call has ended: how, and what is known now of the profile of the replica
    that answered (None: nothing asked of it; a failover may have moved the call)."""

    now: float
    outcome: UpstreamOutcome
    profile: UpstreamProfile | None = None


Event = (Requested | Tick | ClientGone | Draining | ProfileLearned | UpstreamEvents
         | UpstreamEnded)


# -- actions -----------------------------------------------------------------------------


@quick_init
@dataclass(frozen=True)
class LearnProfile:
    """Learn the upstream's profile; tell `ProfileLearned` when it comes before `deadline`
    (while waiting as `Wait` says), else nothing: the machine's own Tick sees the deadline."""

    deadline: float


@quick_init
@dataclass(frozen=True)
class AskUpstream:
    """Start an upstream call with this body (streamed or buffered, as the plan says), on a
    replica the router picks; `reask`: why the policy asks again (None: the turn's own call,
    or an ask after a fit); `profiled`: tell, with the call's end, what is known then of the
    profile of the replica that answered (a failover may have moved the call)."""

    body: bytes
    streamed: bool
    reask: str | None = None
    profiled: bool = False


@quick_init
@dataclass(frozen=True)
class Wait:
    """Wait at most this long on what is under way (the profile or the call), then tell the
    machine what happened (`Tick` when nothing did)."""

    seconds: float


@quick_init
@dataclass(frozen=True)
class Commit:
    """Send the stream's head: from now on the client's response is a stream."""


@quick_init
@dataclass(frozen=True)
class Flow:
    """Send this reasoning and text, which upstream sent and the client may see now."""

    pieces: tuple[Piece, ...]


@quick_init
@dataclass(frozen=True)
class Heartbeat:
    """Send a frame that keeps the client's idle watchdog (and every proxy between) calm."""


@quick_init
@dataclass(frozen=True)
class Cancel:
    """Cut the upstream call under way; `why`: what it ends with (the turn's time ran out),
    None: the client left or the turn ended without it."""

    why: ProxyError | None = None


@quick_init
@dataclass(frozen=True)
class Suspect:
    """The turn's time ran out on the replica's profile alone (no call was made): the
    replica answered not even its info endpoints in time."""

    why: ProxyError


@quick_init
@dataclass(frozen=True)
class Refused:
    """The upstream refused a constrained re-ask's field: remember it against the profile of
    the replica asked (checked without the client's schemas before it counts)."""

    dialect: Dialect
    wrapper: FormatSpec | None


@quick_init
@dataclass(frozen=True)
class Note:
    """A word for the log line's `notes` (`rewrite`: its `rewrites`)."""

    text: str
    rewrite: bool = False


@quick_init
@dataclass(frozen=True)
class ReAsked:
    """A re-ask was answered: what the log line, metrics and status page count of it."""

    reason: str
    dialect: str
    result: str  # recovered, unmet, refused
    ms: float


@quick_init
@dataclass(frozen=True)
class Decided:
    """The core decided an upstream answer (a turn may decide several times): for the log
    line (status, outcome, notes, bodies)."""

    decision: Decision


@quick_init
@dataclass(frozen=True)
class Keep:
    """Leave the answer in the front's store (before the client sees its end), as the front's
    `storing` says of `plan` and `result`."""

    plan: TurnPlan[Any]
    result: TurnResult


@quick_init
@dataclass(frozen=True)
class Deliver:
    """Send the answer (the front renders it by the machine's `plan`); the turn is over."""

    answer: Answer


@quick_init
@dataclass(frozen=True)
class Fail:
    """Send the error (in the stream once committed, else with its status); the turn is over."""

    error: ProxyError


@quick_init
@dataclass(frozen=True)
class Abandon:
    """The client left: send nothing more; the turn is over."""


Action = (LearnProfile | AskUpstream | Wait | Commit | Flow | Heartbeat | Cancel | Suspect
          | Refused | Note | ReAsked | Decided | Keep | Deliver | Fail | Abandon)

ENDS = (Deliver, Fail, Abandon)  # the actions after which the turn has nothing to do
