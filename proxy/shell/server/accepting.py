"""The gevent worker's accept path, in balance between the workers (the decision: `balance`).

The master makes one small table in shared memory before its first fork (`take_seat`, as
gunicorn's `pre_fork`), and gives each new worker a row of it: the lowest no live worker
holds, so a worker that replaces one that exited takes its row over. In the worker, each
listener is served by `BalancedServer`, gevent's StreamServer counting the connections it
accepted and closed in the worker's row and, before each accept, reading the others' rows:
a worker busier than the least busy one stops accepting for `PATIENCE_SECONDS`, and takes
the connection after that only if it is still waiting. A worker's row is refreshed with
gunicorn's heartbeat (`notify`, every second); a worker told to stop leaves its row at once,
and the master clears the row of a worker it reaped (`leave_seat`, from `child_exit`), so
neither a dead worker's count nor a stopping one's holds the others back.

A single worker has no others and accepts as gevent does. Workers beyond the table's rows
(more than twice the configured count, added with TTIN) accept as gevent does, unseen.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from gevent.server import StreamServer

from ..runtime.background import readable_now
from .balance import PATIENCE_SECONDS, Row, accepts_now, others_accepting

if TYPE_CHECKING:  # what it is mixed into: the methods it extends are that worker's
    from types import FrameType

    from gunicorn.workers.ggevent import GeventWorker as _Worker
else:
    _Worker = object

_FIELDS = 3  # a row: pid, open connections, stamp (ms)
_WIDTH = 8  # bytes a field (a signed 64-bit integer)


def now_ms() -> int:
    """The clock of the table's stamps."""
    return int(time.monotonic() * 1000)  # (CLOCK_MONOTONIC: one clock for every process)


class AcceptTable:
    """Each worker's row, in memory shared by the master and every worker it forks."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self._memory = mmap.mmap(-1, rows * _FIELDS * _WIDTH)  # anonymous, shared on fork
        self._fields = memoryview(self._memory).cast("q")

    def read(self) -> list[Row]:
        """Every row as it stands."""
        fields = self._fields.tolist()
        return [Row(*fields[at:at + _FIELDS]) for at in range(0, len(fields), _FIELDS)]

    def write(self, row: int, pid: int, connections: int, stamp_ms: int | None = None) -> None:
        """Row `row`: `pid` (0: none accepting) holding `connections`, alive at `stamp_ms`
        (now unless given)."""
        at = row * _FIELDS
        self._fields[at + 1] = connections
        self._fields[at + 2] = now_ms() if stamp_ms is None else stamp_ms
        self._fields[at] = pid


class Seat:
    """A worker's row of the table, and the count it keeps there."""

    def __init__(self, table: AcceptTable, row: int) -> None:
        self.table = table
        self.row = row
        self.connections = 0
        self._pid = 0

    def sit(self) -> None:
        """This process accepts now, as the row's worker (once: a worker may listen on
        two ports)."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self.connections = 0
            self.refresh()

    def refresh(self) -> None:
        """Say the worker is alive and how many connections it holds."""
        if self._pid:
            self.table.write(self.row, self._pid, self.connections)

    def leave(self) -> None:
        """No one accepts from this row any more (a worker stopping, or reaped)."""
        self._pid = 0
        self.table.write(self.row, 0, 0)

    def opened(self) -> None:
        self.connections += 1
        self.refresh()

    def closed(self) -> None:
        self.connections = max(0, self.connections - 1)
        self.refresh()

    def accepts_now(self, overdue: bool) -> bool:
        """`balance.accepts_now` for this worker, the table read now."""
        others = others_accepting(self.table.read(), self.row, now_ms())
        return accepts_now(self.connections, others, overdue)


# -- in the master: a row for each worker ------------------------------------------------------

_table: list[AcceptTable] = []  # the master's one table, made at its first fork


def take_seat(server: Any, worker: Any) -> None:
    """gunicorn's `pre_fork`, in the master: give `worker` the lowest row no other live
    worker holds (none when all are held), cleared."""
    if not _table:
        _table.append(AcceptTable(max(8, 2 * int(server.num_workers))))
    table = _table[0]
    held = {seat.row for seat in _seats(server.WORKERS.values())}
    free = [row for row in range(table.rows) if row not in held]
    worker.accept_seat = Seat(table, free[0]) if free else None
    if worker.accept_seat is not None:
        worker.accept_seat.leave()


def leave_seat(worker: Any) -> None:
    """In the master, for a worker reaped (`child_exit`): its row holds no one."""
    seat = getattr(worker, "accept_seat", None)
    if seat is not None:
        seat.leave()


def _seats(workers: Iterable[Any]) -> list[Seat]:
    return [seat for worker in workers
            if (seat := getattr(worker, "accept_seat", None)) is not None]


# -- in the worker: the server on each listener ------------------------------------------------


class BalancedServer(StreamServer):
    """gevent's StreamServer for a gunicorn worker, accepting when `balance` says so (beside
    other workers, one connection a wake-up, as gunicorn sets it: each decided on the counts
    as they are then)."""

    def __init__(self, listener: Any, handle: Callable[..., object], spawn: Any,
                 seat: Seat, **ssl_args: Any) -> None:
        super().__init__(listener, handle=handle, spawn=spawn, **ssl_args)
        self._seat = seat
        self._overdue = False  # a connection waited its patience and is still there
        self._patience: Any = None
        self.deferrals = 0  # how many times it left a connection to the others

    def do_read(self) -> Any:
        if not self._seat.accepts_now(self._overdue):
            self.deferrals += 1
            self.stop_accepting()
            self._patience = self.loop.timer(PATIENCE_SECONDS)
            self._patience.start(self._patience_over)
            return None
        self._overdue = False
        accepted = super().do_read()
        if accepted:
            self._seat.opened()
        return accepted

    def _patience_over(self) -> None:
        if not self.started:
            return
        self._overdue = readable_now(self.socket)  # not taken by another: this one's now
        self.start_accepting()

    def do_close(self, *args: Any) -> None:
        self._seat.closed()
        super().do_close(*args)

    def stop_accepting(self) -> None:
        super().stop_accepting()
        if self._patience is not None:
            self._patience.stop()
            self._patience.close()
            self._patience = None


class BalancedAccepts(_Worker):
    """Mixed into gunicorn's gevent worker: its listeners served by `BalancedServer`, its
    row of the table refreshed with each heartbeat and left when it is told to stop."""

    accept_seat: Seat | None = None  # given by the master (`take_seat`)

    @property
    # (a class attribute in gunicorn, read through the worker: here a property)
    def server_class(self) -> Callable[..., StreamServer]:  # type: ignore[override]
        """gunicorn's seam for the server its gevent worker runs on each listener (pywsgi's
        for its gevent_pywsgi worker): here one made by this worker."""
        return self._balanced_server

    def _balanced_server(self, listener: Any, *, spawn: Any, **options: Any) -> StreamServer:
        """The server for `listener`, made as gunicorn's gevent worker makes its own
        (the pywsgi options it passes for a server class are not this one's)."""
        ssl_args = {key: value for key, value in options.items() if key == "ssl_context"}
        handle = partial(self.handle, listener)
        if self.accept_seat is None:
            server = StreamServer(listener, handle=handle, spawn=spawn, **ssl_args)
        else:
            self.accept_seat.sit()
            server = BalancedServer(listener, handle, spawn, self.accept_seat, **ssl_args)
        if self.cfg.workers > 1:
            server.max_accept = 1
        return server

    def notify(self) -> None:
        super().notify()
        if self.accept_seat is not None:
            if self.alive:
                self.accept_seat.refresh()
            else:
                self.accept_seat.leave()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self.accept_seat is not None:
            self.accept_seat.leave()
