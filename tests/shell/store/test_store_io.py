"""Store I/O under gevent never stalls the worker: SQLite runs in gevent's thread pool, so
while one greenlet waits on a conversation the file's lock holds up, the worker's other
greenlets (a stream's heartbeats) keep beating. Order of events, never timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _probe(tmp_path: Path, busy_seconds: float, *extra: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.store_gevent_probe", str(tmp_path / "r.sqlite3"),
         str(busy_seconds), *extra], cwd=ROOT, capture_output=True, timeout=300, check=True)
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_heartbeats_go_on_while_a_recall_waits_on_the_store(tmp_path):
    events = _probe(tmp_path, 120)
    assert events == ["recall started", "heartbeat", "heartbeat", "heartbeat",
                      "lock released", "recalled 200 items"]


def test_the_probe_sees_a_recall_that_blocks_the_worker(tmp_path):
    """The same probe, store calls on the hub: the recall holds every greenlet until the
    store gives up on the lock (what the thread pool prevents)."""
    events = _probe(tmp_path, 1, "plain")
    assert events == ["recall started", "recall failed: store_unavailable", "heartbeat",
                      "heartbeat", "heartbeat", "lock released"]
