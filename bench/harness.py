"""The benchmark's harness: the requests it sends (`chat_body`, `responses_body`,
`messages_body`), each side's accumulated batches (`Side`), and `Bench`, which measures the
proxy against the direct connection and holds the rows, details and notes; its own sections
(buffered, stream, json, messages, held, heldbuf, extract) are its methods. The sections of
their own modules (`streamed`, `reask`, `store_backends`, `replicas`, `status`,
`prefix_cache`) are handed a `Bench`; `bench.run` runs them all. Nothing here imports a
section: the imports run one way, from `run` down."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from bench import load
from bench.fake_upstream import parse_size
from bench.stack import Stack, log
from bench.table import Row, limit_row, ms, ratio_of, ratio_row

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
# Issue 46's targets for the buffered tool turn at c8 behind a 20 ms upstream: p50 and p99
# as ratios to the direct connection, by answer size; and its server CPU per 1 KB turn.
BUFFERED_TARGETS = {"1k": (1.10, 1.30), "64k": (1.15, 1.40)}
TURN_CPU_TARGET = 0.0014  # seconds

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "read", "description": "Read a file from the workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "offset": {"type": "integer"},
            "limit": {"type": "integer"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write", "description": "Write a file.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "exec", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}}},
]
MESSAGES = [
    {"role": "system", "content": "You are a coding agent. Use the tools to inspect files."},
    {"role": "user", "content": "Open /srv/app/main.py and tell me what the parser does."},
]


def chat_body(spec: str, *, stream: bool, tools: bool) -> bytes:
    """A chat completion request whose model name carries the fake's knobs (`bench@spec`)."""
    body: dict[str, Any] = {"model": f"bench@{spec}", "messages": MESSAGES, "max_tokens": 512,
                            "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = TOOLS
    return orjson.dumps(body)


def responses_body(spec: str) -> bytes:
    """The same turn as a Responses request, as Codex sends it (streamed, `store: false`)."""
    tools = [{"type": "function", "name": t["function"]["name"],
              "description": t["function"]["description"],
              "parameters": t["function"]["parameters"], "strict": False} for t in TOOLS]
    return orjson.dumps({
        "model": f"bench@{spec}", "instructions": MESSAGES[0]["content"],
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": MESSAGES[1]["content"]}]}],
        "tools": tools, "max_output_tokens": 512, "stream": True, "store": False})


def messages_body(spec: str) -> bytes:
    """`chat_body`'s tool turn as an Anthropic Messages request (the client streams)."""
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in TOOLS]
    return orjson.dumps({"model": f"bench@{spec}", "system": MESSAGES[0]["content"],
                         "messages": MESSAGES[1:], "max_tokens": 512, "stream": True,
                         "tools": tools})


@dataclasses.dataclass
class Side:
    """Accumulated batches of one side (direct or proxy) of a scenario."""

    batch: load.Batch | None = None
    server_cpu: float = 0.0  # seconds of the measured server tree

    def add(self, batch: load.Batch, cpu: float) -> None:
        """Merge one round."""
        if self.batch is None:
            self.batch = batch
        else:
            self.batch.extend(batch)
        self.server_cpu += cpu

    def stats(self) -> dict[str, float]:
        """`load.summarize` of all rounds."""
        assert self.batch is not None
        return load.summarize(self.batch)

    def cpu_per_request(self) -> float:
        """Server CPU seconds per successful request."""
        if self.batch is None:
            return math.nan
        n = sum(1 for r in self.batch.results if r.ok)
        return self.server_cpu / n if n else math.nan


class Bench:
    """Runs the sections and collects rows, details and notes."""

    def __init__(self, opts: argparse.Namespace, stack: Stack) -> None:
        self.opts = opts
        self.stack = stack
        self.rows: list[Row] = []
        self.details: list[str] = []
        self.notes: list[str] = []
        q = opts.quick
        self.rounds = opts.rounds or (1 if q else 3)
        self.batch_s = opts.batch_seconds or (0.4 if q else 1.0)
        self.held_s = opts.held_seconds or (6 if q else 30)
        self.cpu_rows: list[Row] = []
        self.turn_cpu: float | None = None  # server CPU per buffered 1 KB turn, when measured

    # -- plumbing ---------------------------------------------------------------------------
    def section(self, title: str) -> None:
        """A sub-heading row."""
        self.rows.append(Row(f"**{title}**", "", "", "", "", ""))

    def detail(self, label: str, side: str, batch: load.Batch, cpu_per_req: float) -> None:
        """One line of the detail table (and of the progress log)."""
        s = load.summarize(batch)
        line = (f"| {label} | {side} | {s['n']:.0f} | {s['errors']:.0f} | {s['rps']:.1f} | "
                f"{ms(s['ttfb_p50'])} | {ms(s['ttfb_p99'])} | {ms(s['total_p50'])} | "
                f"{ms(s['total_p99'])} | {ms(s['gap_p50'])} | {ms(s['gap_p99'])} | "
                f"{ms(cpu_per_req)} | {s['client_cpu_share'] * 100:.0f}% |")
        self.details.append(line)
        if side == "direct" and s["client_cpu_share"] > 0.9:
            self.notes.append(f"{label}: the load generator used {s['client_cpu_share']:.0%} of "
                              "a core on the direct side: the direct figure is client-bound")
        errors = load.first_errors(batch)
        log(f"  {label} [{side}] n={s['n']:.0f} err={s['errors']:.0f} rps={s['rps']:.0f} "
            f"ttfb={ms(s['ttfb_p50'])}/{ms(s['ttfb_p99'])} "
            f"total={ms(s['total_p50'])}/{ms(s['total_p99'])} "
            f"gap={ms(s['gap_p50'])}/{ms(s['gap_p99'])} cpu/req={ms(cpu_per_req)} "
            f"client={s['client_cpu_share'] * 100:.0f}%" + (f" {errors}" if errors else ""))

    def server_cpu(self, side: str) -> float:
        """CPU seconds so far of the process tree that serves `side`."""
        proc = self.stack.proxy if side == "proxy" else self.stack.fake
        return load.cpu_seconds(proc.pid) if proc is not None else 0.0

    def url(self, side: str) -> str:
        """The chat completions URL of one side."""
        return (self.stack.proxy_url if side == "proxy" else self.stack.fake_url) + CHAT

    async def compare(self, label: str, body: bytes, *, concurrency: int, duration: float,
                      min_requests: int = 30, timeout: float = 60.0, stagger: float = 0.0,
                      max_requests: int = 1_000_000,
                      proxy_request: tuple[str, bytes] | None = None) -> tuple[Side, Side]:
        """Interleaved rounds of direct and proxy batches of the same request (or, with
        `proxy_request`, of another front's path and body to the proxy)."""
        sides = {"direct": Side(), "proxy": Side()}
        urls = {side: self.url(side) for side in sides}
        bodies = {side: body for side in sides}
        if proxy_request is not None:
            urls["proxy"] = self.stack.proxy_url + proxy_request[0]
            bodies["proxy"] = proxy_request[1]
        raw = {side: load.build_request("POST", urls[side], bodies[side]) for side in sides}
        for side in sides:  # warm-up: connections, the fake's caches, the workers' imports
            await load.closed_loop(urls[side], lambda _i, s=side: raw[s],
                                   concurrency=concurrency,
                                   duration=min(0.3, duration), max_duration=10,
                                   timeout=timeout)
        for rnd in range(self.rounds):
            order = ("direct", "proxy") if rnd % 2 == 0 else ("proxy", "direct")
            for side in order:
                cpu0 = self.server_cpu(side)
                batch = await load.closed_loop(
                    urls[side], lambda _i, s=side: raw[s], concurrency=concurrency,
                    duration=duration, min_requests=max(1, min_requests // self.rounds),
                    max_duration=max(duration * 4, 3.0), timeout=timeout, stagger=stagger,
                    max_requests=max_requests)
                sides[side].add(batch, self.server_cpu(side) - cpu0)
        for side, acc in sides.items():
            assert acc.batch is not None
            self.detail(label, side, acc.batch, acc.cpu_per_request())
        return sides["direct"], sides["proxy"]

    async def check_buffered(self, body: bytes) -> str:
        """'' when the proxy turns the fake's Hermes text into a `read` tool call, else why."""
        result = await load.simple(self.url("proxy"), "POST", body, timeout=60)
        if not result.ok or result.body is None:
            return f"request failed: {result.failure()}"
        try:
            message = load.assemble(result.body)
        except (orjson.JSONDecodeError, ValueError) as exc:
            return f"unparseable stream: {exc}"
        calls = message["tool_calls"]
        if not calls or calls[0]["name"] != "read" or message["finish_reason"] != "tool_calls":
            return (f"no extracted call (finish {message['finish_reason']}, "
                    f"{len(calls)} calls, errors {message['errors']})")
        return ""

    # -- sections ---------------------------------------------------------------------------
    async def buffered(self) -> None:
        """Buffered tool turns: sizes × concurrency × upstream delay."""
        self.section("buffered tool turn (client streams, tools; total latency)")
        sizes = [x.strip() for x in self.opts.buffered_sizes.split(",") if x.strip()]
        delays = [int(x) for x in self.opts.buffered_delays.split(",") if x.strip()]
        cpu_rows: list[Row] = []
        for delay in delays:
            for size in sizes:
                chunks = max(1, min(256, parse_size(size) // 4096))
                spec = f"delay_ms={delay},size={size},kind=tool,chunks={chunks},gap_ms=0"
                body = chat_body(spec, stream=True, tools=True)
                problem = await self.check_buffered(body)
                if problem:
                    self.notes.append(f"buffered {size} {delay} ms: proxy answer check: {problem}")
                for conc in (1, 8):
                    label = f"buffered {size.upper()}B c{conc} {delay}ms"
                    direct, proxy = await self.compare(label, body, concurrency=conc,
                                                       duration=self.batch_s)
                    d, p = direct.stats(), proxy.stats()
                    p50_limit, p99_limit = (BUFFERED_TARGETS.get(size, (1.15, 1.5))
                                            if conc == 8 and delay == 20 else (None, None))
                    self.rows.append(ratio_row(f"{label} p50", d["total_p50"], p["total_p50"],
                                               p50_limit))
                    self.rows.append(ratio_row(f"{label} p99", d["total_p99"], p["total_p99"],
                                               p99_limit))
                    if conc == 8:
                        self.rows.append(ratio_row(f"{label} p99.9", d["total_p999"],
                                                   p["total_p999"]))
                    self._error_rows(label, direct, proxy)
                    if conc == 8 and size == "1k":
                        self.rows.append(Row(f"{label} requests/s", f"{d['rps']:.0f}",
                                             f"{p['rps']:.0f}",
                                             f"{ratio_of(d['rps'], p['rps']):.2f}×"))
                        target = f"≤ {ms(TURN_CPU_TARGET)}" if delay == 20 else "—"
                        cpu = proxy.cpu_per_request()
                        if delay == 20:
                            self.turn_cpu = cpu  # beside it, what recording the turn costs
                        cpu_rows.append(Row(
                            f"server CPU per buffered 1KB turn (c8, {delay} ms)",
                            f"{ms(direct.cpu_per_request())} (fake)", ms(cpu), "—", target,
                            ("pass" if cpu <= TURN_CPU_TARGET else "FAIL") if delay == 20
                            else ""))
        self.cpu_rows.extend(cpu_rows)
        if 20 in delays:
            await self.responses_turn()

    async def responses_turn(self) -> None:
        """The Responses front's buffered turn (what Codex sends: streamed, store false),
        against the same chat turn sent to the fake directly: the CPU per turn beside the
        chat front's."""
        spec = "delay_ms=20,size=1k,kind=tool,chunks=1,gap_ms=0"
        direct_body = chat_body(spec, stream=True, tools=True)
        body = responses_body(spec)
        problem = await self.check_responses(body)
        if problem:
            self.notes.append(f"responses 1k 20 ms: proxy answer check: {problem}")
        label = "responses 1KB c8 20ms"
        direct, proxy = await self.compare(label, direct_body, concurrency=8,
                                           duration=self.batch_s,
                                           proxy_request=(RESPONSES, body))
        d, p = direct.stats(), proxy.stats()
        self.rows.append(ratio_row(f"{label} p50 (direct: the chat turn)", d["total_p50"],
                                   p["total_p50"]))
        self._error_rows(label, direct, proxy)
        self.cpu_rows.append(Row("server CPU per buffered 1KB turn, Responses front (c8, 20 ms)",
                                 f"{ms(direct.cpu_per_request())} (fake)",
                                 ms(proxy.cpu_per_request())))

    async def check_responses(self, body: bytes) -> str:
        """'' when the Responses front turns the fake's Hermes text into a `read` call."""
        result = await load.simple(self.stack.proxy_url + RESPONSES, "POST", body, timeout=60)
        if not result.ok or result.body is None:
            return f"request failed: {result.failure()}"
        events = [e for e in load.sse_events(result.body) if isinstance(e, dict)]
        final = events[-1].get("response") if events else None
        calls = [item.get("name") for item in (final or {}).get("output", [])
                 if item.get("type") == "function_call"]
        if not events or events[-1].get("type") != "response.completed" or calls[:1] != ["read"]:
            return f"no extracted call (last event {events[-1].get('type') if events else None})"
        return ""

    async def messages(self) -> None:
        """The Messages front: the buffered 1 KB tool turn (c8, 20 ms) as /v1/messages."""
        self.section("Messages front (Anthropic /v1/messages, client streams, tools)")
        spec = "delay_ms=20,size=1k,kind=tool,chunks=1,gap_ms=0"
        body = messages_body(spec)
        result = await load.simple(self.stack.proxy_url + MESSAGES_PATH, "POST", body,
                                   timeout=60)
        events = load.sse_events(result.body or b"") if result.ok else []
        if not any(isinstance(e, dict) and e.get("content_block", {}).get("name") == "read"
                   for e in events):
            self.notes.append(f"messages 1k: proxy answer check: no tool_use `read` "
                              f"({result.failure() if not result.ok else events[-1:]})")
        label = "messages 1KB c8 20ms"
        direct, proxy = await self.compare(label, chat_body(spec, stream=True, tools=True),
                                           concurrency=8, duration=self.batch_s,
                                           proxy_request=(MESSAGES_PATH, body))
        d, p = direct.stats(), proxy.stats()
        self.rows.append(ratio_row(f"{label} p50", d["total_p50"], p["total_p50"], 1.15))
        self.rows.append(ratio_row(f"{label} p99", d["total_p99"], p["total_p99"], 1.5))
        self._error_rows(label, direct, proxy)
        self.rows.append(Row(f"{label} requests/s", f"{d['rps']:.0f}", f"{p['rps']:.0f}",
                             f"{ratio_of(d['rps'], p['rps']):.2f}×"))
        cpu = proxy.cpu_per_request()
        self.cpu_rows.append(Row("server CPU per buffered 1KB turn, Messages front (c8, 20 ms)",
                                 f"{ms(direct.cpu_per_request())} (fake)", ms(cpu), "—",
                                 "≤ 4 ms", "pass" if cpu <= 0.004 else "FAIL"))

    def _error_rows(self, label: str, direct: Side, proxy: Side) -> None:
        for name, side in (("direct", direct), ("proxy", proxy)):
            assert side.batch is not None
            errors = load.first_errors(side.batch)
            if errors:
                self.rows.append(Row(f"{label} errors ({name})", "", "; ".join(errors),
                                     "", "0", "FAIL"))

    async def stream(self) -> None:
        """Passthrough streams: TTFB and the gaps between chunks."""
        self.section("passthrough stream (no tools, 100 chunks)")
        conc = 4 if self.opts.quick else 16
        for delay, gap in ((20, 20), (0, 0)):
            spec = f"delay_ms={delay},size=4k,kind=text,chunks=100,gap_ms={gap}"
            body = chat_body(spec, stream=True, tools=False)
            label = f"stream {delay}ms/{gap}ms gaps c{conc}"
            if gap:  # one 2 s stream per connection, starts spread over 2 s (no bursts)
                direct, proxy = await self.compare(label, body, concurrency=conc,
                                                   duration=0.1, min_requests=0,
                                                   stagger=2.0 / conc, max_requests=conc)
            else:
                direct, proxy = await self.compare(label, body, concurrency=conc,
                                                   duration=self.batch_s)
            d, p = direct.stats(), proxy.stats()
            timed = delay == 20
            self.rows.append(ratio_row(f"{label} TTFB p50", d["ttfb_p50"], p["ttfb_p50"],
                                       1.15 if timed else None))
            self.rows.append(ratio_row(f"{label} TTFB p99", d["ttfb_p99"], p["ttfb_p99"]))
            if timed:
                self.rows.append(ratio_row(f"{label} gap p50", d["gap_p50"], p["gap_p50"]))
                self.rows.append(ratio_row(f"{label} gap p99", d["gap_p99"], p["gap_p99"],
                                           1.10))
            self.rows.append(ratio_row(f"{label} total p50", d["total_p50"], p["total_p50"]))
            self._error_rows(label, direct, proxy)
            if timed:
                self.cpu_rows.append(Row("server CPU per passthrough stream (100 chunks)",
                                         f"{ms(direct.cpu_per_request())} (fake)",
                                         ms(proxy.cpu_per_request())))

    async def json(self) -> None:
        """Passthrough JSON (no tools, not streamed)."""
        self.section("passthrough JSON (no tools, 1 KB)")
        for delay, conc in ((20, 1), (20, 8), (0, 8)):
            body = chat_body(f"delay_ms={delay},size=1k,kind=text", stream=False, tools=False)
            label = f"json 1KB c{conc} {delay}ms"
            direct, proxy = await self.compare(label, body, concurrency=conc,
                                               duration=self.batch_s)
            d, p = direct.stats(), proxy.stats()
            self.rows.append(ratio_row(f"{label} p50", d["total_p50"], p["total_p50"]))
            self.rows.append(ratio_row(f"{label} p99", d["total_p99"], p["total_p99"]))
            self._error_rows(label, direct, proxy)
            if delay == 0:
                self.rows.append(Row(f"{label} requests/s", f"{d['rps']:.0f}",
                                     f"{p['rps']:.0f}",
                                     f"{ratio_of(d['rps'], p['rps']):.2f}×"))
                self.cpu_rows.append(Row("server CPU per passthrough JSON request (c8, 0 ms)",
                                         f"{ms(direct.cpu_per_request())} (fake)",
                                         ms(proxy.cpu_per_request())))

    async def held_level(self, side: str, streams: int, body: bytes, *, gap_limit: float,
                         ttfb_limit: float, stream_s: float,
                         validate: Callable[[load.Result], str] | None = None,
                         ) -> tuple[bool, dict[str, float], int, list[str]]:
        """One held-streams level: (passed, stats, peak RSS bytes, reasons it failed)."""
        proc = self.stack.proxy if side == "proxy" else self.stack.fake
        assert proc is not None
        peak = [load.rss_bytes(proc.pid)]

        def sample() -> None:
            peak[0] = max(peak[0], load.rss_bytes(proc.pid))

        # New streams arrive at ≤ 300/s (over ≤ 10 s): every stream is open from the end of the
        # ramp to the end of the first stream; a faster ramp measures accept bursts instead.
        ramp = min(10.0, max(1.0, streams / 300))
        cpu0 = self.server_cpu(side)
        batch = await load.held(self.url(side), load.build_request("POST", self.url(side), body),
                                streams=streams, ramp=ramp, timeout=stream_s + ramp + 30,
                                keep_bodies=validate is not None, tick=sample, tick_every=2.0)
        cpu = self.server_cpu(side) - cpu0
        s = load.summarize(batch)
        reasons = load.first_errors(batch)
        if validate is not None:
            bad = [why for r in batch.results if r.ok and (why := validate(r))]
            if bad:
                reasons.append(f"{len(bad)}× {bad[0]}")
                s["errors"] += len(bad)
            for r in batch.results:
                r.body = None  # free the bodies
        if s["errors"]:
            pass
        elif s["ttfb_p99"] > ttfb_limit:
            reasons.append(f"TTFB p99 {ms(s['ttfb_p99'])} > {ms(ttfb_limit)}")
        elif s["gap_p99"] > gap_limit:
            reasons.append(f"gap p99 {ms(s['gap_p99'])} > {ms(gap_limit)}")
        ok = not s["errors"] and s["ttfb_p99"] <= ttfb_limit and s["gap_p99"] <= gap_limit
        n_ok = max(1, sum(1 for r in batch.results if r.ok))
        label = f"held {streams} ({'pass' if ok else 'fail'})"
        self.detail(label, side, batch, cpu / n_ok)
        log(f"    peak RSS {peak[0] / 2**20:.0f} MiB" + (f"; {reasons}" if reasons else ""))
        await self.settle()
        return ok, s, peak[0], reasons

    async def settle(self, limit: float = 60.0) -> None:
        """Wait (bounded) until the fake has no stream open: the last level has drained."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            result = await load.simple(self.stack.fake_url + "/fake/stats", timeout=5)
            if result.ok and result.body and orjson.loads(result.body)["open_streams"] == 0:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)

    def held_levels(self, default: str) -> list[int]:
        """The upward search levels."""
        text = self.opts.held_levels or default
        return [int(x) for x in text.split(",") if x.strip()]

    async def held(self) -> None:
        """How many concurrent 30 s streams (a chunk every 500 ms) the deployment holds."""
        chunks = int(self.held_s / 0.5)
        self.section(f"held streams ({self.held_s:.0f} s, a chunk every 500 ms; no errors, "
                     "TTFB p99 ≤ 1 s, gap p99 ≤ 750 ms)")
        body = chat_body(f"delay_ms=20,size=2k,kind=text,chunks={chunks},gap_ms=500",
                         stream=True, tools=False)
        levels = self.held_levels("100,300" if self.opts.quick else "1000,2000,3000,4000")
        top = max(levels)
        limits = {"gap_limit": 0.75, "ttfb_limit": 1.0, "stream_s": self.held_s}
        d_ok, d_stats, d_rss, d_why = await self.held_level("direct", top, body, **limits)
        held_direct = top if d_ok else 0
        if not d_ok:
            self.notes.append(f"direct held {top} failed ({d_why}): the load generator or the "
                              "fake is the limit at this level")
        best: tuple[int, dict[str, float], int] | None = None
        failed: tuple[int, list[str]] | None = None
        tried = sorted(levels)
        for level in tried:  # upward until the first failure
            ok, stats, rss, why = await self.held_level("proxy", level, body, **limits)
            if not ok:
                failed = (level, why)
                break
            best = (level, stats, rss)
        if best is None:  # not even the first level: look downward (bounded)
            for level in sorted({max(1, tried[0] // d) for d in (2, 10, 100)}, reverse=True):
                if level >= tried[0]:
                    continue
                ok, stats, rss, why = await self.held_level("proxy", level, body, **limits)
                if ok:
                    best = (level, stats, rss)
                    break
                failed = (level, why)
        held_proxy = best[0] if best else 0
        row = Row("concurrent held streams", f"{held_direct} (of {top} tried)",
                  f"{held_proxy}", f"{ratio_of(held_direct, held_proxy):.2f}×"
                  if held_direct else "n/a", "≥ 2000", "pass" if held_proxy >= 2000 else "FAIL")
        if self.opts.quick:
            row.target, row.result = "≥ 2000 (full run)", "n/a"
        self.rows.append(row)
        if best is not None:
            level, stats, rss = best
            self.rows.append(ratio_row(f"held @{level}: TTFB p99", d_stats["ttfb_p99"],
                                       stats["ttfb_p99"]))
            self.rows.append(ratio_row(f"held @{level}: gap p99", d_stats["gap_p99"],
                                       stats["gap_p99"]))
            self.rows.append(Row(f"held @{level}: RSS master+workers",
                                 f"{d_rss / 2**20:.0f} MiB (fake @{top})",
                                 f"{rss / 2**20:.0f} MiB"))
        if failed is not None:
            self.rows.append(Row(f"held @{failed[0]}: why it failed", "", "; ".join(failed[1])))

    async def heldbuf(self) -> None:
        """Buffered tool turns whose upstream answers after 30 s: held with heartbeats."""
        hb = self.opts.heartbeat_seconds
        wait_s = self.held_s
        self.section(f"held buffered turns (upstream answers after {wait_s:.0f} s; no errors, "
                     f"role chunk ≤ 1 s, heartbeat gap p99 ≤ {hb + 1:.0f} s)")
        body = chat_body(f"delay_ms={wait_s * 1000:.0f},size=1k,kind=tool", stream=True,
                         tools=True)

        def validate(result: load.Result) -> str:
            if result.body is None:
                return "no body"
            message = load.assemble(result.body)
            calls = message["tool_calls"]
            if not calls or calls[0]["name"] != "read":
                return f"no tool call (finish {message['finish_reason']})"
            return ""

        text = self.opts.heldbuf_levels or ("100" if self.opts.quick else "1000,2000")
        levels = [int(x) for x in text.split(",") if x.strip()]
        best: tuple[int, dict[str, float], int] | None = None
        failed: tuple[int, list[str]] | None = None
        for level in levels:
            ok, stats, rss, why = await self.held_level(
                "proxy", level, body, gap_limit=hb + 1.0, ttfb_limit=1.0,
                stream_s=wait_s, validate=validate)
            if not ok:
                failed = (level, why)
                break
            best = (level, stats, rss)
        held = best[0] if best else 0
        self.rows.append(Row("concurrent held buffered turns", "n/a", str(held), "—",
                             "≥ 1000" if not self.opts.quick else "≥ 1000 (full run)",
                             ("pass" if held >= 1000 else "FAIL") if not self.opts.quick
                             else "n/a"))
        if best is not None:
            level, stats, rss = best
            self.rows.append(Row(f"held buffered @{level}: role chunk p99 / heartbeat gap p99",
                                 "n/a", f"{ms(stats['ttfb_p99'])} / {ms(stats['gap_p99'])}"))
            self.rows.append(Row(f"held buffered @{level}: RSS master+workers", "n/a",
                                 f"{rss / 2**20:.0f} MiB"))
        if failed is not None:
            self.rows.append(Row(f"held buffered @{failed[0]}: why it failed", "",
                                 "; ".join(failed[1])))

    def extract(self) -> None:
        """`proxy.toolcalls.extract` alone: the fake's 1 MB answer and pathological inputs."""
        self.section("extraction alone (proxy.toolcalls.extract, 1 MB inputs)")
        try:
            from proxy.toolcalls import extract
        except Exception as exc:  # the proxy is optional for the rest of the benchmark
            self.rows.append(Row("extraction", "", f"skipped: {exc!r}"))
            return
        tools = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
        repeat = 1 if self.opts.quick else 5
        content = orjson.loads(_fake_completion(parse_size("1m")))["choices"][0]["message"][
            "content"]
        timings = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = extract(content, tools)
            timings.append(time.perf_counter() - t0)
        calls = getattr(out, "calls", None)
        self.rows.append(limit_row("extract: fake vLLM 1 MB answer (Hermes call after prose)",
                                    statistics.median(timings), 0.020,
                                    "" if calls else " (no call found!)"))
        try:
            from bench import extraction as engine_bench
        except Exception as exc:
            self.rows.append(Row("extract: pathological inputs", "", f"skipped: {exc!r}"))
            return
        t0 = time.perf_counter()
        timings_by_case = engine_bench.measure(1 << 20, tools=tools, repeat=repeat)
        spent = time.perf_counter() - t0
        realistic = {t.label: t.median for t in timings_by_case}.get("realistic")
        if realistic is not None:
            self.rows.append(limit_row("extract: 1 MB realistic (prose, code, 2 calls)",
                                        realistic / 1000, 0.020))
        worst = [(t.label, t.median) for t in timings_by_case if t.label != "realistic"][:3]
        for label, t in worst:
            self.rows.append(limit_row(f"extract: 1 MB case {label}", t / 1000, 0.020))
        n = len(timings_by_case)
        self.notes.append(f"extraction: {n} inputs of 1 MB from bench.extraction.cases "
                          f"({spent:.1f} s: pathological text and single 1 MB calls); the "
                          f"table shows the 3 slowest; median of {repeat} runs each")


def _fake_completion(size: int) -> bytes:
    from bench.fake_upstream import FakeConfig, completion_body

    return completion_body(FakeConfig(size=size, kind="tool"), "bench")
