"""The port opens when the proxy can serve, and systemd is told then.

gunicorn's master binds and listens before it forks a worker, and each worker then imports
and builds the app (most of a second): a connection that arrives meanwhile is accepted by
the kernel and waits in the backlog with no one to read it, and systemd hears "ready" from
the master at its own boot. Here the master binds its listeners without listening (a
connection is refused, so nginx, a load balancer or a client's retry goes elsewhere or comes
back), and the first worker that has loaded the app starts the listening, just before it
accepts, and tells systemd (`READY=1` to `$NOTIFY_SOCKET`, the protocol written by hand:
one datagram).

Why not `preload_app`: the app would be imported in the master before the gevent worker
monkey-patches (gunicorn patches in the worker's `init_process`), and `requests`, `ssl` and
the locks made at import would stay unpatched (gevent's warning "Monkey-patching ssl after
ssl has already been imported", gunicorn issues 1566 and 2796). Workers still patch first
and import after, as before; only the moment the port opens moves.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
import time
from typing import Any

from gunicorn import sock as gunicorn_sock
from gunicorn import systemd

_NOTIFY_ENV = "NOTIFY_SOCKET"
_notify_address: str | None = None  # taken from the environment by the master, for the workers


def take_notify_socket() -> None:
    """In the master, before gunicorn's arbiter boots: take systemd's notify socket out of
    the environment, so that the arbiter does not say READY=1 at its own boot (before any
    worker can serve); the workers, forked from here, say it (see `open_listeners`)."""
    global _notify_address
    address = os.environ.pop(_NOTIFY_ENV, None)
    if address:
        _notify_address = address


def notify(state: str, address: str | None = None) -> bool:
    """Send `state` (`READY=1`, `STATUS=…`) to systemd's notify socket, if this process was
    given one: one datagram, an abstract socket when the address starts with `@`. False
    when there is none or it could not be sent (never an error: serving goes on)."""
    target = address or _notify_address
    if not target:
        return False
    if target.startswith("@"):
        target = "\0" + target[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as out:
            out.connect(target)
            out.sendall(state.encode())
    except OSError:
        return False
    return True


def _inherited(server: Any) -> bool:
    """Whether gunicorn takes its listeners from elsewhere (systemd's socket activation, the
    old master of a re-exec) or makes one per worker (`reuse_port`): they are left to it."""
    return bool(systemd.listen_fds(unset_environment=False) or "GUNICORN_PID" in os.environ
                or getattr(server.cfg, "reuse_port", False))


def _unopened(kind: type) -> type:
    """gunicorn's socket class `kind`, binding without listening."""
    return type(f"Unopened{kind.__name__}", (kind,),
                {"_is_listening": staticmethod(lambda sock: True)})


def bind_unopened(server: Any) -> None:
    """In the master (`on_starting`): bind every address gunicorn would, without listening,
    and hand them to the arbiter as its listeners. Refuses to start, as gunicorn does, on an
    address in use (five tries, a second apart) or not this machine's."""
    addresses = server.cfg.address
    if server.LISTENERS or _inherited(server) or any(isinstance(a, int) for a in addresses):
        return  # (an int: a descriptor given on the command line, gunicorn's to take)
    listeners = []
    for address in addresses:
        # (gunicorn's own choice of socket class, private: its stubs lack it)
        kind = _unopened(gunicorn_sock._sock_type(address))  # type: ignore[attr-defined]
        for attempt in range(5):
            try:
                listeners.append(kind(address, server.cfg, server.log))
                break
            except OSError as exc:
                server.log.error("connection to %s failed: %s", address, exc)
                if exc.errno != errno.EADDRINUSE or attempt == 4:
                    sys.exit(1)
                time.sleep(1)
    server.LISTENERS = listeners


def _listening(listener: Any) -> bool:
    with contextlib.suppress(OSError, AttributeError):
        return bool(listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    return True


def open_listeners(worker: Any) -> bool:
    """In a worker that has loaded the app (`post_worker_init`), just before it accepts:
    listen on the sockets the master bound, if no worker has yet; True for the worker that
    opened them. Every worker that can serve tells systemd the proxy is ready (the master no
    longer does, `take_notify_socket`): listeners gunicorn took already listening (socket
    activation, `reuse_port`, a descriptor among the binds, a re-exec) are opened by no
    worker, and systemd would wait for READY=1 until it gave up on the unit. A second
    READY=1 changes nothing."""
    opened = False
    for listener in worker.sockets:
        if not _listening(listener):
            listener.listen(worker.cfg.backlog)
            opened = True
    if opened:
        worker.log.info("toolcall-proxy ready: worker %s opened the port", os.getpid())
    notify(f"READY=1\nSTATUS=serving (worker {os.getpid()} ready)")
    return opened
