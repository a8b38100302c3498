"""Socket checks the proxy makes without blocking: a client that left, a kept-alive upstream
connection that was closed; for any descriptor number (select(2) stops at 1023)."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from proxy.shell.runtime.background import readable_now
from proxy.shell.runtime.clients import ClientWatcher, client_gone


@contextlib.contextmanager
def _pair(high: bool) -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected socket pair; with `high`, the proxy's end has a descriptor ≥ 1024."""
    a, b = socket.socketpair()
    if not high:
        with a, b:
            yield a, b
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        a.close()
        b.close()
        pytest.skip("the open-files limit is below 1100")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    try:
        fd = os.dup2(a.fileno(), 1050)
        high_end = socket.socket(fileno=fd)
        a.close()
        with high_end, b:
            yield high_end, b
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("high", [False, True])
def test_client_gone_sees_the_peer_close(high):
    with _pair(high) as (proxy_end, client_end):
        environ = {"gunicorn.socket": proxy_end}
        assert not client_gone(environ)
        client_end.sendall(b"x")  # a pipelined byte is not a goodbye
        assert not client_gone(environ)
        assert proxy_end.recv(1) == b"x"
        client_end.close()
        assert client_gone(environ)


@pytest.mark.parametrize("high", [False, True])
def test_readable_now(high):
    with _pair(high) as (mine, peer):
        assert not readable_now(mine)
        peer.sendall(b"y")
        assert readable_now(mine)
        mine.recv(1)
        peer.shutdown(socket.SHUT_WR)
        assert readable_now(mine)  # EOF is readable


def test_client_gone_without_a_socket():
    assert not client_gone({})


@pytest.mark.parametrize("high", [False, True])
def test_the_sweep_cuts_only_relays_whose_client_left(high):
    watcher = ClientWatcher()
    with _pair(high) as (gone_end, gone_client), _pair(False) as (kept_end, _kept_client), \
            _pair(False) as (chatty_end, chatty_client):
        cut: list[str] = []
        gone = watcher.watch({"gunicorn.socket": gone_end}, lambda: cut.append("gone"))
        kept = watcher.watch({"gunicorn.socket": kept_end}, lambda: cut.append("kept"))
        chatty = watcher.watch({"gunicorn.socket": chatty_end}, lambda: cut.append("chatty"))
        blind = watcher.watch({}, lambda: cut.append("blind"))  # a server with no socket
        chatty_client.sendall(b"GET / HTTP/1.1\r\n")  # pipelined bytes are not a goodbye
        gone_client.close()
        assert watcher.sweep([gone, kept, chatty, blind]) == [gone]
        assert gone.fired
        assert [w.fired for w in (kept, chatty, blind)] == [False, False, False]
        for watch in (gone, kept, chatty, blind):
            watch.stop()
        assert len(watcher) == 0


def test_the_sweep_cuts_every_relay_when_the_server_drains():
    draining = False
    watcher = ClientWatcher(lambda: draining)
    with _pair(False) as (a, _), _pair(False) as (b, _):
        watches = [watcher.watch({"gunicorn.socket": s}, lambda: None) for s in (a, b)]
        assert watcher.sweep(watches) == []
        draining = True
        assert watcher.sweep(watches) == watches
        assert all(w.drained and not w.fired for w in watches)


def test_one_sweep_runs_while_relays_are_watched_and_stops_after():
    """The sweep is shared (not a timer per stream), calls on_gone once, and ends when the
    last watch stops; a later watch starts it again."""
    watcher = ClientWatcher(period=0.02)
    before = set(threading.enumerate())

    def sweeps() -> list[threading.Thread]:
        """Sweep threads started since the test began (other tests' threads may end meanwhile)."""
        return [t for t in threading.enumerate()
                if t not in before and t.name == "client-watch" and t.is_alive()]

    for _round in range(2):
        with _pair(False) as (end, client):
            left = threading.Event()
            calls: list[int] = []
            def on_gone(calls: list[int] = calls, left: threading.Event = left) -> None:
                calls.append(1)
                left.set()

            watch = watcher.watch({"gunicorn.socket": end}, on_gone)
            others = [watcher.watch({}, lambda: None) for _ in range(50)]
            assert len(sweeps()) == 1
            client.close()
            assert left.wait(10)  # the sweep runs every 20 ms; a loaded machine may delay it
            time.sleep(0.1)
            assert calls == [1]
            assert watch.fired
            assert len(watcher) == 50
            for other in others:
                other.stop()
        deadline = time.monotonic() + 10
        while sweeps() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sweeps() == []
