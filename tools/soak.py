"""`make soak`: a bounded load with upstream faults through the real gunicorn deployment.

What it does: starts the fake vLLM (`bench.fake_upstream`) and the proxy the way users run it
(`gunicorn -c deploy/gunicorn.conf.py app:app`: gevent, 2 workers) on free loopback ports, with
short upstream timeouts so that a silent upstream resolves in seconds; then N clients (default
200) loop for a duration (default 600 s), each on its own keep-alive connection, picking a
request from a weighted mix:

* buffered streaming (tools, `stream: true`: the common OpenClaw turn), buffered JSON,
  passthrough streaming (no tools), passthrough JSON;
* now and then a client that leaves mid-stream (a buffered turn still waiting on upstream, or
  a passthrough stream half way);
* with probability `--fault-rate`, the request asks the fake for a fault: HTTP 429/500/503,
  an nginx HTML 502 page, a body cut mid-way, a stall after the first bytes, a silent upstream,
  a dropped connection, garbage instead of JSON, an empty body.

Every outcome is classified against what that request must produce (`Checker`): a normal
turn complete and exact (buffered: the `read` call extracted,
`finish_reason: tool_calls`, one stream id, `[DONE]` last; passthrough: the upstream's bytes,
byte for byte), a fault as OpenAI's error (HTTP status + `{"error": {...}}` before a stream
starts, or an error event then `[DONE]` inside one). Counted: ok, expected errors by kind,
UNEXPECTED by kind (with examples), lost turns (no complete answer and no error: a connection
closed without one, a stream without `[DONE]`, no answer within the client timeout).

Around the load: the RSS of the gunicorn master + workers (start after a warm-up, every few
seconds, peak, end under load, idle after), the proxy's CPU, requests/s and latency
percentiles per path; afterwards the proxy must still answer a plain buffered turn and a
passthrough request, `/proxy/health` must be 200, no request in flight, no upstream stream or
held connection left open, no worker restarted, no traceback in the gunicorn log.

Exit status 1 when anything unexpected happened, a turn was lost, or RSS grew by more than
both `--rss-growth-mib` (30 MiB) and `--rss-growth-pct` (20 %) between the first and the last
samples under load (medians of three, after the warm-up): a slow leak shows as growth, a
busy-but-stable heap does not.

    python -m tools.soak [--duration 600] [--clients 200] [--fault-rate 0.05] [--seed 1]
    python -m tools.soak --quick          # 30 s, 50 clients
    python -m tools.soak --json           # machine-readable report on stdout

The machine is small (two cores shared by the load generator, the fake and gunicorn): the
clients think between turns (`--think-ms`), and the report shows the load generator's own CPU
and event-loop lag so that a client-side stall is never mistaken for a proxy fault.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench import load
from bench.fake_upstream import (
    GARBAGE_BODY,
    HTML_BODY,
    FakeConfig,
    completion_body,
    cut_point,
    error_body,
    raise_fd_limit,
    stream_body,
    stream_events,
)
from bench.harness import TOOLS
from bench.stack import Stack, log

CHAT = "/v1/chat/completions"
PATHS = ("buffered_stream", "buffered_json", "passthrough_stream", "passthrough_json")
# Weights of what a client does next (an "abandon" is a streaming request the client leaves).
MIX = {"buffered_stream": 50, "buffered_json": 15, "passthrough_stream": 15,
       "passthrough_json": 15, "abandon": 5}
FAULTS = ("status_429", "status_500", "status_503", "html_502", "cut", "stall", "silent",
          "drop", "garbage", "empty")
MESSAGES = [
    {"role": "system", "content": "You are a coding agent. Use the tools to inspect files."},
    {"role": "user", "content": "Open /srv/app/main.py and tell me what the parser does."},
]
READ_ARGS = {"path": "/srv/app/main.py", "offset": 0, "limit": 200}
EXAMPLES_PER_KIND = 3
MIB = 1024 * 1024


# ---------------------------------------------------------------------------------------------
# What to send
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Spec:
    """One request: its path through the proxy, the fake's knobs, the fault, the client."""

    path: str
    cfg: FakeConfig
    fault: str = ""
    usage: bool = False
    abandon_after: float | None = None  # the client leaves after this many seconds

    @property
    def buffered(self) -> bool:
        """Sent with tools (the proxy asks upstream non-streaming and renders the answer)."""
        return self.path.startswith("buffered")

    @property
    def stream(self) -> bool:
        """The client asks for SSE."""
        return self.path.endswith("stream")

    @property
    def model(self) -> str:
        """The model name, carrying the fake's knobs (it survives the proxy unchanged)."""
        c = self.cfg
        spec = (f"delay_ms={c.delay_ms:g},size={c.size},kind={c.kind},chunks={c.chunks},"
                f"gap_ms={c.gap_ms:g}")
        if c.status != 200:
            spec += f",status={c.status}"
        if c.fault:
            spec += f",fault={c.fault}"
        return f"soak@{spec}"

    def body(self) -> bytes:
        """The JSON request body."""
        body: dict[str, Any] = {"model": self.model, "messages": MESSAGES, "max_tokens": 1024,
                                "stream": self.stream}
        if self.stream and self.usage:
            body["stream_options"] = {"include_usage": True}
        if self.buffered:
            body["tools"] = TOOLS
        return orjson.dumps(body)


def _fault_cfg(cfg: FakeConfig, fault: str) -> FakeConfig:
    """The fake's knobs for one of FAULTS."""
    if fault.startswith("status_"):
        return dataclasses.replace(cfg, status=int(fault[7:]))
    if fault == "html_502":
        return dataclasses.replace(cfg, fault="html", status=502)
    return dataclasses.replace(cfg, fault=fault)


def choose(rng: random.Random, fault_rate: float) -> Spec:
    """The next request of a client: a weighted path, shapes from small discrete sets (so the
    fake answers from its cache), and a fault with probability `fault_rate`."""
    path = rng.choices(list(MIX), weights=list(MIX.values()))[0]
    if path == "abandon":
        if rng.random() < 0.5:  # a buffered turn the client gives up on while upstream works
            cfg = FakeConfig(delay_ms=2500, size=1024, kind="tool")
            return Spec("buffered_stream", cfg, abandon_after=rng.uniform(0.7, 1.8))
        cfg = FakeConfig(delay_ms=20, size=4096, kind="text", chunks=40, gap_ms=50)
        return Spec("passthrough_stream", cfg, usage=rng.random() < 0.5,
                    abandon_after=rng.uniform(0.2, 1.5))
    if path.startswith("buffered"):
        kind = rng.choices(("tool", "native", "bigargs", "text"), weights=(70, 12, 10, 8))[0]
        cfg = FakeConfig(delay_ms=rng.choice((20, 20, 100, 300, 800)),
                         size=rng.choices((1024, 4096, 16384, 65536), weights=(50, 30, 15, 5))[0],
                         kind=kind)
    elif path == "passthrough_stream":
        cfg = FakeConfig(delay_ms=rng.choice((20, 100)), size=rng.choice((1024, 4096)),
                         kind="text", chunks=rng.choice((5, 20, 40)), gap_ms=rng.choice((10, 25)))
    else:
        cfg = FakeConfig(delay_ms=rng.choice((20, 20, 100, 300)),
                         size=rng.choice((1024, 4096, 16384)), kind=rng.choice(("text", "tool")))
    fault = rng.choice(FAULTS) if rng.random() < fault_rate else ""
    if fault:
        cfg = _fault_cfg(cfg, fault)
    return Spec(path, cfg, fault=fault, usage=rng.random() < 0.5)


# ---------------------------------------------------------------------------------------------
# What must come back
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one request ended: category (ok, expected, abandoned, unexpected, lost), a kind
    for counting, and a detail for the examples."""

    category: str
    kind: str
    detail: str = ""


class Checker:
    """Classifies results against the exact answers the fake gives (computed once per shape)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, bool], Any] = {}

    def _memo(self, key: tuple[str, str, bool], make: Callable[[], Any]) -> Any:
        value = self._cache.get(key)
        if value is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            value = self._cache[key] = make()
        return value

    def passthrough_bytes(self, spec: Spec) -> bytes:
        """The body a passthrough client must get, byte for byte (a complete answer)."""
        cfg = spec.cfg
        if cfg.status != 200 and not cfg.fault:
            return error_body(cfg.status)
        if cfg.fault == "html":
            return HTML_BODY
        if cfg.fault == "garbage":
            return GARBAGE_BODY
        if cfg.fault == "empty":
            return b""
        if spec.stream:
            return self._memo(("sse", spec.model, spec.usage),
                              lambda: stream_body(cfg, spec.model, spec.usage))
        return self._memo(("json", spec.model, False), lambda: completion_body(cfg, spec.model))

    def stream_prefix(self, spec: Spec) -> bytes:
        """What a passthrough stream carries before a `cut` or `stall` fault strikes."""
        clean = dataclasses.replace(spec.cfg, fault="")
        events, _, _ = stream_events(clean, spec.model)
        return b"".join(events[:2 + cut_point(clean)])

    def buffered_expectation(self, spec: Spec) -> dict[str, Any]:
        """The turn a buffered client must get: content, calls (name, parsed arguments) and
        finish_reason, derived from the fake's raw answer."""

        def make() -> dict[str, Any]:
            clean = dataclasses.replace(spec.cfg, fault="", status=200)
            message = orjson.loads(completion_body(clean, spec.model))["choices"][0]["message"]
            content = message["content"] or ""
            if spec.cfg.kind in ("tool", "native"):
                calls = [("read", READ_ARGS)]
            elif spec.cfg.kind == "bigargs":
                frame = content[content.index("<tool_call>") + 11:content.index("</tool_call>")]
                calls = [("write", orjson.loads(frame)["arguments"])]
            else:
                calls = []
            text = content.split("<tool_call>")[0] if calls else content
            return {"content": text.strip(), "calls": calls,
                    "finish": "tool_calls" if calls else "stop"}

        return self._memo(("buffered", spec.model, False), make)

    # -- the expected error of a fault -------------------------------------------------------
    @staticmethod
    def expected_error(spec: Spec) -> tuple[int, str] | None:
        """(HTTP status, error code) the proxy must answer a fault with, when it answers with
        an error (None: passthrough relays the upstream's answer as it is)."""
        cfg = spec.cfg
        fault = cfg.fault
        if spec.buffered:
            if fault == "html":
                return cfg.status, f"upstream_http_{cfg.status}"
            if cfg.status != 200 and not fault:
                return cfg.status, str(cfg.status)
            if fault in ("garbage", "empty"):
                return 502, "upstream_invalid_json"
            if fault == "cut":
                return 502, "upstream_cut"
            if fault == "drop":
                return 502, "upstream_unreachable"
            if fault in ("stall", "silent"):
                return 504, "upstream_timeout"
            return None
        if fault == "silent":
            return 504, "upstream_timeout"
        if fault == "drop":
            return 502, "upstream_unreachable"
        return None

    # -- classification -----------------------------------------------------------------------
    def classify(self, spec: Spec, r: load.Result, abandoned: bool) -> Outcome:
        """The outcome of one request."""
        try:
            return self._classify(spec, r, abandoned)
        except Exception as exc:  # a body we could not even parse
            return Outcome("unexpected", f"{spec.path}:unparseable",
                           f"{type(exc).__name__}: {exc}"[:200])

    def _classify(self, spec: Spec, r: load.Result, abandoned: bool) -> Outcome:
        path = spec.path
        label = f"{path}:{spec.fault or 'normal'}"
        if abandoned and r.error is not None:
            return Outcome("abandoned", f"{path}:left after "
                           f"{'first byte' if r.t_first_byte else 'no byte yet'}")
        if r.error == "timeout":
            return Outcome("lost", f"{label}:client_timeout",
                           f"status {r.status}, {r.nbytes} bytes, no end in time")
        if r.error is not None:
            return self._transport_error(spec, r, label)
        body = r.body or b""
        if spec.buffered:
            return self._buffered(spec, r, body, label)
        return self._passthrough(spec, r, body, label)

    def _transport_error(self, spec: Spec, r: load.Result, label: str) -> Outcome:
        """The connection ended before a complete response."""
        fault = spec.cfg.fault
        body = r.body or b""
        if (spec.path == "passthrough_json" and fault in ("cut", "stall") and r.status == 200
                and "closed" in (r.error or "")):
            # The head and a Content-Length went out before upstream failed: the client must
            # see a short body and the connection closed, never a complete-looking answer.
            full = completion_body(dataclasses.replace(spec.cfg, fault=""), spec.model)
            if full.startswith(body) and len(body) < len(full):
                return Outcome("expected", f"{label}:short body, connection closed")
            return Outcome("unexpected", f"{label}:short body differs", repr(body[:160]))
        what = "before any byte" if r.status == 0 else f"after status {r.status}"
        return Outcome("lost", f"{label}:{r.error} {what}", f"{r.nbytes} bytes")

    @staticmethod
    def _error_of(body: bytes) -> dict[str, Any] | None:
        """The `error` object of an OpenAI error body, None when the body is not one."""
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if (isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]
                and isinstance(error.get("type"), str)):
            return error
        return None

    def _check_http_error(self, r: load.Result, body: bytes, want: tuple[int, str],
                          label: str, buffered: bool) -> Outcome:
        status, code = want
        error = self._error_of(body)
        if r.status != status or error is None or str(error.get("code")) != code:
            got = error.get("code") if error else body[:120]
            return Outcome("unexpected", f"{label}:got {r.status} {got!r}, want {status} {code}",
                           repr(body[:200]))
        if buffered and not isinstance(error.get("code"), str):
            return Outcome("unexpected", f"{label}:error code not a string", repr(body[:200]))
        headers = r.headers or {}
        if status in (429, 503) and code == str(status) and b"retry-after" not in headers:
            return Outcome("unexpected", f"{label}:Retry-After not relayed", repr(headers))
        return Outcome("expected", f"{label}:HTTP {status} {code}")

    def _buffered(self, spec: Spec, r: load.Result, body: bytes, label: str) -> Outcome:
        want = self.expected_error(spec)
        if not r.sse:
            if want is not None:
                return self._check_http_error(r, body, want, label, buffered=True)
            if spec.stream:
                return Outcome("unexpected", f"{label}:not SSE (status {r.status})",
                               repr(body[:200]))
            if r.status != 200:
                return Outcome("unexpected", f"{label}:status {r.status}", repr(body[:200]))
            completion = orjson.loads(body)
            return self._compare_turn(spec, label, self._from_json(completion))
        if not spec.stream:
            return Outcome("unexpected", f"{label}:SSE for a JSON client", repr(body[:200]))
        if r.status != 200:
            return Outcome("unexpected", f"{label}:SSE with status {r.status}", repr(body[:200]))
        if not r.done or not body.endswith(b"data: [DONE]\n\n"):
            return Outcome("lost", f"{label}:stream without [DONE]", repr(body[-200:]))
        events = load.sse_events(body)
        if events.count("[DONE]") != 1:
            return Outcome("unexpected", f"{label}:[DONE] {events.count('[DONE]')} times")
        chunks = events[:-1]
        errors = [e for e in chunks if isinstance(e, dict) and "error" in e]
        others = [e for e in chunks if not (isinstance(e, dict) and "error" in e)]
        ids = {e.get("id") for e in others}
        if len(ids) > 1 or any(e.get("object") != "chat.completion.chunk" for e in others):
            return Outcome("unexpected", f"{label}:chunk ids or objects differ", repr(ids))
        if want is not None:
            if len(errors) != 1 or chunks[-1] is not errors[0]:
                return Outcome("unexpected", f"{label}:{len(errors)} error events, want 1 last",
                               repr(body[-300:]))
            error = errors[0]["error"]
            if str(error.get("code")) != want[1] or not error.get("message"):
                return Outcome("unexpected", f"{label}:in-stream {error.get('code')!r}, want "
                               f"{want[1]}", repr(error))
            turn = load.assemble(body)
            if turn["content"] or turn["tool_calls"] or turn["finish_reason"]:
                return Outcome("unexpected", f"{label}:part of a turn before the error",
                               repr(turn)[:200])
            return Outcome("expected", f"{label}:in-stream {want[1]}")
        if errors:
            code = errors[0]["error"].get("code")
            return Outcome("unexpected", f"{label}:in-stream error {code}", repr(errors[0])[:200])
        if spec.usage and not any(e.get("choices") == [] and e.get("usage") for e in others):
            return Outcome("unexpected", f"{label}:no usage chunk")
        return self._compare_turn(spec, label, load.assemble(body))

    @staticmethod
    def _from_json(completion: dict[str, Any]) -> dict[str, Any]:
        """A JSON completion in `load.assemble`'s shape."""
        choice = completion["choices"][0]
        message = choice["message"]
        calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                 for c in message.get("tool_calls") or ()]
        return {"content": message.get("content") or "", "tool_calls": calls,
                "finish_reason": choice.get("finish_reason"), "errors": []}

    def _compare_turn(self, spec: Spec, label: str, turn: dict[str, Any]) -> Outcome:
        want = self.buffered_expectation(spec)
        calls = []
        for call in turn["tool_calls"]:
            try:
                calls.append((call["name"], orjson.loads(call["arguments"])))
            except orjson.JSONDecodeError:
                return Outcome("unexpected", f"{label}:arguments not JSON",
                               repr(call["arguments"])[:200])
        if calls != want["calls"]:
            return Outcome("unexpected", f"{label}:tool calls differ", repr(calls)[:200])
        if turn["finish_reason"] != want["finish"]:
            return Outcome("unexpected", f"{label}:finish_reason {turn['finish_reason']!r}")
        if turn["content"].strip() != want["content"]:
            return Outcome("unexpected", f"{label}:content differs",
                           repr(turn["content"][:120]))
        return Outcome("ok", spec.path)

    def _passthrough(self, spec: Spec, r: load.Result, body: bytes, label: str) -> Outcome:
        fault = spec.cfg.fault
        want = self.expected_error(spec)
        if want is not None:
            return self._check_http_error(r, body, want, label, buffered=False)
        if spec.stream and fault in ("cut", "stall"):
            code = "upstream_stream_cut" if fault == "cut" else "upstream_timeout"
            prefix = self.stream_prefix(spec)
            if r.status != 200 or not r.sse or not body.startswith(prefix):
                return Outcome("unexpected", f"{label}:stream start differs", repr(body[:200]))
            if not r.done or not body.endswith(b"data: [DONE]\n\n"):
                return Outcome("lost", f"{label}:stream without [DONE]", repr(body[-200:]))
            rest = load.sse_events(body[len(prefix):])
            if (len(rest) != 2 or not isinstance(rest[0], dict) or "error" not in rest[0]
                    or rest[0]["error"].get("code") != code):
                return Outcome("unexpected", f"{label}:want in-stream {code} then [DONE]",
                               repr(body[len(prefix):])[:300])
            return Outcome("expected", f"{label}:in-stream {code}")
        expected = self.passthrough_bytes(spec)
        status = spec.cfg.status if (spec.cfg.status != 200 and fault in ("", "html")) else 200
        if r.status != status or body != expected:
            return Outcome("unexpected" if r.status else "lost",
                           f"{label}:not relayed as sent (status {r.status}, "
                           f"{len(body)} of {len(expected)} bytes)", repr(body[:160]))
        if spec.stream and not spec.fault and not r.done:
            return Outcome("lost", f"{label}:stream without [DONE]")
        if spec.fault:
            return Outcome("expected", f"{label}:relayed {status}")
        return Outcome("ok", spec.path)


# ---------------------------------------------------------------------------------------------
# Tally
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Tally:
    """Every outcome, counted; latencies of complete answers per path; a few examples."""

    categories: Counter[str] = dataclasses.field(default_factory=Counter)
    kinds: dict[str, Counter[str]] = dataclasses.field(
        default_factory=lambda: defaultdict(Counter))
    by_path: dict[str, Counter[str]] = dataclasses.field(
        default_factory=lambda: defaultdict(Counter))
    latency: dict[str, list[float]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    ttfb: dict[str, list[float]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    examples: dict[str, list[str]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    faults_asked: Counter[str] = dataclasses.field(default_factory=Counter)

    def add(self, spec: Spec, r: load.Result, outcome: Outcome, request_id: str) -> None:
        """Count one request."""
        path = spec.path if spec.abandon_after is None else f"{spec.path} (left)"
        self.categories[outcome.category] += 1
        self.kinds[outcome.category][outcome.kind] += 1
        self.by_path[path][outcome.category] += 1
        if spec.fault:
            self.faults_asked[spec.fault] += 1
        if outcome.category in ("ok", "expected") and r.total is not None:
            self.latency[path].append(r.total)
            if r.ttfb is not None:
                self.ttfb[path].append(r.ttfb)
        if outcome.category in ("unexpected", "lost"):
            shown = self.examples[outcome.kind]
            if len(shown) < EXAMPLES_PER_KIND:
                shown.append(f"{request_id} model={spec.model} {outcome.detail}"[:400])

    @property
    def total(self) -> int:
        """Requests counted."""
        return sum(self.categories.values())


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Sample:
    """One RSS reading of the gunicorn master + workers."""

    t: float
    rss: int
    workers: dict[int, int]
    load: bool  # taken while the clients were running (after the warm-up)


class Soak:
    """The clients, the samplers and the figures of one run."""

    def __init__(self, opts: argparse.Namespace, proxy_url: str, fake_url: str,
                 master: int) -> None:
        self.opts = opts
        self.proxy_url = proxy_url
        self.fake_url = fake_url
        self.master = master
        self.checker = Checker()
        self.tally = Tally()
        self.samples: list[Sample] = []
        self.lags: list[float] = []
        self.t0 = 0.0
        self.end = 0.0
        self.warm = 0.0
        self.sent = 0
        self.in_flight = 0
        self.load_wall = 0.0
        self.client_cpu = 0.0
        self.proxy_cpu = 0.0
        lo, _, hi = opts.think_ms.partition("-")
        self.think = (float(lo) / 1000, float(hi or lo) / 1000)

    async def client(self, k: int) -> None:
        """One agent: a keep-alive connection, turn after turn, until the end."""
        rng = random.Random(self.opts.seed * 1_000_003 + k)
        host, port = load.host_port(self.proxy_url)
        url = self.proxy_url + CHAT
        await asyncio.sleep(self.opts.ramp * k / max(1, self.opts.clients))
        conn: load.HttpConnection | None = None
        n = 0
        try:
            while time.monotonic() < self.end:
                spec = choose(rng, self.opts.fault_rate)
                request_id = f"soak-{k}-{n}"
                n += 1
                raw = load.build_request("POST", url, spec.body(),
                                         headers={"X-Request-Id": request_id})
                if conn is None or conn.closed:
                    try:
                        conn = await asyncio.wait_for(load.connect(host, port), 10)
                    except (TimeoutError, OSError) as exc:
                        result = load.Result(t_start=time.perf_counter(), error="connect")
                        outcome = Outcome("lost", f"{spec.path}:connect failed", repr(exc))
                        self.tally.add(spec, result, outcome, request_id)
                        conn = None
                        await asyncio.sleep(0.5)
                        continue
                self.sent += 1
                self.in_flight += 1
                try:
                    result, abandoned = await self._one(conn, raw, spec)
                finally:
                    self.in_flight -= 1
                self.tally.add(spec, result, self.checker.classify(spec, result, abandoned),
                               request_id)
                await asyncio.sleep(rng.uniform(*self.think))
        finally:
            if conn is not None:
                conn.close()

    async def _one(self, conn: load.HttpConnection, raw: bytes,
                   spec: Spec) -> tuple[load.Result, bool]:
        """Send one request; leave mid-way when the spec says so."""
        future = conn.request(raw, timeout=self.opts.client_timeout, keep_body=True)
        if spec.abandon_after is None:
            return await future, False
        done, _ = await asyncio.wait({future}, timeout=spec.abandon_after)
        if done:
            return future.result(), False
        conn.close()
        return await future, True

    async def sampler(self) -> None:
        """RSS of master + workers every `--sample-every` seconds until the end."""
        while time.monotonic() < self.end:
            self.sample(under_load=time.monotonic() >= self.warm)
            await asyncio.sleep(self.opts.sample_every)

    def sample(self, *, under_load: bool) -> Sample:
        """Read the RSS now (the total, and each worker's)."""
        workers = {pid: _rss_one(pid) for pid in load.descendants(self.master)
                   if pid != self.master}
        s = Sample(time.monotonic() - self.t0, load.rss_bytes(self.master), workers, under_load)
        self.samples.append(s)
        return s

    async def lag_monitor(self) -> None:
        """How late the event loop wakes up (a late loop would fake timeouts)."""
        step = 0.1
        while time.monotonic() < self.end:
            before = time.monotonic()
            await asyncio.sleep(step)
            self.lags.append(max(0.0, time.monotonic() - before - step))

    async def progress(self) -> None:
        """A line on stderr every `--progress` seconds."""
        last_n, last_t = 0, time.monotonic()
        while time.monotonic() < self.end:
            await asyncio.sleep(min(self.opts.progress, max(0.1, self.end - time.monotonic())))
            now = time.monotonic()
            c = self.tally.categories
            rate = (self.tally.total - last_n) / max(1e-9, now - last_t)
            last_n, last_t = self.tally.total, now
            rss = self.samples[-1].rss / MIB if self.samples else math.nan
            log(f"[{now - self.t0:5.0f} s] {self.tally.total} requests ({rate:.0f}/s), "
                f"ok {c['ok']}, expected {c['expected']}, abandoned {c['abandoned']}, "
                f"UNEXPECTED {c['unexpected']}, LOST {c['lost']}; in flight {self.in_flight}; "
                f"RSS {rss:.1f} MiB")

    async def run(self) -> None:
        """The load, with its samplers, for `--duration` seconds (then in-flight turns end)."""
        self.t0 = time.monotonic()
        self.end = self.t0 + self.opts.duration
        self.warm = self.t0 + self.opts.warmup
        cpu0 = time.process_time()
        proxy_cpu0 = load.cpu_seconds(self.master)
        helpers = [asyncio.create_task(t) for t in (self.sampler(), self.lag_monitor(),
                                                     self.progress())]
        await asyncio.gather(*(self.client(k) for k in range(self.opts.clients)))
        self.sample(under_load=True)  # the last reading under load (the in-flight tail just ended)
        self.load_wall = time.monotonic() - self.t0
        self.client_cpu = time.process_time() - cpu0
        self.proxy_cpu = load.cpu_seconds(self.master) - proxy_cpu0
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)


def _rss_one(pid: int) -> int:
    """The RSS of one process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


# ---------------------------------------------------------------------------------------------
# After the load: nothing stuck, nothing leaked
# ---------------------------------------------------------------------------------------------
async def _get_json(url: str, timeout: float = 10.0) -> tuple[int, Any]:
    """GET a JSON (or text) resource: (status, parsed body or raw bytes)."""
    result = await load.simple(url, timeout=timeout)
    if result.error is not None:
        return 0, result.error
    try:
        return result.status, orjson.loads(result.body or b"")
    except orjson.JSONDecodeError:
        return result.status, result.body or b""


def metric_values(text: bytes, name: str) -> float:
    """The sum of every sample of one metric in a Prometheus exposition."""
    total = 0.0
    prefix = name.encode()
    for line in text.splitlines():
        if line.startswith(prefix) and line[len(prefix):len(prefix) + 1] in (b"{", b" "):
            with contextlib.suppress(ValueError, IndexError):
                total += float(line.rsplit(b" ", 1)[1])
    return total


async def fake_requests(soak: Soak) -> int:
    """The fake's request counter (this request included; the proxy's own profile reads
    not), -1 when it does not answer."""
    _, stats = await _get_json(soak.fake_url + "/fake/stats")
    if not isinstance(stats, dict):
        return -1
    return int(stats.get("requests", -1)) - int(stats.get("info", 0))


async def settle(soak: Soak, limit: float, fake_before: int) -> dict[str, Any]:
    """Wait until the fake has no stream or held connection open and the proxy no request
    in flight; report what was still open when the limit passed, and how many requests the
    upstream saw (each client request must reach it exactly once: no retry, none dropped)."""
    deadline = time.monotonic() + limit
    state: dict[str, Any] = {}
    polls = 0
    while True:
        _, stats = await _get_json(soak.fake_url + "/fake/stats")
        polls += 1
        stats = stats if isinstance(stats, dict) else {}
        metrics = await load.simple(soak.proxy_url + "/proxy/metrics")
        in_flight = metric_values(metrics.body or b"", "toolcall_proxy_in_flight_requests")
        state = {"fake_open_streams": stats.get("open_streams"),
                 "fake_held_connections": stats.get("holding"),
                 "proxy_in_flight": in_flight,
                 "proxy_requests_counted": metric_values(metrics.body or b"",
                                                         "toolcall_proxy_requests_total"),
                 # the clients' requests: not the polls, nor the proxy's own profile reads
                 "upstream_requests_seen": (stats.get("requests", 0) - stats.get("info", 0)
                                            - fake_before - polls),
                 "upstream_disconnects_seen": stats.get("disconnects"),
                 "upstream_faults_served": stats.get("faults")}
        if (state["fake_open_streams"] == 0 and state["fake_held_connections"] == 0
                and in_flight == 0 and state["proxy_requests_counted"] >= soak.sent):
            break
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.25)
    state["settle_seconds"] = round(limit - max(0.0, deadline - time.monotonic()), 1)
    return state


async def after_checks(soak: Soak) -> dict[str, str]:
    """A plain turn of each kind through the proxy, and its health: each "ok" or a reason."""
    checks: dict[str, str] = {}
    plain = {
        "buffered turn (stream)": Spec("buffered_stream", FakeConfig(delay_ms=20, kind="tool"),
                                       usage=True),
        "buffered turn (JSON)": Spec("buffered_json", FakeConfig(delay_ms=20, kind="tool")),
        "passthrough stream": Spec("passthrough_stream",
                                   FakeConfig(delay_ms=20, kind="text", chunks=5, gap_ms=10)),
        "passthrough JSON": Spec("passthrough_json", FakeConfig(delay_ms=20, kind="text")),
    }
    for name, spec in plain.items():
        result = await load.simple(soak.proxy_url + CHAT, "POST", spec.body(), timeout=15)
        outcome = soak.checker.classify(spec, result, abandoned=False)
        checks[name] = "ok" if outcome.category == "ok" else f"{outcome.kind} {outcome.detail}"
    for name, url in (("/proxy/health", "/proxy/health"),
                      ("/proxy/health?upstream=1", "/proxy/health?upstream=1")):
        status, _ = await _get_json(soak.proxy_url + url)
        checks[name] = "ok" if status == 200 else f"status {status}"
    return checks


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def _median(values: list[float]) -> float:
    data = sorted(values)
    if not data:
        return math.nan
    mid = len(data) // 2
    return data[mid] if len(data) % 2 else (data[mid - 1] + data[mid]) / 2


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points (0 for fewer than two)."""
    if len(points) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def rss_figures(samples: list[Sample], idle: Sample | None) -> dict[str, Any]:
    """Start (after the warm-up), peak, end (under load), idle; growth and trend, in MiB."""
    loaded = [s for s in samples if s.load] or samples
    start = _median([s.rss for s in loaded[:3]]) / MIB
    end = _median([s.rss for s in loaded[-3:]]) / MIB
    peak = max(s.rss for s in samples) / MIB
    growth = end - start
    first = loaded[0].workers if loaded else {}
    last = loaded[-1].workers if loaded else {}
    return {
        "start_mib": round(start, 1), "peak_mib": round(peak, 1), "end_mib": round(end, 1),
        "idle_mib": round(idle.rss / MIB, 1) if idle else None,
        "growth_mib": round(growth, 1),
        "growth_pct": round(100 * growth / start, 1) if start else 0.0,
        "trend_mib_per_min": round(_slope([(s.t / 60, s.rss / MIB) for s in loaded]), 2),
        "samples": len(samples),
        "start_s": round(loaded[0].t, 1) if loaded else None,
        "workers_start_mib": {str(p): round(v / MIB, 1) for p, v in first.items()},
        "workers_end_mib": {str(p): round(v / MIB, 1) for p, v in last.items()},
    }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1) if not math.isnan(seconds) else math.nan


def build_report(soak: Soak, opts: argparse.Namespace, settled: dict[str, Any],
                 checks: dict[str, str], rss: dict[str, Any], workers_before: list[int],
                 workers_after: list[int], log_problems: list[str],
                 command: str) -> dict[str, Any]:
    """Every figure of the run, and the reasons it fails (empty when it passes)."""
    tally = soak.tally
    by_path = {}
    for path in sorted(tally.by_path):
        counts = tally.by_path[path]
        lat = tally.latency.get(path, [])
        by_path[path] = {
            "n": sum(counts.values()), **{c: counts.get(c, 0) for c in
                                           ("ok", "expected", "abandoned", "unexpected", "lost")},
            "p50_ms": _ms(load.percentile(lat, 50)), "p99_ms": _ms(load.percentile(lat, 99)),
            "max_ms": _ms(max(lat)) if lat else math.nan,
            "ttfb_p50_ms": _ms(load.percentile(tally.ttfb.get(path, []), 50)),
            "ttfb_p99_ms": _ms(load.percentile(tally.ttfb.get(path, []), 99)),
        }
    total = tally.total
    lags = soak.lags
    failures: list[str] = []
    cats = tally.categories
    if cats["unexpected"]:
        failures.append(f"{cats['unexpected']} unexpected outcomes")
    if cats["lost"]:
        failures.append(f"{cats['lost']} lost turns")
    if total == 0:
        failures.append("no request completed")
    if rss["growth_mib"] > opts.rss_growth_mib and rss["growth_pct"] > opts.rss_growth_pct:
        failures.append(f"RSS grew {rss['growth_mib']} MiB ({rss['growth_pct']} %) under load "
                        f"(limit: > {opts.rss_growth_mib} MiB and > {opts.rss_growth_pct} %)")
    for name, verdict in checks.items():
        if verdict != "ok":
            failures.append(f"after the run, {name}: {verdict}")
    if settled.get("fake_open_streams") != 0 or settled.get("fake_held_connections") != 0:
        failures.append(f"upstream connections left open after the run: {settled}")
    if settled.get("proxy_in_flight") != 0:
        failures.append(f"proxy requests still in flight after the run: {settled}")
    if settled.get("proxy_requests_counted") != soak.sent:
        failures.append(f"the proxy counted {settled.get('proxy_requests_counted')} requests, "
                        f"the clients sent {soak.sent}")
    if settled.get("upstream_requests_seen") != soak.sent:
        failures.append(f"the upstream saw {settled.get('upstream_requests_seen')} requests, "
                        f"the clients sent {soak.sent}")
    if sorted(workers_before) != sorted(workers_after):
        failures.append(f"workers changed (restarted?): {workers_before} -> {workers_after}")
    if log_problems:
        failures.append(f"{len(log_problems)} problem lines in the gunicorn log")
    return {
        "command": command,
        "duration_s": opts.duration, "clients": opts.clients, "fault_rate": opts.fault_rate,
        "seed": opts.seed, "think_ms": opts.think_ms, "client_timeout_s": opts.client_timeout,
        "proxy_config": proxy_settings(opts),
        "load_wall_s": round(soak.load_wall, 1),
        "requests": total, "rps": round(total / soak.load_wall, 1) if soak.load_wall else 0,
        "categories": {c: cats.get(c, 0) for c in
                       ("ok", "expected", "abandoned", "unexpected", "lost")},
        "faults_asked": dict(sorted(tally.faults_asked.items())),
        "by_kind": {c: dict(sorted(tally.kinds[c].items())) for c in
                    ("expected", "abandoned", "unexpected", "lost")},
        "examples": dict(tally.examples),
        "by_path": by_path,
        "rss": rss,
        "proxy_cpu": {"seconds": round(soak.proxy_cpu, 1),
                      "cores": round(soak.proxy_cpu / soak.load_wall, 2) if soak.load_wall else 0,
                      "ms_per_request": round(1000 * soak.proxy_cpu / max(1, total), 2)},
        "load_generator": {
            "cpu_share": round(soak.client_cpu / soak.load_wall, 2) if soak.load_wall else 0,
            "loop_lag_p99_ms": _ms(load.percentile(lags, 99)),
            "loop_lag_max_ms": _ms(max(lags)) if lags else 0.0},
        "after": {"settled": settled, "checks": checks,
                  "workers_before": workers_before, "workers_after": workers_after,
                  "gunicorn_log_problems": log_problems[:5],
                  "gunicorn_log_problem_count": len(log_problems)},
        "failures": failures,
        "pass": not failures,
    }


def report_text(rep: dict[str, Any]) -> str:
    """The report for a person."""
    out: list[str] = []
    add = out.append
    cats = rep["categories"]
    add(f"Soak: {rep['clients']} clients for {rep['duration_s']:g} s, fault rate "
        f"{rep['fault_rate']:g}, seed {rep['seed']}, think {rep['think_ms']} ms "
        f"(gunicorn -c deploy/gunicorn.conf.py, gevent)")
    add(f"command: {rep['command']}")
    add(f"requests: {rep['requests']} in {rep['load_wall_s']:g} s ({rep['rps']:g}/s): ok "
        f"{cats['ok']}, expected errors {cats['expected']}, abandoned by the client "
        f"{cats['abandoned']}, UNEXPECTED {cats['unexpected']}, LOST {cats['lost']}")
    add("")
    add(f"{'path':<28}{'n':>8}{'ok':>8}{'expect':>8}{'left':>7}{'unexp':>7}{'lost':>6}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'ttfb p99':>10}")
    for path, row in rep["by_path"].items():
        times = "".join(f"{'-' if math.isnan(row[k]) else f'{row[k]:.1f}':>{w}}" for k, w in
                        (("p50_ms", 9), ("p99_ms", 9), ("max_ms", 9), ("ttfb_p99_ms", 10)))
        add(f"{path:<28}{row['n']:>8}{row['ok']:>8}{row['expected']:>8}{row['abandoned']:>7}"
            f"{row['unexpected']:>7}{row['lost']:>6}{times}")
    for category, title in (("expected", "expected errors by kind"),
                            ("abandoned", "left by the client"),
                            ("unexpected", "UNEXPECTED by kind"), ("lost", "LOST turns by kind")):
        kinds = rep["by_kind"][category]
        add("")
        add(f"{title}:" + ("" if kinds else " none"))
        for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])):
            add(f"  {n:>7}  {kind}")
            for example in rep["examples"].get(kind, []):
                add(f"           e.g. {example}")
    rss = rep["rss"]
    add("")
    add(f"RSS master+workers: start {rss['start_mib']} MiB (at {rss['start_s']} s, after the "
        f"warm-up), peak {rss['peak_mib']}, end {rss['end_mib']} (under load), idle "
        f"{rss['idle_mib']} after; growth {rss['growth_mib']:+} MiB ({rss['growth_pct']:+} %), "
        f"trend {rss['trend_mib_per_min']:+} MiB/min over {rss['samples']} samples")
    add(f"  workers start {rss['workers_start_mib']} → end {rss['workers_end_mib']} MiB")
    cpu = rep["proxy_cpu"]
    gen = rep["load_generator"]
    add(f"proxy CPU: {cpu['seconds']} s ({cpu['cores']} cores), {cpu['ms_per_request']} ms per "
        f"request; load generator: {gen['cpu_share'] * 100:.0f} % of a core, event-loop lag p99 "
        f"{gen['loop_lag_p99_ms']} ms, max {gen['loop_lag_max_ms']} ms")
    after = rep["after"]
    add(f"after the run: settled in {after['settled'].get('settle_seconds')} s "
        f"(fake open streams {after['settled'].get('fake_open_streams')}, held connections "
        f"{after['settled'].get('fake_held_connections')}; proxy in flight "
        f"{after['settled'].get('proxy_in_flight'):g}, requests counted "
        f"{after['settled'].get('proxy_requests_counted'):g}; upstream saw "
        f"{after['settled'].get('upstream_requests_seen')} requests, "
        f"{after['settled'].get('upstream_disconnects_seen')} disconnects)")
    add("  " + "; ".join(f"{name}: {verdict}" for name, verdict in after["checks"].items()))
    add(f"  workers {after['workers_before']} → {after['workers_after']}; gunicorn log problem "
        f"lines: {after['gunicorn_log_problem_count']}")
    for line in after["gunicorn_log_problems"]:
        add(f"    {line[:200]}")
    add("")
    if rep["pass"]:
        add("RESULT: PASS")
    else:
        add("RESULT: FAIL")
        for reason in rep["failures"]:
            add(f"  - {reason}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------
def proxy_settings(opts: argparse.Namespace) -> dict[str, Any]:
    """The proxy's config file for the soak: short upstream timeouts (a silent upstream ends
    in seconds), heartbeats every second, everything else as shipped."""
    return {"connect_timeout_seconds": 2.0,
            "read_timeout_seconds": opts.upstream_timeout,
            "buffered_timeout_seconds": opts.upstream_timeout + 1.0,
            "commit_window_seconds": 0.5,
            "heartbeat_seconds": 1.0,
            "log_level": opts.log_level}


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The flags; unset timings follow from the duration."""
    p = argparse.ArgumentParser(prog="python -m tools.soak",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=None, help="seconds of load (600)")
    p.add_argument("--clients", type=int, default=None, help="concurrent clients (200)")
    p.add_argument("--fault-rate", type=float, default=0.05,
                   help="share of requests that ask the fake for a fault (0.05)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="30 s with 50 clients")
    p.add_argument("--think-ms", default="20-300",
                   help="a client's pause between turns, uniform in LO-HI ms (20-300)")
    p.add_argument("--client-timeout", type=float, default=60.0,
                   help="seconds a client waits for a whole answer before counting it lost")
    p.add_argument("--upstream-timeout", type=float, default=5.0,
                   help="the proxy's read timeout (buffered: this + 1 s)")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds before the first RSS reading (10 %% of the run, ≤ 60)")
    p.add_argument("--sample-every", type=float, default=None, help="RSS period, seconds")
    p.add_argument("--progress", type=float, default=None, help="progress line period")
    p.add_argument("--ramp", type=float, default=None, help="seconds to start every client")
    p.add_argument("--rss-growth-mib", type=float, default=30.0)
    p.add_argument("--rss-growth-pct", type=float, default=20.0)
    p.add_argument("--workers", type=int, default=2, help="gunicorn workers (2)")
    p.add_argument("--conf", default="deploy/gunicorn.conf.py", help="gunicorn config file")
    p.add_argument("--log-level", default="info", help="the proxy's log level (info)")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    p.add_argument("--keep-logs", action="store_true", help="keep the gunicorn and fake logs")
    opts = p.parse_args(argv)
    if opts.duration is None:
        opts.duration = 30.0 if opts.quick else 600.0
    if opts.clients is None:
        opts.clients = 50 if opts.quick else 200
    d = opts.duration
    if opts.warmup is None:
        opts.warmup = min(60.0, max(0.5, d / 10))
    if opts.sample_every is None:
        opts.sample_every = max(0.5, min(5.0, d / 60))
    if opts.progress is None:
        opts.progress = min(30.0, max(2.0, d / 10))
    if opts.ramp is None:
        opts.ramp = min(5.0, d / 4)
    if not 0 <= opts.fault_rate <= 1:
        p.error("--fault-rate must be between 0 and 1")
    return opts


async def _measure(soak: Soak, stack: Stack, opts: argparse.Namespace,
                   command: str) -> dict[str, Any]:
    """The load, then the checks after it; the report."""
    workers_before = sorted(p for p in load.descendants(soak.master) if p != soak.master)
    fake_before = await fake_requests(soak)
    await soak.run()
    settled = await settle(soak, max(15.0, 3 * opts.upstream_timeout), fake_before)
    idle = soak.sample(under_load=False)
    checks = await after_checks(soak)
    workers_after = sorted(p for p in load.descendants(soak.master) if p != soak.master)
    rss = rss_figures(soak.samples[:-1], idle)
    return build_report(soak, opts, settled, checks, rss, workers_before, workers_after,
                        stack.log_problems(), command)


def main(argv: list[str] | None = None) -> int:
    """Start the fake and gunicorn, drive the load, check, report, stop."""
    args_list = sys.argv[1:] if argv is None else argv
    opts = parse_args(args_list)
    from bench.stack import terminate_as_interrupt

    raise_fd_limit()
    stack = Stack(argparse.Namespace(conf=opts.conf, app="app:app", worker_class="",
                                     workers=opts.workers, threads=0, worker_connections=0,
                                     keep_logs=opts.keep_logs))
    config_path = Path(stack.tmp) / "soak-config.json"
    config_path.write_bytes(orjson.dumps(proxy_settings(opts)))
    os.environ["TOOLCALL_PROXY_CONFIG"] = str(config_path)
    command = "python -m tools.soak " + " ".join(args_list)
    with terminate_as_interrupt():
        try:
            stack.start_fake()
            stack.start_proxy()
            assert stack.proxy is not None
            log(f"soak: {opts.clients} clients for {opts.duration:g} s, fault rate "
                f"{opts.fault_rate:g}; logs in {stack.tmp}")
            soak = Soak(opts, stack.proxy_url, stack.fake_url, stack.proxy.pid)
            report = asyncio.run(_measure(soak, stack, opts, command.strip()))
        except KeyboardInterrupt:
            log("interrupted: stopping what was started")
            stack.stop()
            return 130
        except Exception:
            if stack.proxy is not None:
                log(stack.proxy.log_tail())
            stack.opts.keep_logs = True
            stack.stop()
            raise
        if not report["pass"]:
            stack.opts.keep_logs = True  # the logs explain the failure
        stack.stop()
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() if opts.json
          else report_text(report))
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
