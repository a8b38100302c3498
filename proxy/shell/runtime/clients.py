"""Noticing a client that has left while its relayed body is still streaming.

A write to the client tells only when upstream sends its next bytes, which a model in a long
prefill may not do for minutes; meanwhile the upstream keeps generating for nobody. One sweep
per process, every half second, looks at every relayed body in flight with a single poll(2):
a greenlet (or thread) per stream waking on its own timer costs more than the relay itself
once thousands of streams are held.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ...turn.waiting import CHECK_SECONDS
from .background import original_poll, readable_now, run_beside


def client_socket(environ: Mapping[str, Any]) -> Any:
    """The client's socket, where the server exposes it (gunicorn, werkzeug), else None."""
    return environ.get("gunicorn.socket") or environ.get("werkzeug.socket")


def _closed(sock: socket.socket) -> bool:
    """True when a readable socket is readable because the peer closed it (EOF, or an error)."""
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ValueError:  # a TLS socket cannot peek: rely on failed writes instead
        return False
    except BlockingIOError:
        return False
    except OSError:
        return True


def client_gone(environ: dict[str, Any]) -> bool:
    """True when the client has closed its connection (EOF readable on the socket).

    Servers that expose no socket report False.
    """
    sock = client_socket(environ)
    if sock is None:
        return False
    try:
        return readable_now(sock) and _closed(sock)
    except ValueError:  # no descriptor to poll: nothing to tell
        return False
    except OSError:
        return True


def abort_connection(environ: dict[str, Any]) -> None:
    """Close the client's connection now, mid-response.

    For a relayed body cut short: with a Content-Length the server would otherwise keep the
    connection alive and the client wait for bytes that never come (gunicorn), and with
    chunked framing it would end the body cleanly, as if it were complete.
    """
    sock = client_socket(environ)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class Watch:
    """One relayed body under watch: `on_gone` is called (once, from the sweep) when its
    client leaves (`fired`) or the server stops (`drained`)."""

    __slots__ = ("_watcher", "drained", "fired", "on_gone", "sock")

    def __init__(self, watcher: ClientWatcher, sock: Any, on_gone: Callable[[], None]) -> None:
        self._watcher = watcher
        self.sock = sock
        self.on_gone = on_gone
        self.fired = False
        self.drained = False

    def stop(self) -> None:
        """The relay has ended: stop watching."""
        self._watcher.forget(self)


class ClientWatcher:
    """The sweep: every `period` seconds, one poll(2) over the sockets of every watched relay;
    a readable one is peeked, and at EOF its upstream is cut. When the server stops
    (`draining()` true), every watched relay is cut, to end it with a retryable error."""

    def __init__(self, draining: Callable[[], bool] = lambda: False,
                 period: float = CHECK_SECONDS) -> None:
        self._draining = draining
        self._period = period
        self._watched: dict[int, Watch] = {}
        self._lock = threading.Lock()
        self._sweeping_in: int | None = None  # the process whose sweep runs (forks start anew)

    def watch(self, environ: dict[str, Any], on_gone: Callable[[], None]) -> Watch:
        """Start watching the client of `environ`; the caller stops the returned Watch."""
        watch = Watch(self, client_socket(environ), on_gone)
        with self._lock:
            self._watched[id(watch)] = watch
            if self._sweeping_in != os.getpid():
                self._sweeping_in = os.getpid()
                run_beside(self._sweep_loop, "client-watch")
        return watch

    def forget(self, watch: Watch) -> None:
        self._watched.pop(id(watch), None)

    def __len__(self) -> int:
        return len(self._watched)

    def _sweep_loop(self) -> None:
        while True:
            time.sleep(self._period)
            with self._lock:
                if not self._watched:
                    self._sweeping_in = None
                    return
                watched = list(self._watched.values())
            for watch in self.sweep(watched):
                self.forget(watch)
                with contextlib.suppress(Exception):  # one failed cut must not end the sweep
                    watch.on_gone()

    def sweep(self, watched: list[Watch]) -> list[Watch]:
        """The watches among `watched` whose relay must be cut now (flagged why)."""
        if self._draining():
            for watch in watched:
                watch.drained = True
            return watched
        by_fd: dict[int, Watch] = {}
        poller = original_poll()
        for watch in watched:
            if watch.sock is None:
                continue
            try:
                fd = watch.sock.fileno()
            except (OSError, ValueError):
                fd = -1
            if fd < 0:  # closed under us: the client is gone
                watch.fired = True
                continue
            by_fd[fd] = watch
            poller.register(fd, select.POLLIN)
        gone = [watch for watch in watched if watch.fired]
        if by_fd:
            for fd, _events in poller.poll(0):
                polled = by_fd.get(fd)
                if polled is not None and _closed(polled.sock):
                    polled.fired = True
                    gone.append(polled)
        return gone
