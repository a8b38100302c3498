"""Running beside a request, the way this process runs: greenlets under gunicorn's gevent
worker (monkey-patched), threads otherwise (the Werkzeug server, tests). The shell's only
knowledge of gevent is here."""

from __future__ import annotations

import _thread
import select
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, overload

try:  # the OS's poll(2): gevent's patched one starts watchers and switches to the hub;
    # and the OS threads' locks (`native_lock`), found once: gevent's `get_original` is an
    # import and eight Python calls, some 17,000 instructions, and a turn makes two locks
    from gevent.monkey import get_original

    original_poll = get_original("select", "poll")
    _os_lock, _os_rlock = get_original("_thread", "allocate_lock"), get_original("_thread", "RLock")
except ImportError:  # pragma: no cover - gevent is a dependency; a plain process is fine too
    original_poll = select.poll
    _os_lock, _os_rlock = _thread.allocate_lock, _thread.RLock


def readable_now(sock: Any) -> bool:
    """True when `sock` has bytes, an EOF or an error to read right now: one poll(2) that never
    blocks, for any descriptor number (select(2) refuses those past 1023)."""
    poller = original_poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


_patched: list[bool] = []  # once seen patched, a process stays so (it is never undone)


def gevent_patched() -> bool:
    """True in a process gevent has monkey-patched (gunicorn's gevent worker): every
    greenlet runs in one thread, and the patched locks are greenlets' only."""
    if _patched:
        return True
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        _patched.append(True)
        return True
    return False


class Event(Protocol):
    """What threading's Event and gevent's have in common: set, cleared, waited on."""

    def set(self) -> None: ...

    def clear(self) -> None: ...

    def is_set(self) -> bool: ...

    @overload
    def wait(self, timeout: None = None) -> bool: ...

    @overload
    def wait(self, timeout: float) -> bool: ...


def new_event(*, one_waiter: bool = False) -> Event:
    """An Event that waits the way this process runs: gevent's in a patched process (a
    patched threading.Event is a greenlet behind a Thread's locks), else threading's.
    `one_waiter`: only one greenlet ever waits on it, its timed waits often ending at the
    same moment, and it is set from greenlets of this thread only (`_MomentEvent`)."""
    if gevent_patched():
        if one_waiter:
            return _MomentEvent()
        from gevent.event import Event as GeventEvent

        return GeventEvent()
    return threading.Event()


# Timed waits that end this close together end at one moment: a turn's waits for its next
# look end at the moment it chose, each asked a little later than the one before (the
# token's work between), which a worker under load (or valgrind) may make milliseconds.
_MOMENT_SLACK = 0.01


class _MomentEvent:
    """An event of gevent's hub with one waiter, whose timed waits that end at the same
    moment (a turn's next look at its client, waited for between a stream's events, one wait
    a token) share one timer of the hub's loop, instead of a gevent Timeout made, started and
    closed each wait. The waiter is parked in the hub and switched back to by a callback of
    the hub's (a `set`) or by the timer's ring, each for the park it was made for only. What
    a wait returns is the event's state (`_on`), as a timed wait's."""

    def __init__(self) -> None:
        import gevent

        self._get_hub, self._current = gevent.get_hub, gevent.getcurrent
        self._on = False
        self._at = -1.0  # when the timer armed rings (monotonic)
        self._rang = False
        self._cancel: Callable[[], None] | None = None
        self._parked: Any = None  # the greenlet waiting
        self._hub: Any = None  # the hub it waits in
        self._park = 0  # which of its waits that is

    def set(self) -> None:
        self._on = True
        if self._parked is not None:
            self._hub.loop.run_callback(self._wake, self._park)

    def clear(self) -> None:
        self._on = False

    def is_set(self) -> bool:
        return self._on

    def wait(self, timeout: float | None = None) -> bool:
        if self._on:
            return True
        if timeout is not None:
            at = time.monotonic() + timeout
            if abs(at - self._at) > _MOMENT_SLACK:
                self._arm(at, timeout)
            elif self._rang:
                return False  # that moment has come already
        self._hub = hub = self._get_hub()
        self._parked = self._current()
        self._park += 1
        try:
            hub.switch()  # until set, or the timer rings
        finally:
            self._parked = None
        return self._on

    def _wake(self, park: int) -> None:
        parked = self._parked
        if parked is not None and park == self._park:
            self._parked = None
            parked.switch()

    def _arm(self, at: float, timeout: float) -> None:
        if self._cancel is not None:
            self._cancel()
        self._at, self._rang = at, False
        # its ring run in the hub (no greenlet: it only wakes the waiter)
        self._cancel = _hub_timer(timeout, self._ring)

    def _ring(self) -> None:
        self._rang = True
        if self._parked is not None:
            self._wake(self._park)


def watch_silence(response: Any) -> Callable[[], None]:
    """Under gevent, the per-read timeout of the socket under `response` (urllib3's response,
    its http.client one's buffered reader's raw `SocketIO`, read by one greenlet: the caller)
    kept by one timer of the hub's loop instead of a gevent Timeout made and closed for each
    read that waits: a read that waits as long as the socket's timeout still raises
    socket.timeout in the reader, as gevent's would. The returned function puts the socket
    back as it was (call it when the reads are over). Anything else: untouched."""
    raw = getattr(getattr(getattr(response, "_fp", None), "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)
    seconds = getattr(sock, "timeout", None)
    if not gevent_patched() or not seconds or "readinto" in vars(raw):
        return _nothing
    watch = _SilenceWatch(raw, sock, seconds)
    return watch.stop


def _nothing() -> None:
    return None


class _SilenceWatch:
    """`watch_silence`'s reads: each marks when it began (0: none under way); the timer rings
    at the earliest moment the read under way could have lasted the timeout, and then either
    throws socket.timeout into the reader or is armed for the read's own end of time."""

    def __init__(self, raw: Any, sock: Any, seconds: float) -> None:
        import socket

        import gevent

        self._raw, self._sock, self._seconds = raw, sock, seconds
        self._read = raw.readinto
        self._reader = gevent.getcurrent()
        self._since = 0.0
        hub = gevent.get_hub()
        self._loop, self._wait = hub.loop, hub.wait
        # The reader's buffer asks the socket only once what it held is read, and a stream's
        # next bytes come later still: gevent's read tries the socket first, and its refusal
        # (EAGAIN, an OSError raised and caught) costs some 6,000 instructions a read. A plain
        # socket is waited on until readable first, by one watcher of the hub's loop kept
        # for the reads (a new one each wait would have the loop register the descriptor
        # again: two system calls); an SSL one (its own buffer may hold bytes the socket no
        # longer shows) is read as gevent reads it.
        self._readable = self._loop.io(sock.fileno(), 1) if type(sock) is socket.socket else None
        self._timer = self._loop.timer(seconds)
        sock.settimeout(None)  # gevent then waits for the socket with no Timeout
        raw.readinto = self.readinto
        self._timer.start(self._ring)

    def readinto(self, buffer: Any) -> int | None:
        self._since = time.monotonic()
        try:
            if self._readable is not None:
                self._wait(self._readable)
            done: int | None = self._read(buffer)
            return done
        finally:
            self._since = 0.0

    def _ring(self) -> None:
        since, seconds = self._since, self._seconds
        left = seconds if not since else since + seconds - time.monotonic()
        if left > 0:  # the read under way began after the timer was armed, or none is
            rung, self._timer = self._timer, self._loop.timer(left)
            self._timer.start(self._ring)
            rung.close()
            return
        self._reader.throw(TimeoutError("timed out"))  # socket.timeout, as gevent's throws

    def stop(self) -> None:
        self._timer.stop()
        self._timer.close()
        if self._readable is not None:
            self._readable.close()
        del self._raw.readinto
        if self._sock.timeout is None:
            self._sock.settimeout(self._seconds)


def run_beside(work: Callable[[], None], name: str) -> None:
    """Run `work` beside the request: a plain greenlet under gevent, else a daemon thread."""
    if gevent_patched():
        import gevent

        gevent.spawn(work)
    else:
        threading.Thread(target=work, daemon=True, name=name).start()


def _hub_timer(seconds: float, ring: Callable[[], object]) -> Callable[[], None]:
    """`ring` run in gevent's hub in `seconds` (it must not block: a greenlet's work is
    spawned from it) unless the returned function is called first (it cancels)."""
    import gevent

    timer = gevent.get_hub().loop.timer(max(0.0, seconds))
    timer.start(ring)

    def cancel() -> None:
        timer.stop()
        timer.close()
    return cancel


def call_later(seconds: float, work: Callable[[], None]) -> Callable[[], None]:
    """Run `work` in `seconds` unless the returned function is called first (it cancels)."""
    if gevent_patched():  # a timer of the hub's loop: no greenlet until it fires
        import gevent

        return _hub_timer(seconds, lambda: gevent.spawn(work))
    thread_timer = threading.Timer(seconds, work)
    thread_timer.daemon = True
    thread_timer.start()
    return thread_timer.cancel


T = TypeVar("T")
P = ParamSpec("P")


def off_the_hub(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work(*args)`, where blocking I/O it does (SQLite's, which gevent cannot patch) keeps
    the worker's other greenlets running: in gevent's native thread pool under gevent
    (its exception raised here), plainly otherwise."""
    if gevent_patched():
        import gevent

        done: T = gevent.get_hub().threadpool.apply(work, args, kwargs)
        return done
    return work(*args, **kwargs)


def native_lock() -> Any:
    """The OS threads' own lock, even in a process gevent has patched (whose threading.Lock
    is a greenlet's, some 2,500 instructions more to take and give back, in Python): for code
    that runs in native threads (`off_the_hub`), and for a section no greenlet switch can
    come inside of (no I/O, no wait: dicts, counters, dataclasses; a greenlet spawned, never
    joined). Between greenlets it is never contended (none runs while another is inside);
    it keeps native threads apart. Held across a switch, it would stall the worker: a
    section that may wait takes a `threading.Lock`."""
    return _os_lock()


def native_rlock() -> Any:
    """A reentrant lock of the OS's threads, even in a process gevent has patched (whose
    `threading.RLock` is threading's Python one over a greenlet's lock: some seven Python
    calls to take and give back), for a section no greenlet switch can come inside of (a
    write to a file or a pipe: gevent does not patch them): between greenlets it is never
    contended, and it still keeps native threads (`off_the_hub`) apart."""
    return _os_rlock()
