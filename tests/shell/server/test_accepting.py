"""The accept path without gunicorn: the master's table gives each worker a row (a worker
replacing one that exited takes its row over), and gevent's server on a loopback listener
(gevent without monkey-patching) accepts at once when alone or beside a dead peer, leaves a
connection to a less busy peer for its patience only, and counts what it holds."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import gevent
import gevent.socket
import pytest
from gevent.pool import Pool
from gevent.server import StreamServer

from proxy.shell.server import accepting
from proxy.shell.server.accepting import (
    AcceptTable,
    BalancedAccepts,
    BalancedServer,
    Seat,
    leave_seat,
    now_ms,
    take_seat,
)
from proxy.shell.server.balance import STALE_MS

PEER = 424242  # a pid in a row of the table: no process reads it


@pytest.fixture
def fresh_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accepting, "_table", [])


def _master(workers: int) -> SimpleNamespace:
    return SimpleNamespace(num_workers=workers, WORKERS={})


def _forked(master: SimpleNamespace, pid: int) -> SimpleNamespace:
    worker = SimpleNamespace()
    take_seat(master, worker)
    master.WORKERS[pid] = worker
    return worker


def test_each_worker_gets_a_row_of_its_own(fresh_table: None) -> None:
    master = _master(2)
    rows = [_forked(master, pid).accept_seat.row for pid in (1, 2, 3)]
    assert rows == [0, 1, 2]


def test_a_worker_replacing_one_that_exited_takes_its_row_over(fresh_table: None) -> None:
    master = _master(2)
    first, second = _forked(master, 1), _forked(master, 2)
    first.accept_seat.sit()
    del master.WORKERS[1]  # reaped: gunicorn's child_exit
    leave_seat(first)
    assert first.accept_seat.table.read()[0].pid == 0
    assert _forked(master, 3).accept_seat.row == 0
    assert second.accept_seat.row == 1


def test_a_worker_beyond_the_table_s_rows_gets_none(fresh_table: None) -> None:
    master = _master(1)
    workers = [_forked(master, pid) for pid in range(1, 10)]
    assert [w.accept_seat is None for w in workers] == [False] * 8 + [True]


def test_the_table_is_shared_with_a_forked_process() -> None:
    table = AcceptTable(2)
    child = os.fork()
    if child == 0:
        table.write(1, 99, 7)
        os._exit(0)
    os.waitpid(child, 0)
    assert (table.read()[1].pid, table.read()[1].connections) == (99, 7)


# -- the server on a listener -------------------------------------------------------------------


def _serving(seat: Seat) -> tuple[BalancedServer, list[Any]]:
    listener = gevent.socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    handled: list[Any] = []
    seat.sit()
    server = BalancedServer(listener, lambda client, address: handled.append(client),
                            Pool(10), seat)
    server.max_accept = 1  # as the worker sets it beside others
    server.start()
    return server, handled


def _connect(server: BalancedServer, handled: list[Any], seconds: float = 5) -> None:
    client = gevent.socket.create_connection(server.address)
    with gevent.Timeout(seconds):
        while not handled:
            gevent.sleep(0.001)
    client.close()


def test_a_worker_alone_accepts_at_once() -> None:
    server, handled = _serving(Seat(AcceptTable(2), 0))
    try:
        _connect(server, handled)
        assert server.deferrals == 0
    finally:
        server.close()


def _deferrals_beside_a_peer(stamp_ms: int) -> int:
    """The deferrals of a worker holding one connection, beside a peer holding none whose
    row was last refreshed at `stamp_ms`, and which never accepts: a connection arrives and
    must be taken within a second."""
    table = AcceptTable(2)
    seat = Seat(table, 0)
    server, handled = _serving(seat)
    seat.opened()
    table.write(1, PEER, 0, stamp_ms=stamp_ms)
    try:
        _connect(server, handled, seconds=1)
        return server.deferrals
    finally:
        server.close()


def test_a_busier_worker_defers_then_takes_a_connection_no_peer_took() -> None:
    """The peer's row says it is alive and less busy, but it never accepts (stuck): the
    connection is taken after the patience, not left waiting."""
    assert _deferrals_beside_a_peer(now_ms()) == 1


def test_a_dead_peer_s_stale_count_never_holds_an_accept_back() -> None:
    assert _deferrals_beside_a_peer(now_ms() - STALE_MS - 1000) == 0


def test_a_connection_counts_from_its_accept_to_its_close() -> None:
    table = AcceptTable(2)
    seat = Seat(table, 0)
    server, handled = _serving(seat)
    try:
        _connect(server, handled)
        with gevent.Timeout(5):
            while seat.connections:  # the handler returned: the server closes it
                gevent.sleep(0.001)
        assert table.read()[0].connections == 0
        assert table.read()[0].pid == os.getpid()
    finally:
        server.close()


# -- the worker -----------------------------------------------------------------------------------


class _Base:
    """gunicorn's gevent worker, as far as the mixin sees it."""

    def __init__(self, workers: int) -> None:
        self.alive = True
        self.cfg = SimpleNamespace(workers=workers)
        self.notified = 0

    def notify(self) -> None:
        self.notified += 1

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.alive = False

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        """Nothing to serve here."""


class _Worker(BalancedAccepts, _Base):
    pass


def _listener() -> Any:
    listener = gevent.socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    return listener


def test_the_worker_s_listeners_are_served_in_balance_one_accept_a_wake_up() -> None:
    worker = _Worker(workers=2)
    worker.accept_seat = Seat(AcceptTable(2), 1)
    server = worker.server_class(_listener(), application=None, spawn=Pool(4), log=None,
                                 handler_class=None, environ={})
    assert isinstance(server, BalancedServer)
    assert server.max_accept == 1  # as gunicorn's own, with several workers
    assert worker.accept_seat.table.read()[1].pid == os.getpid()
    server.close()


def test_a_single_worker_accepts_as_many_a_wake_up_as_gevent_does() -> None:
    worker = _Worker(workers=1)
    worker.accept_seat = Seat(AcceptTable(2), 0)
    server = worker.server_class(_listener(), application=None, spawn=Pool(4), log=None,
                                 handler_class=None, environ={})
    assert server.max_accept == StreamServer.max_accept
    server.close()


def test_a_worker_without_a_row_serves_as_gevent_does() -> None:
    worker = _Worker(workers=1)
    server = worker.server_class(_listener(), application=None, spawn=Pool(4), log=None,
                                 handler_class=None, environ={})
    assert type(server) is StreamServer
    server.close()


def test_a_worker_told_to_stop_leaves_its_row_at_once() -> None:
    worker = _Worker(workers=2)
    table = AcceptTable(2)
    worker.accept_seat = Seat(table, 0)
    worker.accept_seat.sit()
    worker.notify()
    assert table.read()[0].pid == os.getpid()
    worker.handle_exit(15, None)
    assert table.read()[0].pid == 0
    worker.notify()  # the heartbeat of a stopping worker does not bring it back
    assert table.read()[0].pid == 0
    assert worker.notified == 2
