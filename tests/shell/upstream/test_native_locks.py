"""The upstream room's locks are the OS threads' own (`native_lock`), which a greenlet
may hold only where no switch can come: every section under them calls only what never
waits nor does I/O (read from the code, against a list: a new call there is looked at
before it joins it), and many greenlets (and native threads) going through them at once
neither stall nor lose a count."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_MODULES = ("proxy/shell/upstream/profiles.py", "proxy/shell/upstream/replicas.py",
            "proxy/shell/upstream/tracking.py")
# What a section under one of these locks may call: data structures, clocks, pure functions
# of the proxy's own (`choose`: choice.py; `mask_url`), dataclasses, and two that start
# work without waiting for it (`Learning` makes an event; `self._is_up` may spawn a probe).
_NEVER_WAIT = {
    "ReplicaLoad", "Refusal", "Learning", "choose", "mask_url", "next", "len", "round",
    "sorted", "isinstance", "time.time", "self._clock", "self._is_up", "config.replicas",
    "profile.current", "refusal.record", "self._known.items", "self._known.get",
    "self._known.move_to_end", "self._known.popitem", "self._since.get", "self._listings.get",
    "self._pending.get", "self._checked.get", "self._checked.popitem",
    "self._refusals.append", "self._states.items"}


def _sections() -> list[tuple[str, int, set[str]]]:
    sections = []
    for path in _MODULES:
        tree = ast.parse((ROOT / path).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.With) and any(
                    ast.unparse(item.context_expr) in ("self._lock", "self._holding")
                    for item in node.items):
                calls = {ast.unparse(call.func) for statement in node.body
                         for call in ast.walk(statement) if isinstance(call, ast.Call)}
                sections.append((path, node.lineno, calls))
    return sections


def test_every_section_under_a_native_lock_calls_only_what_never_waits():
    sections = _sections()
    assert len(sections) >= 25
    for path, line, calls in sections:
        assert calls <= _NEVER_WAIT, (path, line, calls - _NEVER_WAIT)


def test_the_locks_are_native_ones():
    for path in _MODULES:
        text = (ROOT / path).read_text()
        assert "threading.Lock()" not in text
        assert "native_lock()" in text


PROBE = """
from gevent import monkey; monkey.patch_all()
import threading, gevent
from proxy.base.config import Config
from proxy.shell.upstream.client import Upstream
from proxy.shell.upstream.replicas import Replicas
from proxy.shell.upstream.tracking import ConnectionTracker
from proxy.telemetry.metrics import Metrics
urls = ("http://127.0.0.1:9", "http://127.0.0.1:10")
config = Config(upstream=urls)
replicas = Replicas({url: Upstream(url) for url in urls}, Metrics(shared=False))
print(type(replicas._lock).__module__, type(ConnectionTracker()._lock).__name__)
def turn(i):
    for _ in range(50):
        url = replicas.choose(config, str(i), reserve=True)
        gevent.sleep(0)
        replicas.mark_up(url)
        replicas.end(url, None)
def native(i):
    for _ in range(200):
        replicas.begin(urls[0])
        replicas.end(urls[0], None)
workers = [gevent.spawn(turn, i) for i in range(100)]
pool = gevent.get_hub().threadpool
workers += [pool.spawn(native, i) for i in range(2)]
gevent.joinall(workers, timeout=30)
print(all(w.ready() for w in workers), [r["in_flight"] for r in replicas.reports()])
"""


def test_greenlets_and_threads_through_the_replicas_lock_neither_stall_nor_lose_a_count():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split("\n")
    assert out[:2] == ["_thread lock", "True [0, 0]"]
