"""Where does a proxied request spend its CPU? A py-spy profile of one scenario.

Why: where a target of `make bench` is missed, the note must say what bounds it, from a
profile. This starts the same stack as `bench.run` (fake vLLM + gunicorn with
deploy/gunicorn.conf.py) with ONE worker pinned to CPU 1 and everything else (fake, load
generator) pinned to CPU 0, so the worker is never preempted by the processes it wakes: py-spy's
"active" samples then approximate CPU, not waiting. It drives one scenario against the proxy,
records the worker with py-spy, and prints the share of samples under each function
(inclusive and self), plus requests/s and server CPU per request.

Needs py-spy in the virtualenv (`.venv/bin/pip install py-spy`); not a runtime dependency.

    python -m bench.profile buffered-1k --seconds 10
    python -m bench.profile passthrough-stream --worker-class gthread --threads 32
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench import load, run, streamed
from bench.harness import CHAT, MESSAGES, TOOLS, chat_body
from bench.stack import Stack
from bench.table import ms

SCENARIOS: dict[str, tuple[str, bool, bool, int]] = {
    # name: (fake spec, client streams, with tools, concurrency)
    "buffered-1k": ("delay_ms=20,size=1k,kind=tool,chunks=1,gap_ms=0", True, True, 8),
    "buffered-64k": ("delay_ms=20,size=64k,kind=tool,chunks=16,gap_ms=0", True, True, 8),
    "buffered-1m": ("delay_ms=20,size=1m,kind=tool,chunks=256,gap_ms=0", True, True, 8),
    "passthrough-json": ("delay_ms=20,size=1k,kind=text", False, False, 8),
    "passthrough-stream": ("delay_ms=20,size=4k,kind=text,chunks=100,gap_ms=20", True, False, 16),
    "streamed": ("delay_ms=20,size=4k,kind=tool,chunks=100,gap_ms=20", True, True, 16),
}


def _key(frame: str) -> str:
    """`func (path/file.py:12)` → `func (file.py)`."""
    name, _, where = frame.partition(" (")
    if not where:
        return frame
    return f"{name} ({where.split(':')[0].rsplit('/', 1)[-1]})"


def summarize_raw(paths: list[Path], top: int) -> str:
    """Inclusive and self shares of py-spy `raw` (collapsed stacks) files."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = [_key(f) for f in stack.split(";")]
            for key in set(frames):
                inclusive[key] += n
            own[frames[-1]] += n
    if not total:
        return "no samples"
    out = [f"{total} samples", "inclusive:"]
    out += [f"  {100 * v / total:5.1f}%  {k}" for k, v in inclusive.most_common(top)]
    out.append("self:")
    out += [f"  {100 * v / total:5.1f}%  {k}" for k, v in own.most_common(top // 2)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Profile one scenario."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--worker-class", default="")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", default="", help="keep py-spy's raw output here")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        parser.error("py-spy is not installed: .venv/bin/pip install py-spy")
    if (os.cpu_count() or 1) < 2:
        parser.error("needs two CPUs (one for the worker, one for the rest)")
    opts = run.parse_args(["--workers", "1"] + (["--worker-class", args.worker_class]
                                                  if args.worker_class else [])
                          + (["--threads", str(args.threads)] if args.threads else []))
    spec, stream, tools, concurrency = SCENARIOS[args.scenario]
    body = (streamed.request_body(spec, TOOLS, MESSAGES) if args.scenario == "streamed"
            else chat_body(spec, stream=stream, tools=tools))
    stack = Stack(opts, run.models_env())
    out_dir = Path(args.out) if args.out else stack.tmp
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        stack.start_fake()
        stack.start_proxy()
        assert stack.proxy is not None
        assert stack.fake is not None
        workers = load.descendants(stack.proxy.pid)[1:]
        for pid in [stack.proxy.pid, *workers]:
            os.sched_setaffinity(pid, {1})
        os.sched_setaffinity(stack.fake.pid, {0})
        os.sched_setaffinity(0, {0})
        url = stack.proxy_url + CHAT
        raw = load.build_request("POST", url, body)
        asyncio.run(load.closed_loop(url, lambda _i: raw, concurrency=concurrency,
                                     duration=1.0))  # warm-up
        outputs = [out_dir / f"{args.scenario}-{pid}.txt" for pid in workers]
        spies = [subprocess.Popen([spy, "record", "-p", str(pid), "-d",
                                   str(max(1, int(args.seconds))), "-r", str(args.rate),
                                   "-f", "raw", "-o", str(path), "--nonblocking"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for pid, path in zip(workers, outputs, strict=True)]
        cpu0 = load.cpu_seconds(stack.proxy.pid)
        batch = asyncio.run(load.closed_loop(url, lambda _i: raw, concurrency=concurrency,
                                             duration=args.seconds,
                                             max_duration=args.seconds + 10))
        used = load.cpu_seconds(stack.proxy.pid) - cpu0
        for proc in spies:
            try:
                proc.wait(timeout=args.seconds + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
        s = load.summarize(batch)
        print(f"{args.scenario}: {s['ok']:.0f} ok, {s['errors']:.0f} errors, "
              f"{s['rps']:.0f} req/s, total p50 {ms(s['total_p50'])} "
              f"p99 {ms(s['total_p99'])}, server CPU {ms(used / max(1, s['ok']))}/req "
              f"({stack.worker_desc}, pinned to CPU 1)")
        print(summarize_raw([p for p in outputs if p.exists()], args.top))
        if args.out:
            print(f"raw profiles in {out_dir}")
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
