"""`make bench`, the store section (issue 28): what the Redis store adds to a stored turn,
against SQLite, in one run.

Two more proxies, started as the main one (gunicorn, the shipped config, one worker each),
before the same fake upstream: one keeps answers in a SQLite file, one in a redis-server the
bench starts on a free loopback port (no persistence). The turn is a Responses request with
`store: true` continuing a kept answer (`previous_response_id`): the store recalls a chain
of two and keeps one more. Client not streaming, 1 KB answer, upstream 0 ms, one connection;
rounds interleaved (SQLite then Redis, Redis then SQLite, ...). Row: the turn's p50 on each,
and what Redis adds (target ≤ 1 ms). Skipped, with a note, where redis-server or the `redis`
package is missing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bench import load
from bench.harness import Bench
from bench.stack import Proc, free_port
from bench.table import Row, ms

RESPONSES = "/v1/responses"
SPEC = "delay_ms=0,size=1k,kind=text,chunks=1,gap_ms=0"
TARGET = 0.001  # seconds Redis may add to the turn's p50


def turn_body(previous: str | None) -> bytes:
    """A stored Responses turn (continuing `previous` when given)."""
    body: dict[str, Any] = {"model": f"bench@{SPEC}", "input": "Go on with the review.",
                            "max_output_tokens": 256, "store": True, "stream": False}
    if previous:
        body["previous_response_id"] = previous
    return orjson.dumps(body)


@contextlib.contextmanager
def redis_server(folder: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """redis-server on 127.0.0.1:`port`, no persistence, stopped after."""
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def start_proxy(bench: Bench, name: str, store_url: str) -> tuple[Proc, str]:
    """Another gunicorn proxy (one worker) before the bench's fake, keeping answers at
    `store_url`; waits until its store answers on /proxy/health."""

    stack = bench.stack
    port = free_port()
    cmd = stack.gunicorn_cmd(port)
    cmd[cmd.index("--control-socket") + 1] = str(stack.tmp / f"{name}.ctl")
    cmd += ["-w", "1"]
    env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": stack.fake_url,
           "TOOLCALL_PROXY_RESPONSES_STORE_URL": store_url,
           "TOOLCALL_PROXY_RESPONSES_STORE_PATH": "",
           "PROMETHEUS_MULTIPROC_DIR": str(stack.tmp / f"prometheus-{name}")}
    log_path = stack.tmp / f"{name}.log"
    with open(log_path, "wb") as out:
        popen = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parent.parent, env=env,
                                 stdout=out, stderr=out, start_new_session=True)
    proc, url = Proc(name, popen, log_path), f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.alive():
        try:
            health = _health(url)
        except OSError:
            health = None
        if health is not None and health.get("store", {}).get("ok"):
            return proc, url
        time.sleep(0.2)
    proc.stop()
    raise RuntimeError(f"the {name} proxy did not come up:\n{proc.log_tail()}")


def _health(url: str) -> dict[str, Any] | None:
    import urllib.request

    with urllib.request.urlopen(url + "/proxy/health?upstream=1", timeout=5) as reply:
        return orjson.loads(reply.read())


async def _kept(url: str) -> str:
    """Keep a first answer through the proxy at `url`; its id."""
    result = await load.simple(url + RESPONSES, "POST", turn_body(None), timeout=60)
    if not result.ok or result.body is None:
        raise RuntimeError(f"{url}: the first stored turn failed: {result.failure()}")
    return str(orjson.loads(result.body)["id"])


async def measure(bench: Bench, urls: dict[str, str]) -> dict[str, load.Batch]:
    """Interleaved rounds of the stored turn on each proxy (one connection)."""
    raw = {}
    for name, url in urls.items():
        raw[name] = load.build_request("POST", url + RESPONSES, turn_body(await _kept(url)))
        await load.closed_loop(url + RESPONSES, lambda _i, n=name: raw[n], concurrency=1,
                               duration=0.3, max_duration=10)  # warm-up
    batches: dict[str, load.Batch] = {}
    names = list(urls)
    for rnd in range(bench.rounds):
        for name in names if rnd % 2 == 0 else names[::-1]:
            batch = await load.closed_loop(
                urls[name] + RESPONSES, lambda _i, n=name: raw[n], concurrency=1,
                duration=bench.batch_s * 2, min_requests=50, max_duration=30)
            if name in batches:
                batches[name].extend(batch)
            else:
                batches[name] = batch
    return batches


async def section(bench: Bench) -> None:
    """The store rows: a stored turn on SQLite and on Redis, p50 and what Redis adds."""

    bench.section("Responses store: a stored turn (store: true, previous_response_id; c1, 0 ms)")
    if shutil.which("redis-server") is None or importlib.util.find_spec("redis") is None:
        bench.notes.append("store: redis-server or the redis package is missing: no Redis row")
        return
    tmp = bench.stack.tmp
    port = free_port()
    started: list[Proc] = []
    urls: dict[str, str] = {}
    with redis_server(tmp, port):
        try:
            for name, store in (("sqlite", f"sqlite://{tmp}/bench-store.sqlite3"),
                                ("redis", f"redis://127.0.0.1:{port}/0")):
                proc, urls[name] = start_proxy(bench, f"store-{name}", store)
                started.append(proc)
            batches = await measure(bench, urls)
            for name, url in urls.items():  # the turns were kept, not only answered
                kept = await _kept(url)
                got = await load.simple(f"{url}{RESPONSES}/{kept}", timeout=30)
                if got.status != 200:
                    bench.notes.append(f"store: {name} did not keep its answers ({got.status})")
        finally:
            for proc in started:
                proc.stop()
    stats = {name: load.summarize(batch) for name, batch in batches.items()}
    for name, batch in batches.items():
        bench.detail(f"stored turn c1 0ms [{name}]", "proxy", batch, float("nan"))
    sqlite, redis = stats["sqlite"]["total_p50"], stats["redis"]["total_p50"]
    added = redis - sqlite
    bench.rows.append(Row("stored turn p50: SQLite | Redis (what Redis adds)", ms(sqlite),
                          ms(redis), f"{added * 1000:+.2f} ms", "≤ +1 ms",
                          "pass" if added <= TARGET else "FAIL"))
    errors = {name: s["errors"] for name, s in stats.items() if s["errors"]}
    if errors:
        bench.notes.append(f"store: failed stored turns {errors}: "
                           f"{[load.first_errors(b) for b in batches.values()]}")

