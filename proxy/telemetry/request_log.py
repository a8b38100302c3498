"""One structured log line per request: what the proxy decided and repaired.

No prompt or completion text and no credentials: only shapes, counts, names and timings.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..turn.result import Outcome

LOGGER_NAME = "toolcall_proxy"


_SECRET_KEYS = frozenset({"authorization", "api_key", "apikey", "api-key", "x-api-key",
                          "access_token", "refresh_token", "password", "secret", "client_secret",
                          "token", "access_key", "private_key", "cookie", "set-cookie"})
_REDACTED = "[redacted]"


def redact(value: Any, secret: bool = False) -> Any:
    """`value` with every string or number held under a key named like a credential replaced,
    at any depth. Objects under such a key are searched, not replaced: a tool schema with a
    `password` property must stay as it was, or the captured request replays differently."""
    if isinstance(value, dict):
        return {k: redact(v, isinstance(k, str) and k.lower() in _SECRET_KEYS)
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, secret) for v in value]  # a list of cookies is each one secret
    if secret and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return _REDACTED
    return value


def _loggable(bodies: dict[str, Any]) -> Any:
    """The bodies `log_bodies` writes, redacted; a note instead when one nests deeper than
    orjson writes (an upstream's answer may), so that the line is still written."""
    try:
        redacted = redact(bodies)
        orjson.dumps(redacted)
    except (TypeError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        return "not logged: nested deeper than the log's JSON writer allows"
    return redacted


# What a terminal or a reader of lines acts on rather than shows: C0 and C1 controls (a
# terminal's escape sequences begin with one), DEL, the Unicode line and paragraph
# separators, and the bidirectional controls that reorder what is shown. Escaped (as JSON's
# \uXXXX) wherever the proxy writes text others sent: log lines, replay's and doctor's output.
_UNSAFE = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE_CHAR = re.compile(f"[{_UNSAFE}]")
# Characters that make a logfmt value need quotes (inside which the unsafe ones are escaped),
# so a value can never start a new (forged) line.
_NEEDS_QUOTES = re.compile(rf'[\s"=\\\t\n{_UNSAFE}]')


def printable(text: str) -> str:
    """`text` with each unsafe character written as `\\uXXXX` (line ends and tabs kept): safe
    to print on a terminal, and still valid JSON when `text` is JSON."""
    return _UNSAFE_CHAR.sub(lambda found: f"\\u{ord(found[0]):04x}", text)


def logfmt_value(value: Any) -> str:
    """One value as logfmt writes it: bare when it is plain, else a JSON-escaped quoted
    string; lists comma-joined (and quoted), objects as JSON, booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        text = ",".join(v if isinstance(v, str) else orjson.dumps(v).decode() for v in value)
        return _quoted(text)
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return _quoted(text) if not text or _NEEDS_QUOTES.search(text) else text


def _quoted(text: str) -> str:
    return _printable_json(orjson.dumps(text))  # JSON escapes quotes, backslashes, C0


def _printable_json(data: bytes) -> str:
    """orjson's output `data` as `printable` writes it: orjson escapes every C0 control, so
    an ASCII text without DEL has no unsafe character left (most lines: one scan in C)."""
    if data.isascii() and b"\x7f" not in data:
        return data.decode()
    return printable(data.decode())


def json_line(record: dict[str, Any]) -> str:
    """The record as one JSON line that no reader of lines can split, nor a terminal act on
    (JSON leaves DEL, C1 controls and the Unicode line breaks raw)."""
    return _printable_json(orjson.dumps(record))


def logfmt(record: dict[str, Any]) -> str:
    """The record as one logfmt line (`key=value …`), empty fields left out. (Its strings
    and numbers, most of a line, are written here as `logfmt_value` writes them, without a
    call each.)"""
    fields = []
    for key, value in record.items():
        if value is None or value == []:
            continue
        kind = type(value)
        if kind is str:
            text = _quoted(value) if not value or _NEEDS_QUOTES.search(value) else value
        elif kind is int or kind is float:
            text = str(value)
        else:
            text = logfmt_value(value)
        fields.append(f"{key}={text}")
    return " ".join(fields)


class LineHandler(logging.StreamHandler):
    """The proxy's handler: each message a line on its stream, as it is (`PLAIN`)."""

    def write_line(self, line: str, record: Callable[[], logging.LogRecord]) -> None:
        """`line` written as `emit` writes a record whose message it is (`record`: that
        record, made only if the write fails, for `handleError`)."""
        with self.lock:  # type: ignore[union-attr]  # (made by Handler.__init__; `acquire`'s
            try:
                stream = self.stream
                stream.write(line + self.terminator)
                if stream and hasattr(stream, "flush"):
                    stream.flush()
            except RecursionError:
                raise
            except Exception:
                self.handleError(record())


PLAIN = logging.Formatter("%(message)s")


def make_logger(level: str, lock: Callable[[], Any] | None = None) -> logging.Logger:
    """The proxy's logger: plain lines on stderr, one handler however often the app is built.
    `lock`: what makes its handler's lock (logging's own: a `threading.RLock`), when the
    handler is made."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level.upper())
    logger.propagate = False
    if not logger.handlers:
        handler = LineHandler(sys.stderr)
        if lock is not None:
            handler.lock = lock()
        handler.setFormatter(PLAIN)
        logger.addHandler(handler)
    return logger


def _lines_only(logger: logging.Logger) -> LineHandler | None:
    """The logger's one handler when a request's line may be written to it straight: it is
    the proxy's own, unfiltered and unchanged, and nothing else would see the record (no
    other handler, no filter). Else None: the record goes the logging module's way."""
    handlers = logger.handlers
    if len(handlers) != 1 or logger.filters:
        return None
    handler = handlers[0]
    if (type(handler) is not LineHandler or handler.filters or handler.formatter is not PLAIN
            or handler.level > logging.INFO):
        return None
    return handler


def tool_label(name: str | None, declared: frozenset[str]) -> str | None:
    """A tool name as the log may show it: one the request declared, else `?` (a name the
    model wrote is model text, of any length)."""
    if not name:
        return None
    return name if name in declared else "?"


def _tagged(fmt: str, what: str, tool: str | None, declared: frozenset[str]) -> str:
    """`format:what[:tool]` for a repair or a frame left as text."""
    label = tool_label(tool, declared)
    return f"{fmt}:{what}" + (f":{label}" if label else "")


@dataclass(frozen=True)
class ReAskSeen:
    """One re-ask of a turn's calls: why (`demanded`, `unreadable`), in which dialect
    (`unconstrained`: today's retry), how it went (`recovered`: its answer held the call;
    `unmet`; `refused`: the server refused the constraint) and its upstream time."""

    reason: str
    dialect: str
    result: str
    ms: float

    @property
    def tag(self) -> str:
        """`reason:dialect:result`, for the status page's counts."""
        return f"{self.reason}:{self.dialect}:{self.result}"


@dataclass
class UpstreamClock:
    """The time a request spends waiting on its upstream calls (one at a time: a re-ask
    follows the first call): the calls that ended, summed, and the one under way."""

    waited: float = 0.0  # seconds, of the calls that ended
    since: float | None = None  # when the call under way began (monotonic)

    def begin(self, now: float) -> None:
        """A call begins."""
        self.since = now

    def end(self, now: float) -> None:
        """The call under way has ended."""
        if self.since is not None:
            self.waited += now - self.since
            self.since = None

    def so_far(self, now: float) -> float:
        """Seconds waited on upstream until `now`."""
        return self.waited + (now - self.since if self.since is not None else 0.0)


@dataclass
class RequestLog:
    """The facts of one request, filled in as it is handled and emitted once at its end."""

    request_id: str
    method: str
    path: str
    started: float = field(default_factory=time.monotonic)
    front: str | None = None  # the API that answered (chat, responses, …); None: relayed
    mode: str = "passthrough"
    model: str | None = None
    client_stream: bool | None = None
    status: int | None = None
    upstream: str | None = None  # the upstream (or replica) asked, its URL masked
    upstream_status: int | None = None
    upstream_ms: float | None = None
    bytes_out: int = 0
    heartbeats: int = 0
    outcome: Outcome | None = None
    error: str | None = None
    rewrites: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    bodies: dict[str, Any] | None = None  # only with log_bodies on, secrets redacted
    tools: frozenset[str] = frozenset()  # the request's declared tool names
    emitted: bool = False
    first_text_ms: float | None = None  # streamed mode: when the first live text went out
    replica: str | None = None  # the replica that answered (a model with several; masked)
    # Whose request it is (a keyed hash of the API key the door accepted; None until it
    # did): the owner of its capture. Never logged.
    owner: str | None = None
    reasks: list[ReAskSeen] = field(default_factory=list)  # demanded calls, unreadable frames
    upstream_clock: UpstreamClock = field(default_factory=UpstreamClock)

    def timing(self, now: float | None = None) -> tuple[float, float]:
        """(the proxy's own milliseconds, those waited on upstream) from the request's start
        to `now`: its time while no upstream call was under way, and the rest."""
        now = time.monotonic() if now is None else now
        upstream = min(self.upstream_clock.so_far(now), now - self.started)
        return round((now - self.started - upstream) * 1000, 2), round(upstream * 1000, 2)

    def server_timing(self) -> str:
        """The `Server-Timing` header's value (W3C Server Timing) until now: `proxy;dur=…,
        upstream;dur=…`, in milliseconds."""
        proxy, upstream = self.timing()
        return f"proxy;dur={proxy}, upstream;dur={upstream}"

    def as_dict(self) -> dict[str, Any]:
        """The log record's fields."""
        now = time.monotonic()
        proxy_ms, upstream_wait_ms = self.timing(now)
        record: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "request_id": self.request_id,
            "method": self.method,
            "path": self.path,
            "front": self.front,
            "mode": self.mode,
            "model": self.model,
            "stream": self.client_stream,
            "status": self.status,
            "upstream": self.upstream,
            "upstream_status": self.upstream_status,
            "upstream_ms": self.upstream_ms,
            "total_ms": round((now - self.started) * 1000, 1),
            "proxy_ms": proxy_ms,
            "upstream_wait_ms": upstream_wait_ms,
            "bytes_out": self.bytes_out,
        }
        if self.mode in ("buffered", "streamed"):
            record["heartbeats"] = self.heartbeats
        if self.replica is not None:
            record["replica"] = self.replica
        if self.first_text_ms is not None:
            record["first_text_ms"] = self.first_text_ms
        if self.reasks:
            record["reasks"] = [{"reason": r.reason, "dialect": r.dialect,
                                 "result": r.result, "ms": r.ms} for r in self.reasks]
        if self.rewrites:
            record["rewrites"] = self.rewrites
        if self.notes:
            record["notes"] = self.notes
        if self.outcome is not None:
            outcome = self.outcome
            record.update({
                "tool_calls": outcome.tool_calls,
                "formats": outcome.formats,
                "repairs": [_tagged(r.format, r.repair, r.tool, self.tools)
                            for r in outcome.repairs],
                "left_as_text": [_tagged(t.format, t.reason, t.tool, self.tools)
                                 for t in outcome.left_as_text],
                "schema_invalid": [_tagged(s.format, "schema_invalid", s.tool, self.tools)
                                   for s in outcome.schema_invalid],
                "finish_reason": [f"{str(b)[:32]}->{a}" if b != a else a for b, a in
                                  zip(outcome.finish_before, outcome.finish_after, strict=True)],
            })
        if self.error:
            record["error"] = self.error
        if self.bodies is not None:
            record["bodies"] = _loggable(self.bodies)
        return record

    def emit(self, logger: logging.Logger, fmt: str) -> dict[str, Any] | None:
        """Write the line (once, however many code paths end the request): its record, or
        None when it was written already."""
        if self.emitted:
            return None
        self.emitted = True
        record = self.as_dict()
        if logger.isEnabledFor(logging.INFO):
            # logger.info's own walk up the stack for the caller's file and line (which the
            # line does not show) cost a third of writing it
            line = json_line(record) if fmt == "json" else logfmt(record)

            def made() -> logging.LogRecord:
                return logger.makeRecord(logger.name, logging.INFO, "(request log)", 0, line,
                                         (), None)
            handler = _lines_only(logger)
            if handler is not None:  # the record a handler would only format, not made
                handler.write_line(line, made)
            else:
                logger.handle(made())
        return record
