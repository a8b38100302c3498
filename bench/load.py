"""Load generator: measures HTTP from the client side, cheaply.

Why hand-rolled: the load generator shares two cores with the proxy and the fake upstream, so
it must cost as little as possible per request and per SSE event. This is asyncio with one
`asyncio.Protocol` per keep-alive connection and an incremental HTTP/1.1 response parser
(Content-Length, chunked, or read-to-close framing); SSE events are only located (`\\n\\n`),
never JSON-decoded, except when a caller asks to keep a body for validation.

What it measures per request: time to first response byte, time to first SSE `data:` event
(the TTFB a streaming client feels; for a JSON answer the first body byte), total latency,
the arrival time of every `data:` event (the inter-chunk gaps), `: comment` lines seen, bytes,
status and errors. `summarize` turns a batch into requests/s and p50/p99 figures.

It also reads a server's footprint from /proc: the RSS and the CPU time (utime + stime) of a
process and all of its descendants (the gunicorn master and its workers).

Two ways to drive load:

* `closed_loop`: C connections each sending requests back to back for a duration (bounded by
  time and by count);
* `held`: N concurrent long-lived streams, each on its own new connection, opened over a ramp.

Command line, for ad-hoc runs: `python -m bench.load URL --body '{...}' -c 8 -d 5`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import orjson

_now = time.perf_counter
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Result:
    """One request as the client saw it (times are `time.perf_counter()` seconds)."""

    t_start: float
    status: int = 0
    error: str | None = None
    t_first_byte: float | None = None
    t_first_event: float | None = None
    t_end: float | None = None
    event_times: list[float] = dataclasses.field(default_factory=list)
    comments: int = 0
    nbytes: int = 0
    sse: bool = False
    done: bool = False  # saw a stream's successful end (see _SSE_ENDS)
    body: bytes | None = None
    headers: dict[bytes, bytes] | None = None  # lower-cased names; kept with the body

    @property
    def ok(self) -> bool:
        """200, no transport error, and an SSE stream that ended with [DONE] (or, for
        Anthropic's, message_stop)."""
        return self.error is None and self.status == 200 and (self.done or not self.sse)

    @property
    def ttfb(self) -> float | None:
        """Seconds to the first SSE data event (or first body byte for non-SSE answers)."""
        first = self.t_first_event if self.t_first_event is not None else self.t_first_byte
        return None if first is None else first - self.t_start

    @property
    def total(self) -> float | None:
        """Seconds from sending (or connecting) to the last byte."""
        return None if self.t_end is None else self.t_end - self.t_start

    def gaps(self) -> list[float]:
        """Seconds between consecutive `data:` events."""
        t = self.event_times
        return [t[i] - t[i - 1] for i in range(1, len(t))]

    def failure(self) -> str:
        """A short reason why this request is not ok ('' when it is)."""
        if self.error:
            return self.error
        if self.status != 200:
            return f"status {self.status}"
        if self.sse and not self.done:
            return "stream ended without [DONE]"
        return ""


@dataclasses.dataclass
class Batch:
    """Results of one load run, with its wall time and the load generator's own CPU."""

    results: list[Result]
    wall: float
    client_cpu: float

    def extend(self, other: Batch) -> None:
        """Merge another batch (interleaved rounds of the same scenario)."""
        self.results.extend(other.results)
        self.wall += other.wall
        self.client_cpu += other.client_cpu


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100), linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summarize(batch: Batch) -> dict[str, float]:
    """requests/s, ttfb/total/gap p50 and p99 (and total/gap p99.9) in seconds, errors,
    client CPU share."""
    ok = [r for r in batch.results if r.ok]
    ttfb = [r.ttfb for r in ok if r.ttfb is not None]
    total = [r.total for r in ok if r.total is not None]
    gaps: list[float] = []
    for r in ok:
        gaps.extend(r.gaps())
    return {
        "n": float(len(batch.results)),
        "ok": float(len(ok)),
        "errors": float(len(batch.results) - len(ok)),
        "rps": len(ok) / batch.wall if batch.wall > 0 else math.nan,
        "ttfb_p50": percentile(ttfb, 50), "ttfb_p99": percentile(ttfb, 99),
        "total_p50": percentile(total, 50), "total_p99": percentile(total, 99),
        "total_p999": percentile(total, 99.9),
        "gap_p50": percentile(gaps, 50), "gap_p99": percentile(gaps, 99),
        "gap_p999": percentile(gaps, 99.9),
        "gap_max": max(gaps) if gaps else math.nan,
        "client_cpu_share": batch.client_cpu / batch.wall if batch.wall > 0 else math.nan,
    }


def first_errors(batch: Batch, limit: int = 3) -> list[str]:
    """The distinct failure reasons of a batch, most frequent first."""
    counts: dict[str, int] = {}
    for r in batch.results:
        reason = r.failure()
        if reason:
            counts[reason] = counts.get(reason, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:limit]
    return [f"{n}× {reason}" for reason, n in ranked]


# ---------------------------------------------------------------------------------------------
# The HTTP/1.1 client connection
# ---------------------------------------------------------------------------------------------
# Enough of an event to tell a stream's successful end: `data: [DONE]` (chat), the
# Responses API's `event: response.completed` / `event: response.incomplete`, Anthropic's
# `event: message_stop`.
_SSE_HEAD_BYTES = 26
_SSE_ENDS = (b"data: [DONE]", b"event: response.completed", b"event: response.incomplete",
             b"event: message_stop")
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER, _TO_EOF, _IDLE = range(8)


class HttpConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection running one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buf = bytearray()
        self._state = _IDLE
        self._result: Result | None = None
        self._future: asyncio.Future[Result] | None = None
        self._remaining = 0
        self._close_after = False
        self._keep_body = False
        self._body_parts: list[bytes] = []
        self._sse_head = b""
        self._sse_nl = False
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = _now()
        result = self._result
        if result is None:
            return  # bytes with no request outstanding: ignore
        if result.t_first_byte is None:
            result.t_first_byte = now
        result.nbytes += len(data)
        state = self._state
        if state in (_LENGTH, _CHUNK_DATA) and not self._buf:
            # fast path for body bytes: no copy into the parse buffer
            take = min(self._remaining, len(data))
            self._on_body(data if take == len(data) else data[:take], now)
            self._remaining -= take
            if self._remaining == 0:
                if state == _LENGTH:
                    self._finish(now, None)
                    return
                self._state = _CHUNK_CRLF
            data = data[take:]
            if not data:
                return
        self._buf += data
        try:
            self._parse(now)
        except Exception as exc:  # malformed response: fail the request, drop the connection
            self._finish(now, f"parse error: {exc!r}", close=True)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._result is not None:
            now = _now()
            if self._state == _TO_EOF:
                self._finish(now, None)
            else:
                self._finish(now, f"connection closed ({exc!r})" if exc else "connection closed")

    # -- requests ---------------------------------------------------------------------------
    def request(self, raw: bytes, *, t_start: float | None = None, timeout: float = 60.0,
                keep_body: bool = False) -> asyncio.Future[Result]:
        """Send one request (bytes as built by `build_request`); the future gets its Result."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Result] = loop.create_future()
        if self.closed or self.transport is None or self._result is not None:
            fut.set_result(Result(t_start=_now(), error="connection not usable"))
            return fut
        self._result = Result(t_start=_now() if t_start is None else t_start)
        self._future = fut
        self._state = _HEAD
        self._buf.clear()
        self._keep_body = keep_body
        self._body_parts = []
        self._sse_head = b""
        self._sse_nl = False
        self._close_after = False
        self._timer = loop.call_later(timeout, self._on_timeout)
        self.transport.write(raw)
        return fut

    def close(self) -> None:
        """Close the socket (an outstanding request fails)."""
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    def _on_timeout(self) -> None:
        self._timer = None
        if self._result is not None:
            self._finish(_now(), "timeout", close=True)

    def _finish(self, now: float, error: str | None, *, close: bool = False) -> None:
        result, fut = self._result, self._future
        if result is None or fut is None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        result.t_end = now
        result.error = error
        if self._keep_body:
            result.body = b"".join(self._body_parts)
        self._result = None
        self._future = None
        self._state = _IDLE
        self._body_parts = []
        if close or self._close_after:
            self.close()
        if not fut.done():
            fut.set_result(result)

    # -- parsing ----------------------------------------------------------------------------
    def _parse(self, now: float) -> None:
        buf = self._buf
        while self._result is not None:
            state = self._state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > 65536:
                        raise ValueError("response head too large")
                    return
                self._on_head(bytes(buf[:end]))
                del buf[:end + 4]
                if self._state == _IDLE:  # no body
                    self._finish(now, None)
                    return
            elif state == _LENGTH:
                if not buf:
                    return
                take = min(self._remaining, len(buf))
                self._on_body(bytes(buf[:take]), now)
                del buf[:take]
                self._remaining -= take
                if self._remaining == 0:
                    self._finish(now, None)
                    return
            elif state == _TO_EOF:
                if buf:
                    self._on_body(bytes(buf), now)
                    buf.clear()
                return
            elif state == _CHUNK_SIZE:
                end = buf.find(b"\r\n")
                if end < 0:
                    return
                size = int(bytes(buf[:end]).split(b";")[0].strip(), 16)
                del buf[:end + 2]
                if size == 0:
                    self._state = _TRAILER
                else:
                    self._remaining = size
                    self._state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                if not buf:
                    return
                take = min(self._remaining, len(buf))
                self._on_body(bytes(buf[:take]), now)
                del buf[:take]
                self._remaining -= take
                if self._remaining == 0:
                    self._state = _CHUNK_CRLF
            elif state == _CHUNK_CRLF:
                if len(buf) < 2:
                    return
                del buf[:2]
                self._state = _CHUNK_SIZE
            elif state == _TRAILER:
                end = buf.find(b"\r\n")
                if end < 0:
                    return
                line = bytes(buf[:end])
                del buf[:end + 2]
                if not line:
                    self._finish(now, None)
                    return
            else:
                return

    def _on_head(self, head: bytes) -> None:
        result = self._result
        assert result is not None
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        result.status = int(rest[:3])
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        result.sse = headers.get(b"content-type", b"").startswith(b"text/event-stream")
        if self._keep_body:
            result.headers = headers
        connection = headers.get(b"connection", b"").lower()
        self._close_after = b"close" in connection or (
            version == b"HTTP/1.0" and b"keep-alive" not in connection)
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            self._state = _CHUNK_SIZE
        elif b"content-length" in headers:
            self._remaining = int(headers[b"content-length"])
            self._state = _LENGTH if self._remaining else _IDLE
        elif result.status in (204, 304) or 100 <= result.status < 200:
            self._state = _IDLE
        else:
            self._state = _TO_EOF
            self._close_after = True

    def _on_body(self, piece: bytes, now: float) -> None:
        result = self._result
        assert result is not None
        if self._keep_body:
            self._body_parts.append(piece)
        if not result.sse:
            if result.t_first_event is None:
                result.t_first_event = now
            return
        # Event boundaries are blank lines. Only the first bytes of the event in progress are
        # kept (enough to classify it), so a 1 MB event is never copied.
        head = self._sse_head
        pos = 0
        if self._sse_nl and piece[:1] == b"\n":  # a boundary split across two pieces
            self._sse_event(head, now)
            head = b""
            pos = 1
        while True:
            end = piece.find(b"\n\n", pos)
            if end < 0:
                break
            if len(head) < _SSE_HEAD_BYTES:
                head += piece[pos:pos + _SSE_HEAD_BYTES - len(head)]
            self._sse_event(head, now)
            head = b""
            pos = end + 2
        if len(head) < _SSE_HEAD_BYTES and pos < len(piece):
            head += piece[pos:pos + _SSE_HEAD_BYTES - len(head)]
        self._sse_head = head
        self._sse_nl = piece[-1:] == b"\n" and pos < len(piece)

    def _sse_event(self, head: bytes, now: float) -> None:
        """One complete SSE event, of which `head` holds the first bytes."""
        result = self._result
        assert result is not None
        if head.startswith((b"data:", b"event:")):
            result.event_times.append(now)
            if result.t_first_event is None:
                result.t_first_event = now
            if head.startswith(_SSE_ENDS):
                result.done = True
        elif head.startswith(b":"):
            result.comments += 1


def build_request(method: str, url: str, body: bytes | None = None,
                  headers: dict[str, str] | None = None) -> bytes:
    """The raw bytes of one HTTP/1.1 request (keep-alive)."""
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}",
             "User-Agent: toolcall-bench", "Accept: */*"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def host_port(url: str) -> tuple[str, int]:
    """(host, port) of an http:// URL."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


async def connect(host: str, port: int) -> HttpConnection:
    """A new connection (raises OSError when refused)."""
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(HttpConnection, host, port)
    return protocol


# ---------------------------------------------------------------------------------------------
# Load shapes
# ---------------------------------------------------------------------------------------------
async def closed_loop(url: str, make_request: Callable[[int], bytes], *, concurrency: int,
                      duration: float, min_requests: int = 0, max_duration: float | None = None,
                      max_requests: int = 1_000_000, timeout: float = 60.0,
                      keep_body_first: bool = False, stagger: float = 0.0) -> Batch:
    """`concurrency` keep-alive connections sending requests back to back.

    Stops when `duration` has passed and at least `min_requests` are done (but never later
    than `max_duration`), or after `max_requests`. `make_request(i)` gives request i's bytes.
    With `keep_body_first`, the first request's body is kept (for validation). With
    `stagger`, connection k starts k × `stagger` s late, so that long requests (streams) do
    not all begin in the same instant, round after round.
    """
    host, port = host_port(url)
    results: list[Result] = []
    counter = 0
    t0 = _now()
    cpu0 = time.process_time()
    soft_end = t0 + duration
    hard_end = t0 + (max_duration if max_duration is not None else max(duration * 3, 1.0))

    def more() -> bool:
        now = _now()
        if counter >= max_requests or now >= hard_end:
            return False
        return now < soft_end or len(results) < min_requests

    async def worker(k: int) -> None:
        nonlocal counter
        conn: HttpConnection | None = None
        if stagger:
            await asyncio.sleep(k * stagger)
        try:
            while more():
                i = counter
                counter += 1
                if conn is None or conn.closed:
                    t_connect = _now()
                    try:
                        conn = await connect(host, port)
                    except OSError as exc:
                        results.append(Result(t_start=t_connect, t_end=_now(),
                                              error=f"connect: {exc.strerror or exc!r}"))
                        await asyncio.sleep(0.05)
                        continue
                keep = keep_body_first and i == 0
                result = await conn.request(make_request(i), timeout=timeout, keep_body=keep)
                results.append(result)
        finally:
            if conn is not None:
                conn.close()

    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    wall = _now() - t0
    return Batch(results, wall, time.process_time() - cpu0)


async def held(url: str, request: bytes, *, streams: int, ramp: float, timeout: float,
               keep_bodies: bool = False, tick: Callable[[], None] | None = None,
               tick_every: float = 1.0) -> Batch:
    """`streams` concurrent requests, each on a new connection, opened evenly over `ramp` s.

    Each stream's clock starts before its connect, so TTFB includes connecting (what a client
    feels when the server is saturated). `tick` is called about every `tick_every` seconds
    while streams run (to sample the server's RSS, say).
    """
    host, port = host_port(url)
    t0 = _now()
    cpu0 = time.process_time()
    results: list[Result] = []
    conns: list[HttpConnection] = []

    async def one(i: int) -> None:
        await asyncio.sleep(ramp * i / max(1, streams))
        t_start = _now()
        try:
            conn = await asyncio.wait_for(connect(host, port), timeout)
        except (TimeoutError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else repr(exc)
            results.append(Result(t_start=t_start, t_end=_now(), error=f"connect: {reason}"))
            return
        conns.append(conn)
        remaining = max(1.0, timeout - (_now() - t_start))
        result = await conn.request(request, t_start=t_start, timeout=remaining,
                                    keep_body=keep_bodies)
        conn.close()
        results.append(result)

    async def ticker() -> None:
        while True:
            if tick is not None:
                tick()
            await asyncio.sleep(tick_every)

    tick_task = asyncio.create_task(ticker())
    try:
        await asyncio.gather(*(one(i) for i in range(streams)))
    finally:
        tick_task.cancel()
        for conn in conns:
            conn.close()
    return Batch(results, _now() - t0, time.process_time() - cpu0)


async def simple(url: str, method: str = "GET", body: bytes | None = None,
                 timeout: float = 10.0) -> Result:
    """One request on a fresh connection, body kept (health checks, validation)."""
    host, port = host_port(url)
    t0 = _now()
    try:
        conn = await asyncio.wait_for(connect(host, port), timeout)
    except (TimeoutError, OSError) as exc:
        return Result(t_start=t0, t_end=_now(), error=f"connect: {exc!r}")
    try:
        return await conn.request(build_request(method, url, body), timeout=timeout,
                                  keep_body=True)
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# SSE validation helpers
# ---------------------------------------------------------------------------------------------
def sse_events(body: bytes) -> list[Any]:
    """The JSON payloads of a body's `data:` events (`[DONE]` as the string)."""
    events: list[Any] = []
    for block in body.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                events.append("[DONE]" if payload == b"[DONE]" else orjson.loads(payload))
    return events


def assemble(body: bytes) -> dict[str, Any]:
    """Assemble an SSE chat stream the way a client does: content, tool calls, finish."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    errors: list[Any] = []
    for event in sse_events(body):
        if event == "[DONE]":
            continue
        if "error" in event:
            errors.append(event["error"])
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc.get("index", 0), {"name": "", "arguments": ""})
                fn = tc.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    return {"content": "".join(content), "tool_calls": [calls[k] for k in sorted(calls)],
            "finish_reason": finish, "errors": errors}


# ---------------------------------------------------------------------------------------------
# /proc: the server's footprint
# ---------------------------------------------------------------------------------------------
def _read_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode()
    except OSError:
        return None
    # the command name is in parentheses and may hold spaces: split after the last ')'
    return raw[raw.rfind(")") + 2:].split()


def descendants(root: int) -> list[int]:
    """`root` and every live descendant process (by scanning /proc for parent ids)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _read_stat(int(name))
        if fields is None:
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    tree = [root]
    i = 0
    while i < len(tree):
        tree.extend(children.get(tree[i], []))
        i += 1
    return tree


def cpu_seconds(root: int) -> float:
    """utime + stime of `root` and its live descendants, plus the reaped children it waited for.

    Counting the root's cutime/cstime keeps the CPU of workers that exited (restarted) during
    a measurement.
    """
    total = 0
    for pid in descendants(root):
        fields = _read_stat(pid)
        if fields is None:
            continue
        # after the ')': state=0 ppid=1 ... utime=11 stime=12 cutime=13 cstime=14
        total += int(fields[11]) + int(fields[12])
        if pid == root:
            total += int(fields[13]) + int(fields[14])
    return total / _CLK_TCK


def rss_bytes(root: int) -> int:
    """Resident memory of `root` and its live descendants (sum of each process's RSS)."""
    total = 0
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def _print_summary(label: str, batch: Batch) -> None:
    s = summarize(batch)
    print(f"{label}: n={s['n']:.0f} errors={s['errors']:.0f} rps={s['rps']:.1f} "
          f"ttfb p50={s['ttfb_p50'] * 1e3:.2f}ms p99={s['ttfb_p99'] * 1e3:.2f}ms "
          f"total p50={s['total_p50'] * 1e3:.2f}ms p99={s['total_p99'] * 1e3:.2f}ms "
          f"gap p50={s['gap_p50'] * 1e3:.2f}ms p99={s['gap_p99'] * 1e3:.2f}ms "
          f"client-cpu={s['client_cpu_share'] * 100:.0f}%")
    for reason in first_errors(batch):
        print("  error:", reason)


def main(argv: list[str] | None = None) -> int:
    """Ad-hoc load against one URL."""
    parser = argparse.ArgumentParser(prog="python -m bench.load",
                                     description="Drive one scenario against one URL.")
    parser.add_argument("url", help="e.g. http://127.0.0.1:8003/v1/chat/completions")
    parser.add_argument("--body", default=None, help="JSON request body (POST when given)")
    parser.add_argument("-c", "--concurrency", type=int, default=8)
    parser.add_argument("-d", "--duration", type=float, default=5.0, help="seconds")
    parser.add_argument("--held", type=int, default=0,
                        help="instead: this many concurrent streams, one request each")
    parser.add_argument("--ramp", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--server-pid", type=int, default=0,
                        help="report CPU and RSS of this process tree")
    args = parser.parse_args(argv)
    if urlsplit(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("loopback only")
    body = args.body.encode() if args.body is not None else None
    raw = build_request("POST" if body is not None else "GET", args.url, body)

    async def run() -> Batch:
        if args.held:
            return await held(args.url, raw, streams=args.held, ramp=args.ramp,
                              timeout=args.timeout)
        return await closed_loop(args.url, lambda _i: raw, concurrency=args.concurrency,
                                 duration=args.duration, timeout=args.timeout)

    from bench.fake_upstream import raise_fd_limit

    raise_fd_limit()
    cpu0 = cpu_seconds(args.server_pid) if args.server_pid else 0.0
    batch = asyncio.run(run())
    _print_summary(args.url, batch)
    if args.server_pid:
        used = cpu_seconds(args.server_pid) - cpu0
        n = max(1, sum(r.ok for r in batch.results))
        print(f"server cpu {used * 1e3 / n:.2f} ms/request, "
              f"rss {rss_bytes(args.server_pid) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
