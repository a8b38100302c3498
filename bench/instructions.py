"""What one request costs the proxy's worker, in instructions: callgrind counts, or cProfile.

Why: on a shared machine a worker's CPU time swings by a third from one run to the next;
the instructions it executes per request do not. This starts the bench's stack (the fake
vLLM, gunicorn with deploy/gunicorn.conf.py, ONE gevent worker) with the gunicorn master and
its worker under valgrind's callgrind, instrumentation off while they boot, then per scenario:
a warm-up, instrumentation on and the counters zeroed (`callgrind_control`), N requests,
the counters dumped; instructions per request (per token for `streamed`) are printed. With
`--cprofile`, the worker runs natively under cProfile instead (its timer the process's CPU
time, so that preemption by other processes is not counted), and the top functions by
cumulative and own time are printed, with their call counts per request.

Needs valgrind (`apt-get install valgrind`) for the counts; nothing for `--cprofile`.

    python -m bench.instructions buffered-1k passthrough-json streamed
    python -m bench.instructions buffered-1k --cprofile --requests 400
    python -m bench.instructions passthrough-json --app bench.floors:bare   (the stack's floor)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import shutil
import sys
import time
from pathlib import Path

from bench import load, run, streamed
from bench.harness import CHAT, MESSAGES, TOOLS, chat_body
from bench.stack import ROOT, Stack

# name: (fake spec, client streams, with tools, concurrency, requests, units per request).
# The counts are taken one request at a time (`--concurrency` for more): a worker slowed 50
# times by callgrind and given several at once falls behind, and then handles several
# events per wake-up, as many as the machine's load lets pile up: counts that move with it.
SCENARIOS: dict[str, tuple[str, bool, bool, int, int, int]] = {
    "buffered-1k": ("delay_ms=20,size=1k,kind=tool,chunks=1,gap_ms=0", True, True, 8, 200, 1),
    "buffered-64k": ("delay_ms=20,size=64k,kind=tool,chunks=16,gap_ms=0", True, True, 8, 60,
                     1),
    "buffered-1m": ("delay_ms=20,size=1m,kind=tool,chunks=256,gap_ms=0", True, True, 8, 20,
                    1),
    "passthrough-json": ("delay_ms=20,size=1k,kind=text", False, False, 8, 200, 1),
    "passthrough-stream": ("delay_ms=20,size=4k,kind=text,chunks=100,gap_ms=50", True, False,
                           4, 4, 100),
    "streamed": ("delay_ms=20,size=4k,kind=tool,chunks=100,gap_ms=50", True, True, 4, 4,
                 streamed.CHUNKS),
}
PROFILE_CONF = Path(__file__).with_name("profiled_gunicorn.py")


def _body(name: str) -> bytes:
    spec, stream, tools, *_ = SCENARIOS[name]
    if name == "streamed":
        return streamed.request_body(spec, TOOLS, MESSAGES)
    return chat_body(spec, stream=stream, tools=tools)


def _drive(url: str, name: str, requests: int, concurrency: int = 0) -> load.Batch:
    """`requests` requests of scenario `name` at `concurrency` (0: the scenario's own), all
    checked to succeed."""
    concurrency = concurrency or SCENARIOS[name][3]
    raw = load.build_request("POST", url, _body(name))
    batch = asyncio.run(load.closed_loop(url, lambda _i: raw, concurrency=concurrency,
                                         duration=0.0, min_requests=requests,
                                         max_requests=requests, max_duration=3600,
                                         timeout=600))
    failed = [r.failure() for r in batch.results if not r.ok]
    if failed:
        raise RuntimeError(f"{name}: {len(failed)} of {requests} failed, e.g. {failed[0]}")
    return batch


def _total(dump_dir: Path, pid: int, before: set[Path]) -> int:
    """The instructions of the newest dump of `pid` (its `summary:` or `totals:` line)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fresh = sorted(set(dump_dir.glob(f"cg.{pid}*")) - before,
                       key=lambda p: p.stat().st_mtime)
        for path in reversed(fresh):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        time.sleep(0.2)
    raise RuntimeError(f"no callgrind dump of {pid} in {dump_dir}")


class _Stack(Stack):
    """The bench's stack, gunicorn's command wrapped (valgrind, or the cProfile conf)."""

    def __init__(self, opts: argparse.Namespace, wrap: list[str]) -> None:
        super().__init__(opts, run.models_env())  # the streamed scenario's model streams
        self.wrap = wrap

    def gunicorn_cmd(self, port: int) -> list[str]:
        cmd = super().gunicorn_cmd(port)
        if self.wrap and not cmd[0].endswith("python"):  # valgrind follows no #! line
            cmd = [sys.executable, *cmd]
        return [*self.wrap, *cmd]


def _ask(control: Path, what: str) -> None:
    """Have the worker do `what` (bench/profiled_gunicorn.py) and wait until it has."""
    (control / what).touch()
    deadline = time.monotonic() + 120
    while not (control / "done").exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not {what} in 120 s")
        time.sleep(0.05)
    (control / "done").unlink()


def _counts(args: argparse.Namespace, opts: argparse.Namespace) -> None:
    stack = _Stack(opts, [])
    stack.boot_seconds = 600
    control, dump_dir = stack.tmp / "control", stack.tmp / "callgrind"
    control.mkdir()
    dump_dir.mkdir()
    os.environ["BENCH_CPROFILE_DIR"] = str(control)
    opts.conf = str(PROFILE_CONF.relative_to(ROOT))
    stack.wrap = ["valgrind", "--tool=callgrind", "--zero-before=getloadavg",
                  "--dump-before=ctermid", f"--callgrind-out-file={dump_dir}/cg.%p",
                  "--dump-instr=no", "--dump-line=no", "--compress-strings=no"]
    try:
        stack.start_fake()
        stack.start_proxy()
        assert stack.proxy is not None
        worker = load.descendants(stack.proxy.pid)[-1]
        url = stack.proxy_url + CHAT
        for name in args.scenarios:
            *_, n, units = SCENARIOS[name]
            n = args.requests or n
            _drive(url, name, max(8, n // 10))  # warm-up: imports, pools, profiles
            _ask(control, "zero")
            before = set(dump_dir.glob("cg.*"))
            _drive(url, name, n, args.concurrency)
            _ask(control, "dump")
            total = _total(dump_dir, worker, before)
            unit = "token" if units > 1 else "request"
            print(f"{name}: {total / (n * units) / 1e6:.3f} M instructions per {unit} "
                  f"({n} requests, {total / 1e6:.0f} M)", flush=True)
    finally:
        stack.stop()


def _profile(args: argparse.Namespace, opts: argparse.Namespace) -> None:
    stack = _Stack(opts, [])
    control = stack.tmp / "cprofile"
    control.mkdir()
    opts.conf = str(PROFILE_CONF.relative_to(ROOT))
    os.environ["BENCH_CPROFILE_DIR"] = str(control)
    try:
        stack.start_fake()
        stack.start_proxy()
        url = stack.proxy_url + CHAT
        for name in args.scenarios:
            *_, n, units = SCENARIOS[name]
            n = args.requests or n
            _drive(url, name, max(8, n // 10))
            (control / "start").touch()
            time.sleep(0.5)
            _drive(url, name, n)
            (control / "stop").touch()
            deadline = time.monotonic() + 30
            while not list(control.glob("*.prof")) and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(0.5)
            dumps = sorted(control.glob("*.prof"))
            stats = pstats.Stats(*map(str, dumps))
            print(f"== {name}: {n} requests ({n * units} units)", flush=True)
            _print_collections(control, n)
            _print_stats(stats, n, args.top)
            if args.out:
                for path in dumps:
                    shutil.copy(path, Path(args.out) / f"{name}-{path.name}")
            for path in [*dumps, *control.glob("*.gc")]:
                path.unlink()
    finally:
        stack.stop()


def _print_collections(control: Path, n: int) -> None:
    """The collector's runs while profiled: how many per request, and the longest, by
    generation (wall time, with the profiler on: an upper bound)."""
    runs: dict[int, list[float]] = {}
    for path in control.glob("*.gc"):
        for line in path.read_text().split("\n"):
            if line:
                generation, seconds = line.split()
                runs.setdefault(int(generation), []).append(float(seconds))
    print("collections: " + ", ".join(
        f"gen{g} {len(s) / n:.2f}/req (longest {max(s) * 1e3:.2f} ms)"
        for g, s in sorted(runs.items())) if runs else "collections: none")


def _print_stats(stats: pstats.Stats, n: int, top: int) -> None:
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _cc, _nc, tt, _ct, _callers in rows.values())
    print(f"CPU {total / n * 1e3:.3f} ms per request (profiled; cProfile's own cost in it)")

    def label(key: tuple[str, int, str]) -> str:
        path, line, func = key
        return f"{func} ({path.rsplit('/', 1)[-1]}:{line})" if line else func

    layers: dict[str, float] = {}
    for (path, _line, _func), (_cc, _nc, tt, _ct, callers) in rows.items():
        if path != "~" or not callers:
            layers[_layer(path)] = layers.get(_layer(path), 0.0) + tt
            continue
        for (caller, _l, _f), (_c, _n, share, _t) in callers.items():  # C: its caller's
            layers[_layer(caller)] = layers.get(_layer(caller), 0.0) + share
    print("-- own time by layer (a C function's in its caller's): ms/req, share")
    for layer, seconds in sorted(layers.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {seconds / n * 1e3:7.3f}  {100 * seconds / total:5.1f}%  {layer}")
    for title, index in (("cumulative", 3), ("own", 2)):
        print(f"-- by {title} time: ms/req, calls/req")
        for key, value in sorted(rows.items(), key=lambda kv: -kv[1][index])[:top]:
            print(f"  {value[index] / n * 1e3:7.3f}  {value[1] / n:8.1f}  {label(key)}")


def _layer(path: str) -> str:
    """Which package (or the standard library's module) a function's file belongs to: the
    proxy's own by sub-package."""
    if path == "~":
        return "builtins (C)"
    parts = Path(path).parts
    if "proxy" in parts:
        i = len(parts) - 1 - parts[::-1].index("proxy")
        return "/".join(parts[i:i + 3 if len(parts) > i + 3 else i + 2])
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1]
    kept = parts[-2:] if len(parts) > 1 and parts[-2] in ("http", "email", "json") else parts[-1:]
    return "stdlib " + "/".join(kept)


def main(argv: list[str] | None = None) -> int:
    """Count or profile the scenarios named."""
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("scenarios", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--requests", type=int, default=0, help="per scenario (default: its own)")
    parser.add_argument("--cprofile", action="store_true", help="cProfile instead of counts")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="for the counts (cProfile runs each scenario's own)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", default="", help="keep the cProfile dumps here")
    parser.add_argument("--keep", action="store_true", help="keep the logs and dumps")
    parser.add_argument("--app", default="app:app",
                        help="the WSGI app gunicorn serves (bench/floors.py: the stack alone)")
    args = parser.parse_args(argv)
    if not args.cprofile and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (apt-get install valgrind), or use --cprofile")
    opts = run.parse_args(["--workers", "1", "--app", args.app,
                           *(["--keep-logs"] if args.keep else [])])
    (_profile if args.cprofile else _counts)(args, opts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
