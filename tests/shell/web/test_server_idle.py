"""A stopping gevent worker ends the waits of idle keep-alive connections (HeadTimeouts),
and never a wait whose next request is already arriving. gevent without monkey-patching:
greenlets over a socket pair, no server."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import gevent
import gevent.socket

from proxy.shell.server.head_wait import HeadTimeouts


class _Base:
    """gunicorn's async worker, as far as the mixin sees it: handle() reads the next
    request within timeout_ctx(), as base_async's keep-alive loop does."""

    def __init__(self) -> None:
        self.alive = True
        self.cfg = SimpleNamespace(keepalive=75)
        self.worker_connections = 1000  # (AsyncWorker sets it from cfg)
        self.read: list[Any] = []

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        request = None
        with self.timeout_ctx():  # type: ignore[attr-defined]
            request = client.recv(100)
        self.read.append(request)


class _Worker(HeadTimeouts, _Base):
    pass


def _serving(worker: _Worker) -> tuple[Any, Any, gevent.Greenlet]:
    ours, theirs = gevent.socket.socketpair()
    greenlet = gevent.spawn(worker.handle, None, ours, None)
    gevent.sleep(0.05)  # it waits for the next request now
    return ours, theirs, greenlet


def test_an_idle_connection_s_wait_ends_when_the_worker_stops() -> None:
    worker = _Worker()
    _ours, _theirs, greenlet = _serving(worker)
    worker.alive = False
    worker.close_idle()
    greenlet.join(5)
    assert greenlet.dead
    assert worker.read == [None]  # ended without a request, and without an error


def test_a_request_already_arriving_is_read_not_cut() -> None:
    worker = _Worker()
    _ours, theirs, greenlet = _serving(worker)
    theirs.sendall(b"GET / HTTP/1.1\r\n")  # in the socket before the stop's cut runs
    worker.alive = False
    worker.close_idle()
    greenlet.join(5)
    assert worker.read == [b"GET / HTTP/1.1\r\n"]


def test_a_wait_that_began_while_stopping_is_short() -> None:
    worker = _Worker()
    worker.alive = False
    ours, _theirs = gevent.socket.socketpair()
    started = gevent.get_hub().loop.now()
    worker.handle(None, ours, None)  # nothing ever comes
    assert worker.read == [None]
    assert gevent.get_hub().loop.now() - started < 10  # not the keep-alive's 75 s


class _HeadReader(_Base):
    """A parser's reading as far as the mixin sees it: a whole head, in several reads."""

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        head = None
        with self.timeout_ctx():  # type: ignore[attr-defined]
            head = b""
            while b"\r\n\r\n" not in head:
                head += client.recv(100)
        self.read.append(head if head and head.endswith(b"\r\n\r\n") else None)


class _HeadWorker(HeadTimeouts, _HeadReader):
    HEAD_SECONDS = 0.5  # (the keep-alive stays 75 s)


def test_a_head_that_stalls_is_cut_at_the_head_s_time_not_the_keep_alive_s() -> None:
    worker = _HeadWorker()
    ours, theirs = gevent.socket.socketpair()
    theirs.sendall(b"GET /proxy/hea")  # part of a request line, then nothing
    greenlet = gevent.spawn(worker.handle, None, ours, None)
    greenlet.join(10)
    assert greenlet.dead
    assert worker.read == [None]  # ended without a request, and without an error


def test_a_head_that_comes_whole_in_pieces_is_read() -> None:
    worker = _HeadWorker()
    ours, theirs = gevent.socket.socketpair()
    greenlet = gevent.spawn(worker.handle, None, ours, None)
    for piece in (b"GET / HT", b"TP/1.1\r\nHost: localhost\r\n", b"\r\n"):
        theirs.sendall(piece)
        gevent.sleep(0.1)
    greenlet.join(10)
    assert worker.read == [b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"]
