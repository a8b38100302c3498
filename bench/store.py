"""`python -m bench.store`: what the SQLite response store costs per call on a full-ish file.

Fills a temporary store with ROWS answers (10 owners, ~5 KB each: a 2 KB input item and a
3 KB GET body; each owner's answers one chain), then times, per call: the admission check a
`store: true` turn makes before upstream (`usage`), `put` (with eviction past a cap), `get`,
recalling one owner's whole chain, and refusing that chain against a 1 MB limit (sizes
summed, no item read). Numbers are for comparing versions on one machine, not targets.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from typing import Any

import orjson

from proxy.base.errors import ProxyError
from proxy.fronts import StoredResponse
from proxy.shell.store.interface import StoreLimits
from proxy.shell.store.sqlite import SqliteStore

OWNERS = 10
ITEMS = [{"type": "message", "role": "user", "content": "x" * 2000}]
BODY = b'{"pad": "' + b"y" * 3000 + b'"}'


def _fill(path: str, rows: int) -> tuple[SqliteStore, list[str]]:
    """A store at `path` holding `rows` answers, chained per owner (the last ids returned)."""
    store = SqliteStore(path, StoreLimits(max_responses=0, max_bytes_per_key=0, max_bytes=0))
    owners = [store.owner(f"sk-{n}") for n in range(OWNERS)]
    store.put(owners[0], StoredResponse("first", None, ITEMS, BODY))  # creates the file and schema
    items = orjson.dumps(ITEMS)
    now = time.time()
    batch = [(owners[i % OWNERS], f"r{i}", f"r{i - OWNERS}" if i >= OWNERS else None,
              now + i * 1e-6, len(items), len(items) + len(BODY), items, BODY)
             for i in range(rows)]
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)", batch)
    last = [f"r{rows - OWNERS + n}" for n in range(OWNERS)]
    return store, [owners[int(rid[1:]) % OWNERS] + " " + rid for rid in last]


def _time(label: str, work: Callable[[], Any], calls: int) -> None:
    started = time.perf_counter()
    for _ in range(calls):
        work()
    print(f"{label:<48} {(time.perf_counter() - started) / calls * 1000:8.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store, tails = _fill(os.path.join(folder, "r.sqlite3"), args.rows)
        owner, tail = tails[0].split(" ")
        chain = args.rows // OWNERS
        print(f"{args.rows} answers, {OWNERS} owners, chains of {chain}")
        _time("usage (admission before upstream)", lambda: store.usage(owner), 50)
        capped = SqliteStore(store.path, StoreLimits(max_bytes_per_key=20 * 1024 * 1024))

        other = tails[1].split(" ")[0]  # another owner: the chain timed below stays whole

        def put() -> None:
            assert capped.put(other, StoredResponse(f"n{time.time_ns()}", None, ITEMS, BODY))

        _time("put, past the per-key cap (first: lets 1000 go)", put, 1)
        _time("put, past the per-key cap (then: lets one go)", put, 20)
        _time("put, under the caps", lambda: store.put(
            other, StoredResponse(f"m{time.time_ns()}", None, ITEMS, BODY)), 20)
        _time("get", lambda: store.get(owner, tail), 200)
        _time(f"recall a chain of {chain} (~{chain * 2 // 1000} MB of items)",
              lambda: store.recall(owner, tail), 5)

        def refused() -> None:
            try:
                store.recall(owner, tail, 1_000_000)
            except ProxyError:
                return
            raise AssertionError("not refused")

        _time("refuse that chain at 1 MB", refused, 20)


if __name__ == "__main__":
    main()
