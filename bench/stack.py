"""The processes a benchmark starts: the fake upstream and the proxy as users run it
(gunicorn with deploy/gunicorn.conf.py), on free loopback ports, always stopped; and the
progress log. `bench.run`, `tools.soak` and the soak test start the same `Stack`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from bench import load
from bench.fake_upstream import READY_MARKER

ROOT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    """Progress to stderr (stdout carries only the table)."""
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    """A loopback port free right now (bind to 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class Proc:
    """A child process we started (in its own session, so its whole group can be stopped)."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        """The child's pid (for gunicorn: the master)."""
        return self.popen.pid

    def alive(self) -> bool:
        """Still running?"""
        return self.popen.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, wait up to `grace` s, then SIGKILL the process group."""
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=5)

    def log_tail(self, lines: int = 15) -> str:
        """The end of its log (for error messages)."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


class Stack:
    """The fake upstream and the proxy: started on free loopback ports, always stopped."""

    boot_seconds = 30.0  # for the proxy to answer its health check

    def __init__(self, opts: argparse.Namespace, env: Mapping[str, str] | None = None) -> None:
        self.opts = opts
        self.env = dict(env or {})  # set for the proxy unless the caller's environment has it
        self.tmp = Path(tempfile.mkdtemp(prefix="toolcall-bench-"))
        self.fake: Proc | None = None
        self.proxy: Proc | None = None
        self.fake_url = ""
        self.proxy_url = ""
        self.worker_desc = ""

    def start_fake(self) -> None:
        """Start `bench.fake_upstream` on a free port and wait for its ready line."""
        log_path = self.tmp / "fake_upstream.log"
        with open(log_path, "wb") as err:
            popen = subprocess.Popen(
                [sys.executable, "-m", "bench.fake_upstream", "--port", "0"], cwd=ROOT,
                stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        self.fake = Proc("fake upstream", popen, log_path)
        assert popen.stdout is not None
        os.set_blocking(popen.stdout.fileno(), False)
        deadline = time.monotonic() + 15
        seen = b""
        while time.monotonic() < deadline and popen.poll() is None:
            with contextlib.suppress(BlockingIOError, TypeError):
                seen += popen.stdout.read() or b""
            if b"\n" in seen:
                break
            time.sleep(0.05)
        line = seen.decode(errors="replace").strip()
        if not line.startswith(READY_MARKER):
            raise RuntimeError(f"fake upstream did not start: {line!r}\n{self.fake.log_tail()}")
        self.fake_url = line.split()[1]
        log(f"fake upstream: {self.fake_url} (pid {popen.pid})")

    def gunicorn_cmd(self, port: int) -> list[str]:
        """The command users run, plus this run's bind, control socket and overrides."""
        exe = Path(sys.executable).parent / "gunicorn"
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "gunicorn"]
        conf = ROOT / self.opts.conf
        if conf.exists():
            cmd += ["-c", str(conf)]
        else:
            log(f"warning: {conf} not found: gunicorn runs with its defaults")
        cmd += [self.opts.app, "-b", f"127.0.0.1:{port}",
                "--control-socket", str(self.tmp / "gunicorn.ctl")]
        if self.opts.worker_class:
            cmd += ["-k", self.opts.worker_class]
        if self.opts.workers:
            cmd += ["-w", str(self.opts.workers)]
        if self.opts.threads:
            cmd += ["--threads", str(self.opts.threads)]
        if self.opts.worker_connections:
            cmd += ["--worker-connections", str(self.opts.worker_connections)]
        return cmd

    def start_proxy(self) -> None:
        """Start gunicorn on a free port and wait until `/proxy/health` answers."""
        port = free_port()
        env = dict(os.environ)
        env["TOOLCALL_PROXY_UPSTREAM"] = self.fake_url
        for name, value in self.env.items():  # (the sections' bench models, bench.run's)
            env.setdefault(name, value)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(self.tmp / "prometheus")
        env.setdefault("PYTHONUNBUFFERED", "1")
        log_path = self.tmp / "gunicorn.log"
        cmd = self.gunicorn_cmd(port)
        with open(log_path, "wb") as out:
            popen = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out,
                                     start_new_session=True)
        self.proxy = Proc("proxy", popen, log_path)
        self.proxy_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.boot_seconds
        while time.monotonic() < deadline:
            if not self.proxy.alive():
                raise RuntimeError(f"gunicorn exited:\n{self.proxy.log_tail()}")
            result = asyncio.run(load.simple(self.proxy_url + "/proxy/health", timeout=2))
            if result.error is None and result.status in (200, 503, 404):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"gunicorn did not answer in {self.boot_seconds:.0f} s:\n"
                               f"{self.proxy.log_tail()}")
        time.sleep(0.5)  # let every worker boot, not just the first
        self.worker_desc = self._describe_workers()
        log(f"proxy: {self.proxy_url} (master pid {popen.pid}; {self.worker_desc})")
        log(f"  command: {' '.join(cmd)}")

    def _describe_workers(self) -> str:
        text = self.proxy.log_tail(200) if self.proxy else ""
        kind = "?"
        for line in text.splitlines():
            if "Using worker:" in line:
                kind = line.rsplit("Using worker:", 1)[1].strip()
        workers = len(load.descendants(self.proxy.pid)) - 1 if self.proxy else 0
        extra = ""
        if self.opts.threads:
            extra += f", threads {self.opts.threads}"
        if self.opts.worker_connections:
            extra += f", worker_connections {self.opts.worker_connections}"
        return f"worker class {kind}, {workers} workers{extra}"

    def log_problems(self) -> list[str]:
        """Lines of the gunicorn log that report trouble (timeouts, tracebacks, errors)."""
        if self.proxy is None:
            return []
        try:
            text = self.proxy.log_path.read_text(errors="replace")
        except OSError:
            return []
        marks = ("Traceback", "WORKER TIMEOUT", "[CRITICAL]", "[ERROR]", "Worker exiting")
        return [line for line in text.splitlines() if any(m in line for m in marks)]

    def stop(self) -> None:
        """Stop the proxy, then the fake; remove the temporary directory."""
        for proc in (self.proxy, self.fake):
            if proc is not None:
                proc.stop()
        if self.opts.keep_logs:
            log(f"logs kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C, so the `finally` that stops the servers always runs."""

    def handler(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
