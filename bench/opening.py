"""The moment the port opens: a request sent then, and how long it waits for its answer.

`python -m bench.opening [--runs 5] [--workers 2] [--root DIR]`: starts the fake upstream,
then, `--runs` times, `python app.py` (gunicorn, gevent workers) against it, connecting in a
tight loop from the moment the process starts; the instant a connection is accepted it sends
one relayed request (`GET /v1/models`, answered by the fake at once) and times its answer.
Printed per run and as medians: when the port accepted (from the start), how long that first
request waited for its answer, and a second request sent right after (a warm worker's).

Where gunicorn's master listens before any worker has loaded the app, the port accepts early
and the first request waits out the workers' boot (issue 42: 0.27 s on a quiet box, 0.4-0.7 s
on a loaded one); where the first worker ready opens the port, it accepts later and the
first request is answered like any other. `--root` runs another checkout's `app.py` (an
older commit's, for the figure before), with this one's fake.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.fake_upstream import READY_MARKER

ROOT = Path(__file__).resolve().parent.parent
REQUEST = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _fake() -> Iterator[str]:
    """The fake upstream on a free loopback port, answering at once: its URL."""
    process = subprocess.Popen([sys.executable, "-m", "bench.fake_upstream", "--port", "0",
                                "--delay-ms", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(READY_MARKER):
                yield line.split()[1]
                break
        else:
            raise RuntimeError("the fake upstream did not start")
    finally:
        process.terminate()
        process.wait(timeout=10)


def _exchange(sock: socket.socket) -> bytes:
    sock.sendall(REQUEST)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def one_run(root: Path, upstream: str, workers: int) -> tuple[float, float, float]:
    """(seconds until the port accepted, the first request's wait for its answer, a second
    request's) for one start of `root`'s `python app.py`."""
    port = _free_port()
    env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": upstream, "TOOLCALL_PROXY_PORT": str(port),
           "GUNICORN_WORKERS": str(workers)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("NOTIFY_SOCKET", None)
    with tempfile.TemporaryDirectory() as state, open(Path(state) / "log", "w+b") as log:
        env["XDG_STATE_HOME"] = state
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "app.py"], cwd=root, env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                    break
                except ConnectionRefusedError:
                    if process.poll() is not None or time.perf_counter() - started > 60:
                        raise RuntimeError("the proxy did not open its port") from None
                    time.sleep(0.0005)
            accepted = time.perf_counter()
            with sock:
                sent = time.perf_counter()
                first = _exchange(sock)
                first_wait = time.perf_counter() - sent
            if not first.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"the first request got {first[:60]!r}")
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sent = time.perf_counter()
                _exchange(sock)
                second_wait = time.perf_counter() - sent
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                log.seek(0)
                raise RuntimeError("the proxy did not stop within 60 s: "
                                   + log.read().decode(errors="replace")[-2000:]) from None
    return accepted - started, first_wait, second_wait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.opening", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout whose app.py is started (default: this one)")
    args = parser.parse_args(argv)
    rows = []
    with _fake() as upstream:
        for run in range(args.runs):
            row = one_run(args.root, upstream, args.workers)
            rows.append(row)
            print(f"run {run + 1}: port accepted at {row[0] * 1000:.0f} ms; first request "
                  f"answered in {row[1] * 1000:.1f} ms; the next in {row[2] * 1000:.1f} ms",
                  flush=True)
    medians = [statistics.median(column) * 1000 for column in zip(*rows, strict=True)]
    print(f"median of {args.runs} ({args.root}): port accepted at {medians[0]:.0f} ms, the "
          f"request sent then answered in {medians[1]:.1f} ms, the next in {medians[2]:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
