"""`make bench`, the streamed mode's rows (issue 19): a tool turn whose text flows live.

The same request (tools, client streams) to the fake upstream directly and to the proxy in
`stream_mode: stream` (per model: the bench model `streamed@…`, see `MODELS_ENV`). The fake
writes prose in 100 chunks a gap apart, then a Hermes call: directly the client sees the
prose and the call text as the fake writes them; through the proxy the prose flows live and
the call is held and sent whole at the end. Measured per stream, from the client: the time
to the first content token (TTFT: the first event whose delta has content) and the gaps
between content events, p50 and p99; and the proxy's CPU per streamed token (utime + stime
of the gunicorn master and workers over the proxy's rounds, per upstream content chunk).
Targets: TTFT ≤ 1.1× direct + 5 ms, gaps ≤ 1.1× direct (p99.9 shown too), ≤ 200 µs of
server CPU per streamed token.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import orjson

from bench import load
from bench.harness import Bench
from bench.table import Row, ms, ratio_of

# The proxy's setting for the bench model of this section (the others stay buffered).
MODELS_ENV = ("TOOLCALL_PROXY_MODELS", orjson.dumps({"streamed@*": {"stream_mode": "stream"}})
              .decode())
CHUNKS = 100
TOKEN_CPU_TARGET = 200e-6  # seconds of server CPU per streamed token (issue 46)


def request_body(spec: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]],
                 ) -> bytes:
    """A streaming tool turn for the model that the proxy answers in the streamed mode."""
    return orjson.dumps({"model": f"streamed@{spec}", "messages": messages, "tools": tools,
                         "max_tokens": 512, "stream": True,
                         "stream_options": {"include_usage": True}})


def content_times(result: load.Result) -> list[float]:
    """When each event with content arrived (seconds after the request was sent)."""
    if result.body is None:
        return []
    events = load.sse_events(result.body)
    times = []
    for event, at in zip(events, result.event_times, strict=False):
        if isinstance(event, dict) and any((choice.get("delta") or {}).get("content")
                                           for choice in event.get("choices") or ()):
            times.append(at - result.t_start)
    return times


def summary(batch: load.Batch) -> dict[str, float]:
    """TTFT and content-gap p50/p99 (and gap p99.9; seconds) over a batch's streams, and what
    they hold."""
    ttft, gaps, tokens, called = [], [], 0, 0
    for result in batch.results:
        if not result.ok:
            continue
        times = content_times(result)
        if times:
            ttft.append(times[0])
            gaps.extend(b - a for a, b in itertools.pairwise(times))
        message = load.assemble(result.body or b"")
        called += bool(message["tool_calls"]) or "<tool_call>" in message["content"]
        tokens += CHUNKS
    return {"ttft_p50": load.percentile(ttft, 50), "ttft_p99": load.percentile(ttft, 99),
            "gap_p50": load.percentile(gaps, 50), "gap_p99": load.percentile(gaps, 99),
            "gap_p999": load.percentile(gaps, 99.9),
            "streams": len(ttft), "tokens": tokens, "called": called,
            "errors": sum(not r.ok for r in batch.results)}


async def measure(bench: Bench, body: bytes, streams: int, side: str) -> tuple[load.Batch, float]:
    """One round of `streams` concurrent streams on one side; its batch and server CPU."""
    cpu0 = bench.server_cpu(side)
    raw = load.build_request("POST", bench.url(side), body)
    batch = await load.held(bench.url(side), raw, streams=streams, ramp=1.0, timeout=60,
                            keep_bodies=True)
    return batch, bench.server_cpu(side) - cpu0


async def section(bench: Bench, tools: list[dict[str, Any]], messages: list[dict[str, Any]],
                  ) -> None:
    """The streamed mode's rows: TTFT, content gaps, CPU per streamed token."""

    bench.section(f"streamed mode (stream_mode: stream; tools, {CHUNKS} content chunks then "
                  "a Hermes call)")
    streams = 4 if bench.opts.quick else 16
    for gap in (20, 5):
        spec = f"delay_ms=20,size=4k,kind=tool,chunks={CHUNKS},gap_ms={gap}"
        body = request_body(spec, tools, messages)
        sides: dict[str, list[load.Batch]] = {"direct": [], "proxy": []}
        cpu = {"direct": 0.0, "proxy": 0.0}
        await measure(bench, body, 2, "proxy")  # warm-up: the workers' imports and pools
        for rnd in range(bench.rounds):
            for side in (("direct", "proxy") if rnd % 2 == 0 else ("proxy", "direct")):
                batch, used = await measure(bench, body, streams, side)
                sides[side].append(batch)
                cpu[side] += used
        label = f"streamed {gap}ms gaps c{streams}"
        stats = {}
        for side, batches in sides.items():
            merged = batches[0]
            for other in batches[1:]:
                merged.extend(other)
            stats[side] = summary(merged)
            bench.detail(label, side, merged, cpu[side] / max(1, stats[side]["streams"]))
            if stats[side]["errors"] or stats[side]["called"] < stats[side]["streams"]:
                bench.notes.append(f"{label} [{side}]: {stats[side]['errors']:.0f} errors, "
                                   f"{stats[side]['called']:.0f} of {stats[side]['streams']:.0f}"
                                   " streams ended with the call")
        d, p = stats["direct"], stats["proxy"]
        for pct in ("p50", "p99"):
            limit = d[f"ttft_{pct}"] * 1.1 + 0.005
            bench.rows.append(Row(f"{label} TTFT {pct}", ms(d[f"ttft_{pct}"]),
                                  ms(p[f"ttft_{pct}"]), _ratio(ratio_of(d[f"ttft_{pct}"],
                                                                        p[f"ttft_{pct}"])),
                                  f"≤ {ms(limit)}", _verdict(p[f"ttft_{pct}"] <= limit)))
        for pct in ("p50", "p99"):
            r = ratio_of(d[f"gap_{pct}"], p[f"gap_{pct}"])
            bench.rows.append(Row(f"{label} gap {pct}", ms(d[f"gap_{pct}"]),
                                  ms(p[f"gap_{pct}"]), _ratio(r), "≤ 1.10×",
                                  _verdict(r <= 1.10)))
        r = ratio_of(d["gap_p999"], p["gap_p999"])
        bench.rows.append(Row(f"{label} gap p99.9", ms(d["gap_p999"]), ms(p["gap_p999"]),
                              _ratio(r)))
        if gap == 20:
            per_token = cpu["proxy"] / max(1, p["tokens"])
            bench.cpu_rows.append(Row(
                "server CPU per streamed token (streamed mode, 20 ms gaps)",
                f"{per_token_us(cpu['direct'] / max(1, d['tokens']))} (fake)",
                per_token_us(per_token), "—", f"≤ {per_token_us(TOKEN_CPU_TARGET)}",
                "n/a" if math.isnan(per_token) else _verdict(per_token <= TOKEN_CPU_TARGET)))


def per_token_us(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1e6:.0f} µs"


def _ratio(r: float) -> str:
    return "n/a" if math.isnan(r) else f"{r:.2f}×"


def _verdict(ok: bool) -> str:
    return "pass" if ok else "FAIL"
