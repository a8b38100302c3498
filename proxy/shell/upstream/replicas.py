"""The replicas of each model, as one process sees them: their turns in flight and their
health, the choice of one for a request (`choice` decides, from this data), failover
to another before the first byte, and the probe that brings a replica marked down back.

Health is passive: a replica that cannot be connected to, or answers 502/503/504, is marked
down for `upstream_down_seconds`; the first request to look at it after that starts a probe
(`GET /health`, else `/v1/models`) beside it, which marks it up when it answers. A replica
that did not answer within a call's time is suspect: a probe starts at once, and marks it
down unless it answers (a replica busy generating does; one that accepts connections and
never answers does not). A model with one upstream is never marked down nor probed: it is
used as it always was.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ...base.config import Config, mask_url
from ...base.errors import ProxyError
from ...telemetry.metrics import Metrics
from ...telemetry.request_log import RequestLog
from ..runtime.background import native_lock, run_beside
from .choice import ReplicaLoad, choose, session_key
from .client import Timeouts, Unreached, Upstream

T = TypeVar("T")

RETRY_STATUSES = frozenset({502, 503, 504})  # a gateway's word that the replica is not there
_PROBE_PATHS = ("/health", "/v1/models")


@dataclass
class ReplicaState:
    """One replica, in this process."""

    in_flight: int = 0
    down_until: float | None = None  # monotonic; None: up
    probing: bool = False
    last_error: str | None = None
    last_error_at: float | None = None  # wall clock, for people


def affinity_key(config: Config, headers: dict[str, str], conversation: str | None,
                 ) -> str | None:
    """A request's affinity key: the session header the client sent (the first of the
    `upstream_affinity_headers` it sent), else its conversation's prefix key, else None (always,
    for a model with one upstream: there is nothing to choose)."""
    if not isinstance(config.upstream, tuple):
        return None
    sent = {name.lower(): value.strip() for name, value in headers.items()}
    for name in config.upstream_affinity_headers:
        value = sent.get(name.lower())
        if value:
            return session_key(value)
    return conversation


def result_of(outcome: Any) -> str:
    """An upstream call's outcome as a metric label: `ok`, `http_<status>` for a gateway
    error, else the failure's code."""
    if isinstance(outcome, ProxyError):
        return (outcome.code or "error")[:32]
    status = getattr(outcome, "status", 200)
    return f"http_{status}" if status in RETRY_STATUSES else "ok"


class Replicas:
    """Every replica's state in this process, and the choice of one for a request."""

    def __init__(self, clients: dict[str, Upstream], metrics: Metrics,
                 clock: Callable[[], float] = time.monotonic,
                 on_back: Callable[[str], None] = lambda url: None) -> None:
        self.clients = clients
        self._metrics = metrics
        self._on_back = on_back  # a replica answered again after it was marked down
        self._clock = clock
        self._states = {url: ReplicaState() for url in clients}
        self._labels = {url: mask_url(url) for url in clients}  # the metrics' `replica`
        self._lock = native_lock()  # (no section under it waits or does I/O)
        self._turns = itertools.count()
        for label in self._labels.values():
            metrics.replica_up.labels(label).set(1)

    def choose(self, config: Config, key: str | None, exclude: frozenset[str] = frozenset(),
               *, reserve: bool = False) -> str:
        """The replica of `config`'s upstream that a request with affinity `key` goes to
        (leaving out `exclude` when there is another). `reserve`: its call is counted in
        flight from this choice on, in one step with it (a burst of choices sees each
        other's, so the load bound holds), and `begin` is not called for it."""
        urls = [url for url in config.replicas() if url not in exclude] or config.replicas()
        with self._lock:
            loads = [ReplicaLoad(url, self._is_up(url, config), self._states[url].in_flight)
                     for url in urls]
            chosen = choose(config.upstream_routing, key, loads,
                            load_factor=config.upstream_load_factor, turn=next(self._turns))
            if reserve:
                self._states[chosen].in_flight += 1
        if reserve:
            self._metrics.replica_in_flight_adds(self._labels[chosen])(1)
        return chosen

    def up_first(self, urls: tuple[str, ...]) -> list[str]:
        """`urls`, those marked down last (for a request any of them can answer)."""
        with self._lock:
            return sorted(urls, key=lambda url: self._states[url].down_until is not None)

    def _is_up(self, url: str, config: Config) -> bool:
        """Whether `url` takes requests; one marked down whose time is over gets a probe
        (under the lock)."""
        state = self._states[url]
        if state.down_until is None:
            return True
        if not state.probing and self._clock() >= state.down_until:
            state.probing = True
            run_beside(lambda: self._probe(url, config), "replica-probe")
        return False

    def _probe(self, url: str, config: Config) -> None:
        """Ask a replica marked down (or suspect) whether it is there: up when `/health`
        answers 200 (or, a server without one, `/v1/models`), else down."""
        headers = {"Accept": "application/json"}
        if config.upstream_api_key:
            headers["Authorization"] = f"Bearer {config.upstream_api_key}"
        timeouts = Timeouts(config.connect_timeout_seconds,
                            min(config.read_timeout_seconds, 10.0))
        error = "probe: not answering 200"
        for path in _PROBE_PATHS:
            try:
                reply = self.clients[url].complete_get(path, headers, timeouts,
                                                       config.max_upstream_body_bytes)
            except ProxyError as exc:
                error = f"probe: {exc.code or exc.status}"
                break
            if reply.status == 200:
                self.mark_up(url)
                return
            error = f"probe: {path} answered HTTP {reply.status}"
            if reply.status != 404:  # /health is there and says no; 404: a server without
                break  # one, asked for its models instead
        with self._lock:
            state = self._states[url]
            state.probing = False
            state.down_until = self._clock() + config.upstream_down_seconds
            state.last_error, state.last_error_at = error, time.time()
        self._metrics.replica_up.labels(self._labels[url]).set(0)

    def mark_up(self, url: str) -> None:
        """`url` answered: it takes requests again."""
        with self._lock:
            state = self._states[url]
            was_down = state.down_until is not None
            state.down_until, state.probing = None, False
        if was_down:
            self._metrics.replica_up.labels(self._labels[url]).set(1)
            self._on_back(url)

    def failed(self, url: str, config: Config, error: str, *, mark_down: bool) -> None:
        """A call to `url` failed with `error`; `mark_down`: it failed the way a replica
        that is not there fails, so it takes no requests for `upstream_down_seconds`
        (never the only upstream of a model: it has nothing to step aside for)."""
        down = mark_down and len(config.replicas()) > 1
        with self._lock:
            state = self._states[url]
            state.last_error, state.last_error_at = error, time.time()
            if down and state.down_until is None:
                state.down_until = self._clock() + config.upstream_down_seconds
        if down:
            self._metrics.replica_up.labels(self._labels[url]).set(0)

    def suspect(self, url: str, config: Config, error: str) -> None:
        """A call to `url` got no answer within its time (`error`): a probe now, beside,
        marks it down unless it answers (never the only upstream of a model)."""
        with self._lock:
            state = self._states[url]
            state.last_error, state.last_error_at = error, time.time()
            if len(config.replicas()) < 2 or state.probing or state.down_until is not None:
                return
            state.probing = True
        run_beside(lambda: self._probe(url, config), "replica-probe")

    def failed_over(self, url: str) -> None:
        """A request that failed on `url` goes to another replica."""
        self._metrics.replica_failovers.labels(self._labels[url]).inc()

    def begin(self, url: str) -> None:
        """A call to `url` started."""
        with self._lock:
            self._states[url].in_flight += 1
        self._metrics.replica_in_flight_adds(self._labels[url])(1)

    def end(self, url: str, outcome: Any) -> None:
        """A call to `url` ended with `outcome` (a reply, a response, or a ProxyError)."""
        with self._lock:
            self._states[url].in_flight -= 1
        label = self._labels[url]
        metrics = self._metrics
        metrics.replica_in_flight_adds(label)(-1)
        metrics.replica_requests_adds(label, result_of(outcome))(1)

    def reports(self) -> list[dict[str, Any]]:
        """Every replica as this process sees it, without I/O: its URL (masked), whether it
        takes requests, its calls in flight, its last error and when (unix time)."""
        with self._lock:
            return [{"url": mask_url(url), "up": state.down_until is None,
                     "in_flight": state.in_flight, "last_error": state.last_error,
                     "last_error_at": (None if state.last_error_at is None
                                       else round(state.last_error_at, 3))}
                    for url, state in self._states.items()]


class Placement:
    """One request placed on its model's replicas: the chosen one, and (when that one is not
    there before the first byte) one other, with the same body. What went to the client is never
    sent again: the caller says which outcomes are worth another replica."""

    def __init__(self, replicas: Replicas, config: Config, key: str | None,
                 log: RequestLog) -> None:
        self._replicas = replicas
        self._config = config
        self._key = key
        self._log = log
        self.url = replicas.choose(config, key, reserve=True)
        self._reserved: str | None = self.url  # counted in flight: its first call is not again
        log.upstream = mask_url(self.url)  # the log line's and the status page's upstream
        self._held: str | None = None  # a replica whose answer is still being relayed
        self._failed_over = False  # once per request
        self._holding = native_lock()  # (as Replicas': no section waits)
        self._closed = False  # `done`: a response arriving now is not relayed
        if len(config.replicas()) > 1:
            log.replica = mask_url(self.url)

    def run(self, attempt: Callable[[Upstream], T], worth_another: Callable[[Any], bool],
            cancelled: Callable[[], bool] = lambda: False,
            discard: Callable[[Any], None] = lambda outcome: None, *, hold: bool = False,
            ) -> T:
        """`attempt` on the chosen replica, and once more on another when its outcome is
        worth another (and the client has not left); the last outcome returned or raised.
        `hold`: a good outcome is a response still to be relayed (see `done`). The time it
        takes is the request's wait on upstream (its log's `upstream_clock`)."""
        clock = self._log.upstream_clock
        clock.begin(time.monotonic())
        try:
            return self._run(attempt, worth_another, cancelled, discard, hold)
        finally:
            clock.end(time.monotonic())

    def _run(self, attempt: Callable[[Upstream], T], worth_another: Callable[[Any], bool],
             cancelled: Callable[[], bool], discard: Callable[[Any], None], hold: bool) -> T:
        outcome = self._once(self.url, attempt, hold)
        if (worth_another(outcome) and len(self._config.replicas()) > 1
                and not self._failed_over and not cancelled()):
            self._failed_over = True
            failed = self.url
            discard(outcome)
            self._release(outcome)
            self.url = self._replicas.choose(self._config, self._key, frozenset({failed}),
                                             reserve=True)
            self._reserved = self.url
            self._replicas.failed_over(failed)
            self._log.notes.append(f"failover:{result_of(outcome)}")
            self._log.replica = self._log.upstream = mask_url(self.url)
            outcome = self._once(self.url, attempt, hold)
        if isinstance(outcome, ProxyError):
            raise outcome
        return outcome

    def _once(self, url: str, attempt: Callable[[Upstream], T], hold: bool) -> T | ProxyError:
        """`attempt` on `url`, counted in flight (until `done`, when `hold`), its outcome
        judged; a ProxyError is returned, not raised."""
        replicas = self._replicas
        if self._reserved == url:
            self._reserved = None  # counted when it was chosen
        else:
            replicas.begin(url)
        try:
            outcome: T | ProxyError = attempt(replicas.clients[url])
        except ProxyError as exc:
            outcome = exc
        except BaseException as exc:
            replicas.end(url, ProxyError(502, "", code=type(exc).__name__))
            raise
        self._judge(url, outcome)
        with self._holding:
            if hold and not self._closed and not isinstance(outcome, ProxyError):
                self._held = url
                return outcome
        replicas.end(url, outcome)
        return outcome

    def _judge(self, url: str, outcome: Any) -> None:
        """What an outcome says of the replica's health (a client leaving says nothing)."""
        replicas = self._replicas
        if isinstance(outcome, ProxyError):
            if outcome.code == "upstream_timeout" and not isinstance(outcome, Unreached):
                replicas.suspect(url, self._config, outcome.message)  # silent, or busy?
            elif outcome.code != "client_disconnected":
                # Down only when it cannot be connected to: a connection that broke (a
                # replica killed mid-answer, a kept-alive one it closed) is sent elsewhere,
                # and the next connection says whether the replica is still there.
                replicas.failed(url, self._config, outcome.message,
                                mark_down=isinstance(outcome, Unreached) and outcome.connecting)
        elif getattr(outcome, "status", 200) in RETRY_STATUSES:  # (a stream's end has none)
            replicas.failed(url, self._config, f"HTTP {outcome.status}", mark_down=True)
        else:
            replicas.mark_up(url)

    def _release(self, outcome: Any) -> None:
        """A held response that will not be relayed (another replica is asked)."""
        with self._holding:
            held, self._held = self._held, None
        if held is not None:
            self._replicas.end(held, outcome)

    def done(self, outcome: Any = None) -> None:
        """The relayed answer has ended (or the request gave up on it): its replica's call
        is no longer in flight."""
        with self._holding:
            held, self._held, self._closed = self._held, None, True
        if held is not None:
            self._replicas.end(held, outcome)
