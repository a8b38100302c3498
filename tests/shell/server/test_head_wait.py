"""A connection's waits for its requests' heads share one readable watcher (made for its
first wait, stopped as each wait ends): a new watcher asks the kernel whether its
descriptor is open (fcntl), a system call a request. Each wait still starts the head's
own time at its first byte. gevent without monkey-patching: greenlets over a socket pair."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import gevent
import gevent.socket

from proxy.shell.server.head_wait import HeadTimeouts


class _Base:
    """gunicorn's async worker as far as the mixin sees it: heads read one after another on
    one connection, each within timeout_ctx(), the parser's buffer handed on between them
    (handle_request) so that each wait after the first is a keep-alive one."""

    def __init__(self) -> None:
        self.alive = True
        self.cfg = SimpleNamespace(keepalive=75)
        self.worker_connections = 1000
        self.read: list[Any] = []
        self.watchers: list[Any] = []

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        for _ in range(3):
            head = None
            wait = self.timeout_ctx()  # type: ignore[attr-defined]
            with wait:
                self.watchers.append(wait._watcher)
                head = b""
                while b"\r\n\r\n" not in head:
                    piece = client.recv(100)
                    if not piece:
                        break
                    head += piece
            if head is None or not head.endswith(b"\r\n\r\n"):
                self.read.append(None)
                return
            self.read.append(head)
            self.watchers.append(wait._watcher)  # (None: the wait let go of it)
            self.handle_request(None, SimpleNamespace(unreader=SimpleNamespace(buf=None)),
                                client, addr)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        pass


class _Worker(HeadTimeouts, _Base):
    HEAD_SECONDS = 0.5


HEAD = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"


def test_one_watcher_serves_every_wait_of_a_connection() -> None:
    worker = _Worker()
    ours, theirs = gevent.socket.socketpair()
    greenlet = gevent.spawn(worker.handle, None, ours, None)
    for _ in range(3):
        gevent.sleep(0.05)  # idle: the wait watches for the first byte
        for piece in (HEAD[:7], HEAD[7:20], HEAD[20:]):
            theirs.sendall(piece)
            gevent.sleep(0.02)
    greenlet.join(5)
    assert worker.read == [HEAD, HEAD, HEAD]
    during = worker.watchers[0::2]
    assert during[0] is not None
    assert all(watcher is during[0] for watcher in during)  # the same one, each wait
    assert worker.watchers[1::2] == [None, None, None]
    assert not during[0].active
    assert worker.__dict__["_connections"] == {}


def test_a_later_head_that_stalls_is_still_cut_at_the_head_s_time() -> None:
    worker = _Worker()
    ours, theirs = gevent.socket.socketpair()
    greenlet = gevent.spawn(worker.handle, None, ours, None)
    gevent.sleep(0.05)
    theirs.sendall(HEAD)
    gevent.sleep(0.3)  # the second wait idles (the keep-alive's 75 s), then a head stalls
    theirs.sendall(b"GET /proxy/hea")
    started = gevent.get_hub().loop.now()
    greenlet.join(10)
    assert greenlet.dead
    assert worker.read == [HEAD, None]
    assert gevent.get_hub().loop.now() - started < 5  # the head's 0.5 s, not 75
    assert not worker.watchers[0].active
