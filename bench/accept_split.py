"""How a client's keep-alive connections spread over the proxy's workers (load-independent).

Why: at c8 the bench's 8 connections, opened at once, landed mostly on one of the 2 workers
(the first awake takes each from the shared listening socket), and that worker's queueing
was the tail (bench/RESULTS.md, issue 46). What a worker holds does not depend on how fast
the machine is, only on who accepted: this starts the bench's stack (the fake vLLM, gunicorn
with deploy/gunicorn.conf.py, `--workers` workers), and per trial opens C connections at
once, sends one buffered tool turn on each (as the bench's closed loop does), reads from
/proc which worker holds each connection, closes them and waits until the workers have let
them go. It prints the mean of the busiest worker's share and how often each split came.
With `--rounds`, it then runs that many rounds of turns back to back on new connections (as
each round of the bench's buffered scenario does) and prints the busiest worker's share of
the workers' CPU time.

    python -m bench.accept_split --trials 100 --connections 8 --workers 2 --rounds 20
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import time
from collections.abc import Iterable

from bench import load, run
from bench.harness import chat_body
from bench.stack import Stack

TURN = "delay_ms=20,size=1k,kind=tool,chunks=1,gap_ms=0"  # the buffered 1 KB tool turn


def _established(port: int) -> set[str]:
    """The socket inodes of the TCP connections established on local port `port`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)
                for row in rows:
                    fields = row.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                        inodes.add(fields[9])
        except OSError:
            continue
    return inodes


def holders(pids: Iterable[int], port: int) -> dict[int, int]:
    """How many connections established on local port `port` each process of `pids` holds."""
    inodes = _established(port)
    held = {}
    for pid in pids:
        count = 0
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    count += 1
        except OSError:
            continue
        held[pid] = count
    return held


def workers_of(master: int) -> list[int]:
    """The gunicorn master's workers (its live descendants, itself left out)."""
    return [pid for pid in load.descendants(master) if pid != master]


async def _one_trial(url: str, raw: bytes, connections: int) -> list[load.HttpConnection]:
    host, port = load.host_port(url)

    async def one() -> load.HttpConnection:
        conn = await load.connect(host, port)
        result = await conn.request(raw, timeout=30)
        if not result.ok:
            raise RuntimeError(f"a turn failed: {result.failure()}")
        return conn

    return list(await asyncio.gather(*(one() for _ in range(connections))))


def split(url: str, master: int, raw: bytes, connections: int) -> list[int]:
    """One trial: the connections each worker holds, busiest first."""
    port = load.host_port(url)[1]
    workers = workers_of(master)

    async def trial() -> list[int]:
        conns = await _one_trial(url, raw, connections)
        try:
            return sorted(holders(workers, port).values(), reverse=True)
        finally:
            for conn in conns:
                conn.close()

    counts = asyncio.run(trial())
    deadline = time.monotonic() + 10
    while sum(holders(workers, port).values()) and time.monotonic() < deadline:
        time.sleep(0.02)  # until every worker has closed its side
    return counts


def cpu_share(url: str, master: int, raw: bytes, connections: int, seconds: float) -> float:
    """One round as the bench's buffered scenario runs it (C new connections, turns back to
    back for `seconds`): the busiest worker's share of the workers' CPU time."""
    workers = workers_of(master)
    before = [load.cpu_seconds(pid) for pid in workers]
    asyncio.run(load.closed_loop(url, lambda _i: raw, concurrency=connections,
                                 duration=seconds, timeout=30))
    spent = [load.cpu_seconds(pid) - was for pid, was in zip(workers, before, strict=True)]
    return max(spent) / max(sum(spent), 1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.accept_split", description=__doc__)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=0,
                        help="then this many rounds of turns back to back: the CPU split")
    parser.add_argument("--seconds", type=float, default=2.0, help="a round's length")
    args = parser.parse_args(argv)
    opts = run.parse_args(["--workers", str(args.workers)])
    stack = Stack(opts)
    try:
        stack.start_fake()
        stack.start_proxy()
        assert stack.proxy is not None
        raw = load.build_request("POST", stack.proxy_url + "/v1/chat/completions",
                                 chat_body(TURN, stream=True, tools=True))
        splits = [split(stack.proxy_url, stack.proxy.pid, raw, args.connections)
                  for _ in range(args.trials)]
        shares = [cpu_share(stack.proxy_url, stack.proxy.pid, raw, args.connections,
                            args.seconds) for _ in range(args.rounds)]
    finally:
        stack.stop()
    busiest = [counts[0] for counts in splits]
    seen = collections.Counter("/".join(map(str, counts)) for counts in splits)
    load_avg = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.connections} connections over {args.workers} workers, {args.trials} trials "
          f"(load average {load_avg}): the busiest worker held {sum(busiest) / len(busiest):.2f}"
          f" on average, at most {max(busiest)}")
    for counts, times in seen.most_common():
        print(f"  {counts}: {times}")
    if shares:
        print(f"{args.rounds} rounds of {args.seconds:g} s: the busiest worker spent "
              f"{100 * sum(shares) / len(shares):.1f} % of the workers' CPU on average, "
              f"at most {100 * max(shares):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
