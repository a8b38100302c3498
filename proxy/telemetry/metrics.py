"""Prometheus metrics, fed from each request's log record (one place decides what is counted).

Under gunicorn, `deploy/gunicorn.conf.py` sets PROMETHEUS_MULTIPROC_DIR before the workers
start, so every worker writes its figures there and `/proxy/metrics` reports the whole
server's; a single process (`python app.py`) keeps them in memory.
"""

from __future__ import annotations

import os
import struct
import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)

from ..turn.rescue.upstream_error import NOTE as RESCUED
from .request_log import RequestLog

# Label values are closed sets: anything upstream (or a model) wrote is mapped into them, so
# that no series is created per distinct string a server sends.
FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})
# Failures on the upstream's side, and clients leaving, as the proxy itself names them.
UPSTREAM_ERROR_KINDS = frozenset({
    "upstream_timeout", "upstream_unreachable", "upstream_stream_cut", "upstream_bad_shape",
    "upstream_invalid_json", "upstream_error", "relay_interrupted",
    "upstream_cut", "upstream_too_large", "tool_call_required_unmet", "proxy_restarting",
    "client_disconnected",
})
# The proxy's own failure: logged with its traceback, counted in requests_total{status}.
_NOT_UPSTREAM = frozenset({"internal_error"})

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                    600, 1800)


def finish_label(reason: str | None) -> str:
    """A finish_reason as a label value: OpenAI's own, `none`, or `other`."""
    if reason is None:
        return "none"
    return reason if reason in FINISH_REASONS else "other"


def upstream_error_kind(log: RequestLog) -> str | None:
    """The `upstream_errors_total{kind}` a request counts in, or None when it ended without
    an upstream-side failure. An upstream answer >= 500 is `upstream_http_<status>` (relayed
    or not); a refusal of the client's request, by the proxy or by upstream (4xx), is the
    client's fault and shows in `requests_total{status}` instead."""
    kind = log.error.split(":", 1)[0] if log.error else None
    if kind is None and rescued_from(log) is not None:
        return None  # the upstream's error held the model's answer, and the turn went on
    if kind in UPSTREAM_ERROR_KINDS:
        return kind
    status = log.upstream_status
    if status is not None and status >= 500:
        return f"upstream_http_{status}" if status < 600 else "other"
    if kind is None or kind in _NOT_UPSTREAM:
        return None
    if (status is not None and status >= 400) or (log.status is not None
                                                   and 400 <= log.status < 500):
        return None
    return "other"


def rescued_from(log: RequestLog) -> str | None:
    """The server whose error the turn's answer was rescued from (`turn.rescue`), or None."""
    for note in log.notes:
        if note.startswith(RESCUED + ":"):
            return note.split(":", 1)[1]
    return None


_TWO_DOUBLES = struct.Struct("dd").pack  # a value and its timestamp, as the map holds them
_FORKS = [0]  # this process's forks so far, seen by the child (a forked child's values reset)
os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))


def _one_thread_values(mapped: Any) -> Any:
    """prometheus_client's file-backed value class (`mapped`), its writes without its
    lock: in a process gevent has patched that lock is a greenlet's, and a write (the value
    added, its 16 bytes put in the map) never gives the hub a turn, so no other greenlet
    can come between. Taking and releasing it, asking the process id and looking the
    value's place up on every write cost more than the write. A value written after a fork
    goes the class's own way, which finds the fork and starts the child's files; a gauge
    set to what it holds writes nothing (the map holds those bytes already)."""
    forks = _FORKS[0]

    class OneThreadValue(mapped):  # type: ignore[misc]  # prometheus_client's class: untyped
        one_thread = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._at = self._file._positions[self._key]  # (placed when read; never moves)

        def inc(self, amount: float) -> None:
            if _FORKS[0] != forks:
                mapped.inc(self, amount)
                return
            # (the base class sets _value in a method mypy cannot see: untyped)
            value = self._value = self._value + amount  # type: ignore[has-type]
            self._timestamp = 0.0
            at = self._at
            self._file._m[at:at + 16] = _TWO_DOUBLES(value, 0.0)

        def set(self, value: float, timestamp: float | None = None) -> None:
            if _FORKS[0] != forks:
                mapped.set(self, value, timestamp)
                return
            timestamp = timestamp or 0.0
            if value == self._value and timestamp == self._timestamp:
                return
            self._value, self._timestamp = value, timestamp
            at = self._at
            self._file._m[at:at + 16] = _TWO_DOUBLES(value, timestamp)

    return OneThreadValue


def _remember_children(metric: Any) -> None:
    """`metric.labels(...)` hands back the child it made for those values the first time:
    prometheus_client's own checks the names, converts each value and takes a lock on every
    call, several times per request. Label values are closed sets (see above), so the
    children kept are few."""
    made: dict[tuple[Any, ...], Any] = {}
    make = metric.labels

    def labels(*values: Any, **named: Any) -> Any:
        if named:
            return make(*values, **named)
        child = made.get(values)
        if child is None:
            child = made[values] = make(*values)
        return child

    metric.labels = labels


Add = Callable[[float], None]


def _adds(metric: Any) -> Callable[..., Add]:
    """The labels' values → what adds to that child's value: its value's own `inc`, kept.
    A child with every label given is always observable, and the proxy adds no negative
    amount to a counter (nor sets a `mostrecent` gauge with it), so the checks of
    `Counter.inc` and `Gauge.inc`, Python calls on each, would always pass."""
    made: dict[tuple[Any, ...], Add] = {}
    labels = metric.labels

    def adds(*values: Any) -> Add:
        add = made.get(values)
        if add is None:
            add = made[values] = labels(*values)._value.inc
        return add
    return adds


def _observes(histogram: Any) -> Callable[..., Add]:
    """The labels' values → what observes an amount in that child (`Histogram.observe`
    without its checks: its sum, then the first bucket whose bound holds the amount)."""
    made: dict[tuple[Any, ...], Add] = {}

    def observes(*values: Any) -> Add:
        observe = made.get(values)
        if observe is None:
            observe = made[values] = _observer(histogram.labels(*values))
        return observe
    return observes


def _observer(child: Any) -> Add:
    bounds = tuple(child._upper_bounds)
    add_sum = child._sum.inc
    add_bucket = tuple(bucket.inc for bucket in child._buckets)
    last = len(bounds)

    def observe(amount: float) -> None:
        add_sum(amount)
        i = bisect_left(bounds, amount)
        if i < last and amount <= bounds[i]:  # (never a NaN's bucket, as observe's loop)
            add_bucket[i](1)
    return observe


class Metrics:
    """The proxy's counters, gauges and histograms, in a registry of the app's own."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, shared: bool = True, one_thread: bool = False) -> None:
        """Under gunicorn the figures go to the run directory's files, unless `shared` is
        False (this worker's could not be allocated: a full disk): then to memory, and this
        worker's /proxy/metrics shows its own figures only. `one_thread`: every figure is
        written from one thread's greenlets (gevent's worker), never from another thread."""
        self.registry = CollectorRegistry(auto_describe=True)
        in_run_dir = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.multiprocess = in_run_dir and shared
        if in_run_dir and not shared:
            # prometheus_client picks its value class once, from the environment, when it is
            # imported; this worker's metrics, made next, must not map a file.
            values.ValueClass = values.MutexValue
        elif (self.multiprocess and one_thread and values.ValueClass._multiprocess
              and not getattr(values.ValueClass, "one_thread", False)):
            values.ValueClass = _one_thread_values(values.ValueClass)
        registry = self.registry
        prefix = "toolcall_proxy_"
        self.requests = Counter(prefix + "requests",
                                "Requests by mode, HTTP status and the front (API) that "
                                "answered them (none: relayed)",
                                ["mode", "status", "front"], registry=registry)
        self.tool_calls = Counter(prefix + "tool_calls", "Tool calls emitted, by format",
                                  ["format"], registry=registry)
        self.repairs = Counter(prefix + "repairs", "Repairs applied, by format and kind",
                               ["format", "repair"], registry=registry)
        self.schema_invalid = Counter(prefix + "calls_schema_invalid",
                                      "Calls delivered whose arguments do not fit their "
                                      "tool's schema, by format", ["format"],
                                      registry=registry)
        self.refused = Counter(prefix + "calls_refused",
                               "Frames left as text, by format and reason",
                               ["format", "reason"], registry=registry)
        self.finish_corrections = Counter(prefix + "finish_reason_corrections",
                                          "finish_reason changed by the proxy",
                                          ["before", "after"], registry=registry)
        self.rewrites = Counter(prefix + "request_rewrites", "Request rewrites applied",
                                ["rewrite"], registry=registry)
        self.reasks = Counter(prefix + "reasks",
                              "Turns' calls asked for once more, by reason (demanded, "
                              "unreadable), dialect (unconstrained: today's retry) and result "
                              "(recovered, unmet, refused)",
                              ["reason", "dialect", "result"], registry=registry)
        self.reask_latency = Histogram(prefix + "reask_upstream_seconds",
                                       "A re-ask's upstream time, by reason and dialect",
                                       ["reason", "dialect"], buckets=_LATENCY_BUCKETS,
                                       registry=registry)
        self.heartbeats = Counter(prefix + "heartbeats", "Heartbeats sent to waiting clients",
                                  registry=registry)
        self.upstream_errors = Counter(prefix + "upstream_errors",
                                       "Requests that ended in an upstream-side failure or a "
                                       "client disconnect, by kind",
                                       ["kind"], registry=registry)
        self.upstream_errors_rescued = Counter(
            prefix + "upstream_errors_rescued",
            "Tool turns whose upstream error held the model's output, read as its answer, "
            "by server", ["server"], registry=registry)
        self.upstream_latency = Histogram(prefix + "upstream_latency_seconds",
                                          "Time until upstream answered (headers or body)",
                                          ["mode"], buckets=_LATENCY_BUCKETS,
                                          registry=registry)
        self.total_latency = Histogram(prefix + "request_duration_seconds",
                                       "Time from request to the end of the response",
                                       ["mode"], buckets=_LATENCY_BUCKETS, registry=registry)
        self.in_flight = Gauge(prefix + "in_flight_requests", "Requests being handled",
                               registry=registry, multiprocess_mode="livesum")
        self.upstream_up = Gauge(prefix + "upstream_up",
                                 "1 when the last request to the upstream did not fail on its "
                                 "side, 0 when it did", ["upstream"], registry=registry,
                                 multiprocess_mode="mostrecent")
        # Per replica (its masked URL: a closed set, from the settings).
        self.replica_requests = Counter(prefix + "replica_requests",
                                        "Upstream calls by replica and result (ok, http_502/"
                                        "503/504, or the failure's code)",
                                        ["replica", "result"], registry=registry)
        self.replica_failovers = Counter(prefix + "replica_failovers",
                                         "Requests sent to another replica after a failure "
                                         "before the first byte, by the replica that failed",
                                         ["replica"], registry=registry)
        self.replica_in_flight = Gauge(prefix + "replica_in_flight",
                                       "Upstream calls in flight, by replica", ["replica"],
                                       registry=registry, multiprocess_mode="livesum")
        self.replica_up = Gauge(prefix + "replica_up",
                                "0 while a replica is marked down (in any worker)",
                                ["replica"], registry=registry, multiprocess_mode="livemin")
        for metric in list(vars(self).values()):
            if getattr(metric, "_labelnames", ()):
                _remember_children(metric)
        # what each request adds, found once per child (see `_adds`)
        self._in_flight = self.in_flight._value.inc
        self._requests = _adds(self.requests)
        self._rewrites = _adds(self.rewrites)
        self._tool_calls = _adds(self.tool_calls)
        self._total_latency = _observes(self.total_latency)
        self._upstream_latency = _observes(self.upstream_latency)
        self.replica_in_flight_adds = _adds(self.replica_in_flight)
        self.replica_requests_adds = _adds(self.replica_requests)

    def started(self) -> None:
        """A request began."""
        self._in_flight(1)

    def finished(self, log: RequestLog, total_seconds: float) -> None:
        """A request ended: count everything its log record says."""
        self._in_flight(-1)
        self._requests(log.mode, str(log.status or 0), log.front or "none")(1)
        self._total_latency(log.mode)(total_seconds)
        if log.upstream_ms is not None:
            self._upstream_latency(log.mode)(log.upstream_ms / 1000)
        if log.heartbeats:
            self.heartbeats.inc(log.heartbeats)
        rescued = rescued_from(log)
        if rescued is not None:
            self.upstream_errors_rescued.labels(rescued).inc()
        kind = upstream_error_kind(log)
        if kind is not None:
            self.upstream_errors.labels(kind).inc()
        if log.upstream is not None and kind != "client_disconnected":
            self.upstream_up.labels(log.upstream)._value.set(0.0 if kind else 1.0,
                                                             timestamp=time.time())
        for rewrite in log.rewrites:
            self._rewrites(rewrite)(1)
        for seen in log.reasks:
            self.reasks.labels(seen.reason, seen.dialect, seen.result).inc()
            self.reask_latency.labels(seen.reason, seen.dialect).observe(seen.ms / 1000)
        outcome = log.outcome
        if outcome is None:
            return
        for call_format in outcome.call_formats:
            self._tool_calls(call_format)(1)
        for repair in outcome.repairs:
            self.repairs.labels(repair.format, repair.repair).inc()
        for left in outcome.left_as_text:
            self.refused.labels(left.format, left.reason).inc()
        for invalid in outcome.schema_invalid:
            self.schema_invalid.labels(invalid.format).inc()
        for before, after in zip(outcome.finish_before, outcome.finish_after, strict=True):
            if before != after:
                self.finish_corrections.labels(finish_label(before), finish_label(after)).inc()

    def _whole(self) -> CollectorRegistry:
        """This process's registry, or one reading every worker's figures."""
        if not self.multiprocess:
            return self.registry
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry

    def exposition(self) -> bytes:
        """The Prometheus text format: this process's figures, or every worker's."""
        return generate_latest(self._whole())

    def upstreams_in_flight(self) -> dict[str, float]:
        """Calls in flight to each upstream (each replica) now, the whole server's."""
        name = self.replica_in_flight._name  # the family's sample name
        return {sample.labels["replica"]: sample.value
                for family in self._whole().collect() if family.name == name
                for sample in family.samples if sample.name == name}
