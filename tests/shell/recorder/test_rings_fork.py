"""A worker's ring is opened once in its process, and again in a forked child: the fork is
seen by the fork count (`os.register_at_fork`), not by asking the process id each request."""

from __future__ import annotations

import multiprocessing
import os
import time

from proxy.shell.recorder.rings import RingFileRecorder
from proxy.telemetry.status import TurnRecord

NOW = time.time()


def _turn(request_id: str) -> TurnRecord:
    return TurnRecord(ts=NOW, request_id=request_id, front="chat", mode="buffered",
                      model="qwen", stream=False, status=200, upstream="http://up",
                      upstream_status=200, upstream_ms=1.0, total_ms=2.0)


def test_the_process_id_is_asked_when_the_ring_opens_only(tmp_path):
    asked: list[int] = []

    def worker() -> int:
        asked.append(1)
        return 4245

    recorder = RingFileRecorder(str(tmp_path), capacity=16, worker=worker)
    recorder.owner("key")
    opened = len(asked)
    assert opened >= 1
    for i in range(5):
        recorder.owner("key")
        recorder.record(_turn(str(i)))
    assert len(asked) == opened
    assert sorted(t.request_id for t in recorder.turns()) == [str(i) for i in range(5)]
    assert [p.name for p in tmp_path.glob("*.ring")] == ["turns-4245.ring"]


def _record_in_the_child(recorder: RingFileRecorder) -> None:
    recorder.record(_turn("child"))


def test_a_forked_child_opens_a_ring_of_its_own(tmp_path):
    recorder = RingFileRecorder(str(tmp_path), capacity=16)
    recorder.record(_turn("parent"))
    child = multiprocessing.get_context("fork").Process(target=_record_in_the_child,
                                                        args=(recorder,))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    rings = sorted(p.name for p in tmp_path.glob("*.ring"))
    assert rings == sorted([f"turns-{os.getpid()}.ring", f"turns-{child.pid}.ring"])
    assert sorted(t.request_id for t in recorder.turns()) == ["child", "parent"]
    recorder.record(_turn("parent-again"))  # the parent still writes its own ring
    assert sorted(t.request_id for t in recorder.turns()) == ["child", "parent",
                                                              "parent-again"]
