"""Running beside a request, the way this process runs: greenlets under gunicorn's gevent
worker (monkey-patched), threads otherwise (the Werkzeug server, tests). The shell's only
knowledge of gevent is here."""

from __future__ import annotations

import select
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, overload

try:  # the OS's poll(2): gevent's patched one starts watchers and switches to the hub
    from gevent.monkey import get_original

    original_poll = get_original("select", "poll")
except ImportError:  # pragma: no cover - gevent is a dependency; a plain process is fine too
    original_poll = select.poll


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
    same moment (`_MomentEvent`)."""
    if gevent_patched():
        from gevent.event import Event as GeventEvent

        if one_waiter:
            moment: Event = _moment_event(GeventEvent)()
            return moment
        return GeventEvent()
    return threading.Event()


# Timed waits that end this close together end at one moment: a turn's waits for its next
# look end at the moment it chose, each asked a little later than the one before (the
# token's work between), which a worker under load (or valgrind) may make milliseconds.
_MOMENT_SLACK = 0.01
_MOMENT_CLASSES: list[type] = []


def _moment_event(base: type) -> type:
    """`_MomentEvent` on gevent's Event, made once."""
    if not _MOMENT_CLASSES:
        _MOMENT_CLASSES.append(type("_MomentEvent", (_MomentEvent, base), {"_base": base}))
    return _MOMENT_CLASSES[0]


class _MomentEvent:
    """A gevent Event whose one waiter's timed waits that end at the same moment (a turn's
    next look at its client, waited for between a stream's events, one wait a token) share
    one timer of the hub's loop, which wakes the waiter by setting the event, instead of a
    gevent Timeout made, started and closed each wait. What a wait returns is the event's
    own state (`_on`: set by `set`, not by the timer), as a timed wait's."""

    _base: Any  # gevent's Event, the other base: its methods called through it
    _on = False
    _at = -1.0  # when the timer armed rings (monotonic)
    _rang = False
    _cancel: Callable[[], None] | None = None

    def set(self) -> None:
        self._on = True
        self._base.set(self)

    def clear(self) -> None:
        self._on = False
        self._base.clear(self)

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None or self._on:
            return bool(self._base.wait(self, timeout))
        at = time.monotonic() + timeout
        if abs(at - self._at) > _MOMENT_SLACK:
            self._arm(at, timeout)
        elif self._rang:
            return False  # that moment has come already
        self._base.wait(self)  # until set, or the timer rings
        if not self._on:
            self._base.clear(self)  # the timer's ring
        return self._on

    def _arm(self, at: float, timeout: float) -> None:
        if self._cancel is not None:
            self._cancel()
        if not self._on:
            self._base.clear(self)  # an earlier timer's ring, unheard
        self._at, self._rang = at, False
        # its ring run in the hub (no greenlet: it only sets)
        self._cancel = _hub_timer(timeout, self._ring)

    def _ring(self) -> None:
        self._rang = True
        self._base.set(self)


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
    """A lock for code that runs in native threads (`off_the_hub`), even in a process gevent
    has patched (whose threading.Lock is a greenlet's)."""
    if gevent_patched():
        from gevent.monkey import get_original

        return get_original("_thread", "allocate_lock")()
    return threading.Lock()
