"""deploy/gunicorn.conf.py, with the worker's cost measured while `bench.instructions` asks.

The worker watches $BENCH_CPROFILE_DIR for a file the harness touches:
- `start` turns cProfile on (its timer the process's CPU time), `stop` turns it off and
  writes `<pid>.prof` there. Every greenlet runs in the worker's one thread, so one profiler
  sees them all (a greenlet switch reads as a return to the hub: cumulative times of a
  function that waits include other greenlets' work; own times and call counts are exact).
  Each collection of the collector meanwhile is timed, in `<pid>.gc` (generation, seconds).
- `zero` and `dump`, under callgrind started with `--zero-before=getloadavg
  --dump-before=ctermid`: the worker calls those two C functions (nothing else in it does),
  so callgrind zeroes its counters, or writes them, at that moment (valgrind's own control
  channel, vgdb, does not reach a forked worker). `done` is written after each.
"""

import cProfile
import gc
import os
import runpy
import time
from pathlib import Path
from typing import Any

globals().update({k: v for k, v in runpy.run_path(
    str(Path(__file__).resolve().parent.parent / "deploy" / "gunicorn.conf.py")).items()
    if not k.startswith("__")})
_deploy_post_worker_init = post_worker_init  # noqa: F821 (from the deploy settings)


def post_worker_init(worker: Any) -> None:
    """The deploy hook, then the watcher (a greenlet: threading is patched)."""
    _deploy_post_worker_init(worker)
    import threading

    control = Path(os.environ["BENCH_CPROFILE_DIR"])

    listed: list[str] = []

    def asked(name: str) -> bool:
        if name not in listed:
            return False
        (control / name).unlink()
        return True

    collections: list[tuple[int, float]] = []  # (generation, seconds), while profiled
    began: list[float] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[:] = [time.perf_counter()]
        elif began:
            collections.append((info["generation"], time.perf_counter() - began[0]))

    def watch() -> None:
        profiler = None
        while worker.alive:
            time.sleep(0.2)
            listed[:] = os.listdir(control)  # one system call a look: little to count
            if asked("zero"):
                os.getloadavg()
                (control / "done").touch()
            elif asked("dump"):
                os.ctermid()
                (control / "done").touch()
            elif profiler is None and asked("start"):
                collections.clear()
                gc.callbacks.append(timed)
                profiler = cProfile.Profile(time.process_time)
                profiler.enable()
            elif profiler is not None and asked("stop"):
                profiler.disable()
                gc.callbacks.remove(timed)
                (control / f"{os.getpid()}.gc").write_text(
                    "\n".join(f"{g} {s:.6f}" for g, s in collections))
                profiler.dump_stats(str(control / f"{os.getpid()}.tmp"))
                os.replace(control / f"{os.getpid()}.tmp", control / f"{os.getpid()}.prof")
                profiler = None

    threading.Thread(target=watch, daemon=True).start()
