"""What the score asks: a job (a suite turn, in a mode, straight or through a front of the
proxy) and what came of it. Data only, shared by the runner and the report."""

from __future__ import annotations

from dataclasses import dataclass

from .fronts import FrontWay
from .reading import Reading
from .suite import SuiteTurn

STRAIGHT = "straight"  # the way of a plain client's request, sent to the upstream itself
MODES = ("buffered", "streamed")  # the client's `stream` false, true


@dataclass(frozen=True)
class Job:
    """One ask: a turn, in a mode, straight (`way` None) or through a front of the proxy."""

    turn: SuiteTurn
    mode: str
    way: FrontWay | None

    @property
    def path(self) -> str:
        """`straight`, or the front's name."""
        return STRAIGHT if self.way is None else self.way.name

    @property
    def stream(self) -> bool:
        """Whether the client asks for a stream."""
        return self.mode == "streamed"


BUDGET = "budget"  # not asked: the request budget (--max-requests) would not cover it
UNSAID = "unsaid"  # not asked: the front's API cannot say the turn (Ollama's tool_choice)


@dataclass(frozen=True)
class Asked:
    """A job and what its client read; None, and why (`left_out`), when it was not asked."""

    job: Job
    reading: Reading | None
    left_out: str | None = None
