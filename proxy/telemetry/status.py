"""What `/proxy/status` shows: one small record per finished request (`TurnRecord`, built from
its `RequestLog`), and the status document summed from the records of every worker.

Pure: the shell's recorder (`proxy/shell/recorder/rings.py`) keeps the records in bounded rings
and hands them here; the page itself (`proxy/telemetry/status_page.py`) draws this document.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .metrics import upstream_error_kind
from .request_log import RequestLog

TURNS_SHOWN = 200  # the last turns listed, newest first
CHART_MINUTES = 60  # turns and failures per minute over the last hour
_ITEM_CHARS = 48  # a format, repair or reason tag as kept (they are short closed names)
_MODEL_CHARS = 96  # a model name is the client's text: kept short
_URL_CHARS = 160
_ID_CHARS = 64
_MAX_KINDS = 6  # distinct formats, repairs or reasons kept per turn (the rest summed as "…")
_UPSTREAM_MODES = frozenset({"buffered", "streamed", "passthrough"})
_TOOL_MODES = frozenset({"buffered", "streamed"})


@dataclass(slots=True)
class TurnRecord:
    """One finished request as the status page needs it: names, counts and timings only,
    never prompt or completion text. `capture` is the key of its kept capture (log_bodies);
    `owner` who made the request (the recorder's keyed hash of its API key), the one who may
    fetch that capture."""

    ts: float
    request_id: str
    front: str
    mode: str
    model: str
    stream: bool
    status: int
    upstream: str
    upstream_status: int
    upstream_ms: float
    total_ms: float
    calls: int = 0
    formats: dict[str, int] = field(default_factory=dict)
    repairs: dict[str, int] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)
    error: str = ""
    upstream_error: str = ""  # an upstream-side failure (metrics' upstream_errors kind)
    heartbeats: int = 0
    capture: str = ""
    owner: str = ""
    schema_invalid: dict[str, int] = field(default_factory=dict)  # by format
    reasks: dict[str, int] = field(default_factory=dict)  # `reason:dialect:result` counted
    reask_ms: float = 0.0  # the re-asks' upstream time

    @property
    def failed(self) -> bool:
        """Whether the turn failed on the server's or upstream's side (a client's own
        mistake, a 4xx, or a client that left is not a failure of the proxy's)."""
        return self.status >= 500 or (bool(self.upstream_error)
                                      and self.upstream_error != "client_disconnected")

    def encode(self) -> bytes:
        """The record as compact JSON (a list, in field order): what a ring slot holds."""
        return orjson.dumps([self.ts, self.request_id, self.front, self.mode, self.model,
                             self.stream, self.status, self.upstream, self.upstream_status,
                             self.upstream_ms, self.total_ms, self.calls, self.formats,
                             self.repairs, self.left, self.error, self.upstream_error,
                             self.heartbeats, self.capture, self.owner,
                             self.schema_invalid, self.reasks, self.reask_ms])

    @classmethod
    def decode(cls, data: bytes) -> TurnRecord | None:
        """A record from `encode`'s bytes; None for anything else (a slot being written, or
        bytes of any other shape: a ring file is read as untrusted)."""
        try:
            values = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(values, list) or not _MIN_FIELDS <= len(values) <= len(_SHAPE):
            return None
        for value, kind in zip(values, _SHAPE, strict=False):
            if not _fits(value, kind):
                return None
        return cls(*values)


# What each of a record's encoded fields must be: a type, or "count" (an int, never a bool)
# or "counts" (a dict of counts by name); the fields after the 11th have defaults.
_SHAPE: tuple[Any, ...] = ((int, float), str, str, str, str, bool, "count", str, "count",
                           (int, float), (int, float), "count", "counts", "counts", "counts",
                           str, str, "count", str, str, "counts", "counts", (int, float))
_MIN_FIELDS = 11


# No count, time (s) or duration (ms) of a real turn reaches this, and sums of every record
# a run directory holds stay within the 64-bit integers JSON carries.
_NUMBER_MAX = 2**40


def _fits(value: Any, kind: Any) -> bool:
    """Whether a decoded field is of its `_SHAPE` kind (a number: one a turn can have)."""
    if kind == "count":
        return (isinstance(value, int) and not isinstance(value, bool)
                and 0 <= value < _NUMBER_MAX)
    if kind == "counts":
        return isinstance(value, dict) and all(_fits(n, "count") for n in value.values())
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        return False
    return kind in (str, bool) or 0 <= value < _NUMBER_MAX


def _counted(tags: Iterable[str]) -> dict[str, int]:
    """Tags counted, at most `_MAX_KINDS` distinct ones (the rest under `…`)."""
    counts: dict[str, int] = {}
    for tag in tags:
        tag = tag[:_ITEM_CHARS]
        if tag in counts or len(counts) < _MAX_KINDS:
            counts[tag] = counts.get(tag, 0) + 1
        else:
            counts["…"] = counts.get("…", 0) + 1
    return counts


def turn_record(log: RequestLog, now: float, total_ms: float) -> TurnRecord:
    """The record of one finished request (`now`: wall-clock seconds at its end)."""
    status = log.status or 0
    kind = upstream_error_kind(log) or ""
    # An upstream failure by the proxy's name for it (upstream's own code may be anything).
    error = kind or log.error or (f"http_{status}" if status >= 400 else "")
    record = TurnRecord(
        now, log.request_id[:_ID_CHARS], log.front or "", log.mode,
        (log.model or "")[:_MODEL_CHARS], bool(log.client_stream), status,
        (log.upstream or "")[:_URL_CHARS], log.upstream_status or 0,
        -1.0 if log.upstream_ms is None else log.upstream_ms,
        round(total_ms, 1), error=error.split(":", 1)[0][:_ITEM_CHARS],
        upstream_error=kind[:_ITEM_CHARS], heartbeats=log.heartbeats, owner=log.owner or "")
    if log.reasks:
        record.reasks = _counted(seen.tag for seen in log.reasks)
        record.reask_ms = round(sum(seen.ms for seen in log.reasks), 1)
    outcome = log.outcome
    if outcome is not None:
        record.calls = outcome.tool_calls
        if outcome.call_formats:
            record.formats = _counted(outcome.call_formats)
        if outcome.repairs:
            record.repairs = _counted(f"{r.format}:{r.repair}" for r in outcome.repairs)
        if outcome.left_as_text:
            record.left = _counted(f"{t.format}:{t.reason}" for t in outcome.left_as_text)
        if outcome.schema_invalid:
            record.schema_invalid = _counted(s.format for s in outcome.schema_invalid)
    return record


@dataclass(frozen=True)
class MinuteCount:
    """Turns and failures one worker counted in one minute (`minute`: epoch seconds // 60)."""

    minute: int
    turns: int
    failures: int


@dataclass(frozen=True)
class StatusInput:
    """Everything the document is made of, gathered by the shell."""

    turns: Sequence[TurnRecord]  # every worker's, in any order
    minutes: Sequence[MinuteCount]  # every worker's
    upstreams: Sequence[str]  # the configured ones (masked), shown even before any turn
    in_flight: Mapping[str, float] = field(default_factory=dict)  # by upstream label
    probes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # by upstream label
    captures: bool = False  # log_bodies is on: turns link their capture
    version: str = ""
    kept_per_worker: int = 0
    viewer: str = ""  # who asks (an owner): only its own turns link their capture


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of `values` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = math.ceil(round(fraction * len(ordered), 9))  # 0.95 * 100 is 95.00000000000001
    return ordered[min(len(ordered), max(1, rank)) - 1]


def _upstream_row(label: str, turns: list[TurnRecord], data: StatusInput) -> dict[str, Any]:
    """One upstream: up or down, in flight, latency, last error (turns: oldest first)."""
    latencies = [t.upstream_ms for t in turns if t.upstream_ms >= 0 and not t.failed]
    failures = [t for t in turns if t.failed]
    probe = data.probes.get(label)
    if probe is not None:
        state = "up" if probe.get("ok") else "down"
    elif turns:
        state = "down" if turns[-1].failed else "up"
    else:
        state = "unknown"
    last = failures[-1] if failures else None
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    return {
        "url": label, "state": state, "in_flight": int(data.in_flight.get(label, 0)),
        "turns": len(turns), "failures": len(failures),
        "latency_p50_ms": p50, "latency_p95_ms": p95,
        "last_error": None if last is None else {
            "ts": last.ts, "code": last.upstream_error or last.error,
            "status": last.upstream_status or last.status},
        "probe": None if probe is None else dict(probe),
    }


def _model_row(model: str, turns: list[TurnRecord]) -> dict[str, Any]:
    """One model's counts over the turns held."""
    formats: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    left: Counter[str] = Counter()
    invalid: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    reasks: Counter[str] = Counter()
    for turn in turns:  # (Counter.update of a dict is several times slower than this)
        for counts, add in ((formats, turn.formats), (repairs, turn.repairs),
                            (left, turn.left), (invalid, turn.schema_invalid),
                            (reasks, turn.reasks)):
            for name, count in add.items():
                counts[name] += count
        if turn.error:
            errors[turn.error] += 1
    modes = Counter(t.mode for t in turns)
    return {
        "model": model, "turns": len(turns),
        "tool_turns": sum(n for m, n in modes.items() if m in _TOOL_MODES),
        "buffered": modes["buffered"], "streamed": modes["streamed"],
        "passthrough": modes["passthrough"],
        "client_streams": sum(1 for t in turns if t.stream),
        "calls": sum(t.calls for t in turns),
        "formats": dict(formats.most_common()), "repairs": dict(repairs.most_common()),
        "left_as_text": dict(left.most_common()),
        "schema_invalid": dict(invalid.most_common()), "errors": dict(errors.most_common()),
        "heartbeats": sum(t.heartbeats for t in turns),
        "reasks": dict(reasks.most_common()),
        "reask_p50_ms": percentile([t.reask_ms for t in turns if t.reasks], 0.5),
    }


def _turn_row(turn: TurnRecord, captures: bool, viewer: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "ts": turn.ts, "request_id": turn.request_id, "front": turn.front or None,
        "mode": turn.mode, "model": turn.model, "stream": turn.stream, "status": turn.status,
        "calls": turn.calls, "formats": turn.formats, "repairs": turn.repairs,
        "left_as_text": turn.left, "schema_invalid": turn.schema_invalid,
        "error": turn.error or None,
        "upstream": turn.upstream or None,
        "upstream_ms": None if turn.upstream_ms < 0 else turn.upstream_ms,
        "total_ms": turn.total_ms, "failed": turn.failed,
        "reasks": turn.reasks, "reask_ms": turn.reask_ms if turn.reasks else None,
    }
    if captures and turn.capture and turn.owner == viewer:
        row["capture"] = f"status/capture/{turn.capture}"
    return row


def per_minute(minutes: Iterable[MinuteCount], now: float) -> list[dict[str, int]]:
    """Turns and failures in each of the last CHART_MINUTES minutes (oldest first), summed
    over the workers."""
    current = int(now // 60)
    first = current - CHART_MINUTES + 1
    turns = [0] * CHART_MINUTES
    failures = [0] * CHART_MINUTES
    for count in minutes:
        if first <= count.minute <= current:
            turns[count.minute - first] += count.turns
            failures[count.minute - first] += count.failures
    return [{"minute": (first + i) * 60, "turns": turns[i], "failures": failures[i]}
            for i in range(CHART_MINUTES)]


@dataclass(frozen=True)
class StatusBuild:
    """The status document built once for every viewer: all of it but the rows of its last
    turns, which differ by viewer (each sees its own turns' captures), and those turns."""

    document: dict[str, Any]
    shown: tuple[TurnRecord, ...]  # newest first
    captures: bool


def build(data: StatusInput, now: float | None = None) -> StatusBuild:
    """The status document's viewer-free part, from every worker's records."""
    now = time.time() if now is None else now
    turns = sorted(data.turns, key=lambda t: t.ts)
    by_upstream: dict[str, list[TurnRecord]] = {label: [] for label in data.upstreams}
    by_model: dict[str, list[TurnRecord]] = {}
    for turn in turns:
        if turn.upstream and turn.mode in _UPSTREAM_MODES:
            by_upstream.setdefault(turn.upstream, []).append(turn)
        if turn.front or turn.model:
            by_model.setdefault(turn.model, []).append(turn)
    models = sorted(by_model.items(), key=lambda item: -len(item[1]))
    return StatusBuild({
        "generated": round(now, 3), "version": data.version,
        "held": {"turns": len(turns), "since": turns[0].ts if turns else None,
                 "per_worker": data.kept_per_worker},
        "upstreams": [_upstream_row(label, rows, data) for label, rows in by_upstream.items()],
        "models": [_model_row(model, rows) for model, rows in models],
        "turns": [],
        "per_minute": per_minute(data.minutes, now),
        "captures": data.captures,
    }, tuple(reversed(turns[-TURNS_SHOWN:])), data.captures)


def seen_by(built: StatusBuild, viewer: str) -> dict[str, Any]:
    """The status document as `viewer` (an owner) sees it: only its own turns link their
    capture."""
    return {**built.document,
            "turns": [_turn_row(turn, built.captures, viewer) for turn in built.shown]}


def document(data: StatusInput, now: float | None = None) -> dict[str, Any]:
    """The status document (`/proxy/status.json`, drawn by the page) as `data.viewer` sees
    it."""
    return seen_by(build(data, now), data.viewer)
