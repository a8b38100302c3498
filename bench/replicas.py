"""`make bench`, the replicas rows (issue 28): cache-aware routing against round robin.

Two fake vLLM replicas that model a prefix cache (`bench/fake_replica.py`: time to first
token grows with the prompt tokens that replica has not seen) behind one proxy (gunicorn,
as users run it) whose `upstream` lists both. An agent-like workload: 16 conversations at
once, each 20 tool turns whose history grows (a shared system prompt and tools, its own
task, then each turn's call and a ~500-token tool result), first with the model routed by
affinity (the default), then, caches emptied, with `upstream_routing: round_robin` (a
per-model setting: the bench model `rr@…`). Measured: each turn's time at the client (p50,
p90) and the prefill work the replicas did (prompt tokens not found in their cache), as
ratios cache-aware ÷ round robin, in the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from bench import load
from bench.fake_replica import READY
from bench.harness import Bench
from bench.stack import ROOT, Proc, free_port
from bench.table import Row, ms, ratio_of

SYSTEM = ("You are a coding agent working in a large repository. Read files before you "
          "change them, run the tests after every change, and explain what you did. ") * 40
RESULT_CHARS = 2000
ROUTINGS = (("cache-aware", "bench"), ("round robin", "rr@bench"))
MODELS_ENV = orjson.dumps({"rr@*": {"upstream_routing": "round_robin"}}).decode()


def tool_result(conversation: int, turn: int) -> str:
    """A file's text as a tool returns it: its own per conversation and turn."""
    seed = hashlib.sha256(f"{conversation}/{turn}".encode()).hexdigest()
    line = f"def handler_{seed[:8]}(request):  # {seed}\n"
    return (line * (RESULT_CHARS // len(line) + 1))[:RESULT_CHARS]


def conversation(url: str, model: str, index: int, turns: int,
                 tools: list[dict[str, Any]]) -> tuple[list[float], int]:
    """One agent: `turns` tool turns, each sending the whole history so far; the time of
    each turn at the client, and how many failed."""
    host, _, port = url.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Task {index}: find why request {index} is slow."}]
    times, failed = [], 0
    for turn in range(turns):
        body = orjson.dumps({"model": model, "messages": messages, "tools": tools,
                             "max_tokens": 256})
        started = time.perf_counter()
        connection.request("POST", "/v1/chat/completions", body,
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        times.append(time.perf_counter() - started)
        calls = (orjson.loads(data)["choices"][0]["message"].get("tool_calls")
                 if response.status == 200 else None)
        if not calls:
            failed += 1
            break
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages.append({"role": "tool", "tool_call_id": calls[0]["id"],
                         "content": tool_result(index, turn)})
    connection.close()
    return times, failed


def _call(url: str, path: str, body: Any = None) -> Any:
    """GET `path` (POST `body`, when given) and the JSON answer."""
    host, _, port = url.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    if body is None:
        connection.request("GET", path)
    else:
        connection.request("POST", path, orjson.dumps(body))
    data = connection.getresponse().read()
    connection.close()
    return orjson.loads(data) if data else None


def _start_replica(bench: Bench, name: str) -> tuple[Proc, str]:

    log_path = bench.stack.tmp / f"{name}.log"
    with open(log_path, "wb") as err:
        popen = subprocess.Popen([sys.executable, "-m", "bench.fake_replica", "--port", "0"],
                                 cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=err, start_new_session=True)
    assert popen.stdout is not None
    line = popen.stdout.readline().decode().strip()
    if not line.startswith(READY):
        raise RuntimeError(f"{name} did not start: {line!r}")
    return Proc(name, popen, log_path), line.split()[-1]


def _start_proxy(bench: Bench, replicas: list[str]) -> tuple[Proc, str]:

    port = free_port()
    cmd = bench.stack.gunicorn_cmd(port)
    control = cmd.index("--control-socket")
    cmd[control + 1] = str(bench.stack.tmp / "gunicorn-replicas.ctl")
    env = dict(os.environ, TOOLCALL_PROXY_UPSTREAM=",".join(replicas),
               TOOLCALL_PROXY_MODELS=MODELS_ENV, TOOLCALL_PROXY_LOG_LEVEL="warning",
               PROMETHEUS_MULTIPROC_DIR=str(bench.stack.tmp / "prometheus-replicas"))
    log_path = bench.stack.tmp / "gunicorn-replicas.log"
    with open(log_path, "wb") as out:
        popen = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out,
                                 start_new_session=True)
    proxy = Proc("replicas proxy", popen, log_path)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not proxy.alive():
            raise RuntimeError(f"gunicorn exited:\n{proxy.log_tail()}")
        result = asyncio.run(load.simple(url + "/proxy/health", timeout=2))
        if result.error is None and result.status == 200:
            return proxy, url
        time.sleep(0.2)
    raise RuntimeError(f"gunicorn did not answer in 30 s:\n{proxy.log_tail()}")


def _workload(url: str, model: str, replicas: list[str], conversations: int, turns: int,
              tools: list[dict[str, Any]], cache_tokens: int) -> dict[str, Any]:
    """Every conversation at once, from empty caches of `cache_tokens` each; the turns'
    times and the replicas' prefill work."""
    for replica in replicas:
        _call(replica, "/fake/reset", {"cache_tokens": cache_tokens})
    started = time.perf_counter()
    with ThreadPoolExecutor(conversations) as pool:
        done = list(pool.map(lambda i: conversation(url, model, i, turns, tools),
                             range(conversations)))
    wall = time.perf_counter() - started
    times = sorted(t for ts, _ in done for t in ts)
    stats = [_call(replica, "/fake/stats") for replica in replicas]
    return {"p50": statistics.median(times), "p90": times[int(len(times) * 0.9)],
            "turns": len(times), "failed": sum(f for _, f in done), "wall": wall,
            "prefill": sum(s["prefill_tokens"] for s in stats),
            "prompt": sum(s["prompt_tokens"] for s in stats),
            "split": "/".join(str(s["requests"]) for s in stats)}


async def section(bench: Bench, tools: list[dict[str, Any]]) -> None:
    """The replicas rows (run in a thread: the workload is blocking clients)."""
    await asyncio.to_thread(_section, bench, tools)


def _section(bench: Bench, tools: list[dict[str, Any]]) -> None:
    conversations, turns = (8, 10) if bench.opts.quick else (16, 20)
    bench.section(f"upstream replicas: {conversations} conversations × {turns} turns over 2 "
                  "prefix-caching replicas ('direct' column: round robin; 'proxy' column: "
                  "cache-aware)")
    started: list[Proc] = []
    replicas: list[str] = []
    try:
        for name in ("replica-a", "replica-b"):
            proc, replica = _start_replica(bench, name)
            started.append(proc)
            replicas.append(replica)
        proxy, url = _start_proxy(bench, replicas)
        started.append(proxy)
        # The workload's tokens at its end, all conversations: an ample cache holds them all
        # on each replica; a tight one 70% (a replica's KV cache is what limits it).
        tokens = conversations * (len(SYSTEM) + 600 + turns * (RESULT_CHARS + 200)) // 4
        results = {(label, room): _workload(url, model, replicas, conversations, turns, tools,
                                            cache_tokens=tokens * share // 100)
                   for room, share in (("ample", 400), ("tight", 70))
                   for label, model in ROUTINGS}
    finally:
        for proc in reversed(started):
            with contextlib.suppress(Exception):
                proc.stop()
    for room in ("ample", "tight"):
        _rows(bench, room, results[("cache-aware", room)], results[("round robin", room)])
    for (label, room), result in results.items():
        bench.notes.append(
            f"replicas, {label}, {room} cache: {result['turns']} turns "
            f"({result['failed']} failed) in {result['wall']:.1f} s; turns per replica "
            f"{result['split']}; {result['prefill']:,} of {result['prompt']:,} prompt tokens "
            "prefilled")


def _rows(bench: Bench, room: str, aware: dict[str, Any], rr: dict[str, Any]) -> None:
    """Turn p50 and p90, and the prefill work: round robin, cache-aware, the ratio."""

    for pct in ("p50", "p90"):
        r = ratio_of(rr[pct], aware[pct])
        bench.rows.append(Row(f"replicas ({room} cache): turn {pct}", ms(rr[pct]),
                              ms(aware[pct]), f"{r:.2f}×", "< 1.00×",
                              "pass" if r < 1 else "FAIL"))
    r = ratio_of(rr["prefill"], aware["prefill"])
    bench.rows.append(Row(f"replicas ({room} cache): prefill (prompt tokens not in cache)",
                          f"{rr['prefill']:,}", f"{aware['prefill']:,}", f"{r:.2f}×",
                          "< 1.00×", "pass" if r < 1 else "FAIL"))
