"""The status rings' locks are the OS threads' own (`native_lock`), which a greenlet may
hold only where no switch can come: every section under them calls only what never waits
on the hub (read from the code, against a list: a new call there is looked at before it
joins it). The ring's file work (open, map, prune, a capture written) is local disk, which
gevent leaves blocking; a warning is one log line to stderr. Greenlets recording at once,
one yielding between its records, neither stall nor lose a record."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_MODULE = ROOT / "proxy/shell/recorder/rings.py"
_NEVER_WAIT = {
    "RING_HEADER.pack_into", "SLOT_HEAD.pack_into", "TurnRecord.decode", "contextlib.suppress",
    "len", "list", "owner_hash", "ring_slots", "self._captures.get", "self._captures.popitem",
    "self._count_minute", "self._decoded.get", "self._files", "self._keep_capture",
    "self._memory.minutes", "self._memory.record", "self._memory.turns",
    "self._minutes.count", "self._prune", "self._ring", "self._turns.append",
    "time.monotonic", "turn.encode", "zlib.crc32"}


def test_every_section_under_a_ring_lock_calls_only_what_never_waits():
    sections = []
    for node in ast.walk(ast.parse(_MODULE.read_text())):
        if isinstance(node, ast.With) and any(
                ast.unparse(item.context_expr) == "self._lock" for item in node.items):
            sections.append((node.lineno, {ast.unparse(call.func) for statement in node.body
                                           for call in ast.walk(statement)
                                           if isinstance(call, ast.Call)}))
    assert len(sections) >= 9
    for line, calls in sections:
        assert calls <= _NEVER_WAIT, (line, calls - _NEVER_WAIT)


def test_the_locks_are_native_ones():
    text = _MODULE.read_text()
    assert "threading.Lock()" not in text
    assert text.count("native_lock()") == 2


PROBE = """
from gevent import monkey; monkey.patch_all()
import sys, time, gevent
from proxy.shell.recorder.rings import MemoryRecorder, RingFileRecorder
from proxy.telemetry.status import TurnRecord
recorders = [RingFileRecorder(sys.argv[1], capacity=4096), MemoryRecorder(capacity=4096)]
print(type(recorders[0]._lock).__module__, type(recorders[1]._lock).__module__)
def turn(i):
    for j in range(20):
        for recorder in recorders:
            recorder.owner("key")
            recorder.record(TurnRecord(ts=time.time(), request_id=f"{i}-{j}", front="chat",
                                       mode="buffered", model="m", stream=False, status=200,
                                       upstream="http://up", upstream_status=200,
                                       upstream_ms=1.0, total_ms=2.0))
        gevent.sleep(0)
workers = [gevent.spawn(turn, i) for i in range(50)]
gevent.joinall(workers, timeout=60)
print(all(w.successful() for w in workers), [len(r.turns()) for r in recorders])
"""


def test_greenlets_recording_at_once_neither_stall_nor_lose_a_record(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split("\n")[:2] == ["_thread _thread", "True [1000, 1000]"]
