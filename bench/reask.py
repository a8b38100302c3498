"""`make bench`, the constrained re-asks' rows (issue 35): what a call the model would not
write, or botched, costs and recovers.

The fake upstream's model never calls unless constrained: `kind=text` answers prose, and
`kind=botched` a Hermes call whose arguments are no JSON, unless the request carries vLLM's
`structured_outputs.json` (then the array of calls the schema asks for). Each scenario is
sent N times, one at a time, directly, through the proxy with `constrained_reask: off` and
`required_call_retries: 0` (the bench model `reaskoff@…`: today's answer without the retry),
and through the proxy as it ships; the rows give the share of turns that ended with the call
and the turn's latency (a recovered call costs one more upstream round trip). A last row
counts the upstream requests an ordinary tool turn costs once the upstream's profile is
learned: one (no info endpoint is asked per turn).
"""

from __future__ import annotations

from typing import Any

import orjson

from bench import load
from bench.harness import Bench
from bench.table import Row, ms

# The proxy's setting for the bench model of today's behaviour without a retry.
MODELS = {"reaskoff@*": {"constrained_reask": "off", "required_call_retries": 0}}
DELAY_MS = 20


def _body(model: str, spec: str, tools: list[dict[str, Any]],
          messages: list[dict[str, Any]], **extra: Any) -> bytes:
    return orjson.dumps({"model": f"{model}@{spec}", "messages": messages, "tools": tools,
                         "max_tokens": 512, "stream": False, **extra})


def _called(result: load.Result) -> bool:
    """Whether a turn's answer holds a parsed call (the proxy's, or the engine's own)."""
    if result.status != 200 or not result.body:
        return False
    try:
        message = orjson.loads(result.body)["choices"][0]["message"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return False
    return bool(message.get("tool_calls"))


async def _turns(url: str, body: bytes, count: int) -> tuple[float, float]:
    """`count` turns one at a time: the share that ended with a call, and latency p50."""
    called, times = 0, []
    for _ in range(count):
        result = await load.simple(url, "POST", body, timeout=30)
        called += _called(result)
        if result.t_end is not None:
            times.append(result.t_end - result.t_start)
    return called / max(1, count), load.percentile(times, 50)


async def _upstream_requests(bench: Bench) -> int:
    result = await load.simple(bench.stack.fake_url + "/fake/stats")
    return int(orjson.loads(result.body or b"{}").get("requests", 0))


async def section(bench: Bench, tools: list[dict[str, Any]],
                  messages: list[dict[str, Any]]) -> None:
    """The re-asks' rows: calls recovered, what a recovery costs, what the profile costs."""

    count = 10 if bench.opts.quick else 50
    bench.section(f"constrained re-asks (a model that never calls, or botches, unless "
                  f"constrained; {count} turns each, {DELAY_MS} ms per generation)")
    spec = f"delay_ms={DELAY_MS},size=1k"
    scenarios = (("demanded call (tool_choice required)", f"{spec},kind=text",
                  {"tool_choice": "required"}),
                 ("botched call (arguments no JSON)", f"{spec},kind=botched", {}))
    direct, proxy = bench.url("direct"), bench.url("proxy")
    for label, knobs, extra in scenarios:
        shares = {}
        for side, url, model in (("direct", direct, "bench"), ("off", proxy, "reaskoff"),
                                 ("proxy", proxy, "bench")):
            shares[side] = await _turns(url, _body(model, knobs, tools, messages, **extra),
                                        count)
        (d_share, d_time), (o_share, _), (p_share, p_time) = (
            shares["direct"], shares["off"], shares["proxy"])
        bench.rows.append(Row(f"{label}: turns ending with the call (without re-ask → with)",
                              f"{d_share:.0%}", f"{o_share:.0%} → {p_share:.0%}", "—",
                              "100 %", "pass" if p_share == 1 else "FAIL"))
        bench.rows.append(Row(f"{label}: turn latency p50 (a re-ask: one more round trip)",
                              ms(d_time), ms(p_time), f"{p_time / d_time:.2f}×"
                              if d_time else "n/a", f"≤ 2 × {DELAY_MS} ms + 30 ms",
                              "pass" if p_time <= 2 * DELAY_MS / 1000 + 0.03 else "FAIL"))
    body = _body("bench", f"{spec},kind=tool", tools, messages)
    await load.simple(proxy, "POST", body, timeout=30)  # the profile learned
    before = await _upstream_requests(bench)
    for _ in range(count):
        await load.simple(proxy, "POST", body, timeout=30)
    per_turn = (await _upstream_requests(bench) - before - 1) / count  # less the stats call
    bench.rows.append(Row("upstream requests per ordinary tool turn, profile learned",
                          "1", f"{per_turn:.2f}", "—", "1.00",
                          "pass" if per_turn == 1 else "FAIL"))
