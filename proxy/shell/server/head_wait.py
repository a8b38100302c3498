"""How long the gevent worker waits for a request's head, and for the next request.

gunicorn's async worker reads every request head inside one `timeout_ctx()` of keep-alive
length, the first request's included: a client that sends part of a request line and stops
holds a connection (one of `worker_connections`) for the whole keep-alive time, 75 s, and
enough of them keep everyone else out. Here the two waits are apart, as nginx keeps them
(client_header_timeout, keepalive_timeout):

- a connection idle between requests may wait `keepalive` seconds for its next first byte,
  unless the worker's last connection slot is taken: then the idle ones are closed (as nginx
  reuses idle keep-alive connections when it runs out), else one small request a connection
  would hold every slot for the keep-alive's time;
- a new connection's first byte, and a head from its first byte to its end, get
  `HEAD_SECONDS` (a head already partly read with the previous request starts at once).

gunicorn itself is never to be exposed beyond loopback without nginx in front (its docs say
so): this bounds what a client on loopback, or one nginx lets through, can hold.

When the worker stops, a wait with nothing arriving ends at once (as nginx closes idle
connections), so that the stop does not last the graceful timeout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..runtime.background import readable_now

if TYPE_CHECKING:  # what it is mixed into: the methods it extends are that worker's
    from gunicorn.workers.ggevent import GeventWorker as _Worker
else:
    _Worker = object

HEAD_SECONDS = 10  # seconds


class _HeadTimedOut(BaseException):
    """Thrown into a connection's greenlet when its wait is over (a BaseException, as
    gevent's Timeout is, so that nothing on the way catches it)."""


class HeadWait:
    """One wait for a request head: idle (no byte of it yet) for `idle_seconds`, then, from
    its first byte, `head_seconds` for the rest. Ends quietly: the connection closes."""

    def __init__(self, idle_seconds: float, head_seconds: float, waits: set[HeadWait],
                 sock: Any, started: bool, between: bool = False,
                 connection: list[Any] | None = None) -> None:
        import gevent

        self._loop = gevent.get_hub().loop
        self._greenlet = gevent.getcurrent()
        self._idle_seconds = idle_seconds
        self._head_seconds = head_seconds
        self._waits = waits
        self._sock = sock
        self.idle = not started  # no byte of the head read yet
        self.between = between  # a wait for a next request (keep-alive), not a first
        self._over = _HeadTimedOut()
        self._timer: Any = None
        self._watcher: Any = None
        # The connection's record (`HeadTimeouts.handle`): its readable watcher, made for its
        # first idle wait, serves every later one (a new watcher asks the kernel whether its
        # descriptor is open, a system call a request); None: one of this wait's own.
        self._connection = connection

    def __enter__(self) -> None:
        self._waits.add(self)
        if not self.idle or self._sock is None:
            self._arm(self._head_seconds if not self.idle else self._idle_seconds)
            return
        self._arm(self._idle_seconds)
        self._watcher = self._readable()
        self._watcher.start(self._arriving_now)

    def _readable(self) -> Any:
        """A watcher of the socket becoming readable: the connection's, or this wait's."""
        if self._connection is None:
            return self._loop.io(self._sock.fileno(), 1)
        if self._connection[2] is None:
            self._connection[2] = self._loop.io(self._sock.fileno(), 1)
        return self._connection[2]

    def __exit__(self, *exc: Any) -> bool:
        self._waits.discard(self)
        self._stop()
        return exc[1] is self._over

    def _arm(self, seconds: float) -> None:
        """(Re)start the one timer of this wait."""
        if self._timer is not None:
            self._timer.stop()
            self._timer.close()
        self._timer = self._loop.timer(max(0.0, seconds))
        self._timer.start(self._expire)

    def _arriving_now(self) -> None:
        """The first byte of the head is here (from the hub): the head's time starts."""
        if self._watcher is not None:
            self._watcher.stop()
        if self.idle:
            self.idle = False
            self._arm(self._head_seconds)

    def _expire(self) -> None:
        self._stop()
        self._greenlet.throw(self._over)

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer.close()
        if self._watcher is not None:
            self._watcher.stop()
            if self._connection is None:  # (the connection's is closed with it)
                self._watcher.close()
        self._timer = self._watcher = None

    def end(self) -> None:
        """End the wait as its timeout would, from the hub, if it is still idle then, with
        nothing to read (a request already arriving is served, then its connection closed)."""
        def fire() -> None:
            if self in self._waits and self.idle and not self._arriving():
                self._expire()

        self._loop.run_callback(fire)

    def _arriving(self) -> bool:
        try:
            return self._sock is not None and readable_now(self._sock)
        except (OSError, ValueError):  # closed under us: nothing is arriving
            return False


class HeadTimeouts(_Worker):
    """Mixed into gunicorn's gevent worker: the waits above, in place of its one keep-alive
    timeout, and `close_idle` for a stopping worker (and, of kept-alive connections, a full
    one)."""

    HEAD_SECONDS = HEAD_SECONDS
    # A connection accepted while the worker stops has sent its request within this long.
    STOPPING_WAIT_SECONDS = 2.0

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        import gevent

        connections: dict[Any, list[Any]] = self.__dict__.setdefault("_connections", {})
        # its socket, its parser's buffer, the watcher of its waits (`HeadWait._readable`)
        connection: list[Any] = [client, None, None]
        connections[gevent.getcurrent()] = connection
        if len(connections) >= self.worker_connections:  # the last slot: none left to accept
            self.close_idle(between_only=True)
        try:
            super().handle(listener, client, addr)
        finally:
            connections.pop(gevent.getcurrent(), None)
            if connection[2] is not None:  # (stopped: every wait stops it as it ends)
                connection[2].close()

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        import gevent

        connection = self.__dict__.get("_connections", {}).get(gevent.getcurrent())
        if connection is not None:
            connection[1] = getattr(req, "unreader", None)  # read ahead of the next head
        return super().handle_request(listener_name, req, sock, addr)

    # (gunicorn's stubs type it None; the worker reads each head inside what it returns,
    # gevent's Timeout in its own)
    def timeout_ctx(self) -> HeadWait:  # type: ignore[override]
        import gevent

        waits: set[HeadWait] = self.__dict__.setdefault("_head_waits", set())
        connection = self.__dict__.get("_connections", {}).get(gevent.getcurrent())
        sock, unreader = (None, None) if connection is None else connection[:2]
        first = unreader is None
        started = not first and bool(_buffered(unreader))
        idle = self.HEAD_SECONDS if first else float(self.cfg.keepalive)
        if not self.alive:
            idle = min(idle, self.STOPPING_WAIT_SECONDS)
        return HeadWait(idle, self.HEAD_SECONDS, waits, sock, started, between=not first,
                        connection=connection)

    def close_idle(self, between_only: bool = False) -> None:
        """End every wait for a request with nothing arriving (`between_only`: for a next
        request on a kept-alive connection); their connections close without a word."""
        for wait in list(self.__dict__.get("_head_waits", ())):
            if wait.between or not between_only:
                wait.end()


def _buffered(unreader: Any) -> int:
    """How many bytes a gunicorn parser holds already read (the start of the next head)."""
    buf = getattr(unreader, "buf", None)
    return len(buf.getvalue()) if buf is not None else 0
