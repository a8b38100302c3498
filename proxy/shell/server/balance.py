"""Which worker accepts a new connection: the decision of accept balancing, as functions of
data (no I/O, no clock).

gunicorn's workers share one listening socket and each is woken for every new connection;
the first awake takes it. Of a client's 8 keep-alive connections the busier of 2 workers
held 5.3 on average, so one core served most requests while the other idled, and its
queueing was the tail at c8 (bench/RESULTS.md). Here a worker that holds more open
connections than the least busy worker still accepting lets that one take the connection,
for a moment (`PATIENCE_SECONDS`); if the connection is still waiting after it, it takes
it: a peer that is busy, stuck or gone never holds a connection back for longer (nginx's
`accept_mutex` and Linux's `EPOLLEXCLUSIVE` answer the same herd).

Each worker's row of the shared table (`accept_table`) holds its pid (0: a free row or a
worker that stopped accepting), its open connections, and when it last said it was alive;
a row not refreshed within `STALE_MS` is a worker dead before it was reaped, or stuck, and
counts for nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PATIENCE_SECONDS = 0.002  # how long a busier worker leaves a new connection to the others
STALE_MS = 3_000  # a row older than this is no worker's (each refreshes it every second)


@dataclass(frozen=True)
class Row:
    """One worker's row of the shared table, as read."""

    pid: int  # 0: no worker accepting
    connections: int  # open connections (accepted and not closed yet)
    stamp_ms: int  # when it last said it was alive (monotonic clock, ms)


def others_accepting(rows: Sequence[Row], me: int, now_ms: int,
                     stale_ms: int = STALE_MS) -> list[int]:
    """The open connections of every other worker still accepting: a row of pid 0 is
    free or left, a row older than `stale_ms` is a worker dead or stuck (its count, stale,
    must not hold anyone back), and row `me` is this worker's own."""
    return [row.connections for at, row in enumerate(rows)
            if at != me and row.pid and now_ms - row.stamp_ms <= stale_ms]


def accepts_now(mine: int, others: Sequence[int], overdue: bool = False) -> bool:
    """Whether a worker holding `mine` open connections accepts a new one now, the others
    accepting holding `others`: yes when none is less busy, or when it already let the
    connection wait its patience (`overdue`) and the connection is still there; else it
    defers for `PATIENCE_SECONDS`. Alone (no others), it always accepts at once."""
    return overdue or not others or mine <= min(others)
