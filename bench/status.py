"""`make bench`, the status page's rows (issue 29): what keeping a turn for /proxy/status costs.

In this process, no network: a buffered tool turn's `RequestLog` (a Hermes call with a repair
and a frame left as text) made into its `TurnRecord` and kept by each recorder — in memory
(one process) and in a worker's ring file (gunicorn) — CPU time per turn (process_time over
many turns), beside the server CPU a whole buffered 1 KB turn costs in the same run. Then the
cost of `status.json` over full rings of two workers (what one page refresh asks).
Target: ≤ 0.05 ms of CPU per turn to record.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable

from bench.harness import Bench
from proxy.shell.recorder.rings import RING_TURNS, MemoryRecorder, Recorder, RingFileRecorder
from proxy.telemetry.request_log import RequestLog
from proxy.telemetry.status import StatusInput, document, turn_record
from proxy.turn.result import Outcome, Repair, TextLeft

TARGET_SECONDS = 0.00005


def sample_log(number: int) -> RequestLog:
    """A finished buffered tool turn's log record, as the shell fills it in."""
    log = RequestLog(f"{number:016x}", "POST", "/v1/chat/completions")
    log.front, log.mode, log.model, log.client_stream = "chat", "buffered", "qwen3", True
    log.status = log.upstream_status = 200
    log.upstream, log.upstream_ms = "http://127.0.0.1:8000", 812.4
    log.tools = frozenset({"read", "write"})
    log.outcome = Outcome(tool_calls=1, formats=["hermes"], call_formats=["hermes"],
                          repairs=[Repair("hermes", "trailing_comma", "read")],
                          left_as_text=[TextLeft("hermes", "unknown_tool", None)],
                          finish_before=["stop"], finish_after=["tool_calls"])
    return log


def per_turn(recorder: Recorder, turns: int) -> float:
    """CPU seconds per turn to build the record and keep it (median of 5 rounds)."""
    logs = [sample_log(i) for i in range(turns)]
    rounds = []
    for _ in range(5):
        started = time.process_time()
        for log in logs:
            recorder.record(turn_record(log, time.time(), 815.0))
        rounds.append((time.process_time() - started) / turns)
    return sorted(rounds)[2]


def document_cost(workers: int) -> tuple[float, int]:
    """CPU seconds for one status.json over `workers` full rings, and the turns it read."""
    with tempfile.TemporaryDirectory() as folder:
        for worker in range(1, workers + 1):
            recorder = RingFileRecorder(folder, worker=lambda worker=worker: worker)
            for i in range(RING_TURNS):
                recorder.record(turn_record(sample_log(i), time.time(), 815.0))
        started = time.process_time()
        doc = document(StatusInput(recorder.turns(), recorder.minutes(),
                                   ["http://127.0.0.1:8000"]))
        return time.process_time() - started, doc["held"]["turns"]


def section(bench: Bench, row: Callable[..., object]) -> None:
    """The rows: recording per turn (memory, ring file) beside the turn, and a refresh."""
    bench.section("status page (recording a turn; one status.json)")
    turns = 2000 if bench.opts.quick else 20000
    turn_cpu = getattr(bench, "turn_cpu", None)
    with tempfile.TemporaryDirectory() as folder:
        for name, recorder in (("in memory", MemoryRecorder()),
                               ("ring file (gunicorn worker)", RingFileRecorder(folder))):
            cost = per_turn(recorder, turns)
            beside = (f"{cost / turn_cpu:.1%} of a turn's {turn_cpu * 1000:.2f} ms"
                      if turn_cpu else "—")
            bench.rows.append(row(f"status: record one turn, {name}", "—",
                                  f"{cost * 1e6:.1f} µs", beside, "≤ 0.05 ms",
                                  "pass" if cost <= TARGET_SECONDS else "FAIL"))
    cost, held = document_cost(2)
    bench.rows.append(row(f"status: one status.json over 2 full rings ({held} turns)", "—",
                          f"{cost * 1000:.1f} ms", "—", "—", ""))
