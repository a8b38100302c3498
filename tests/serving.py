"""A proxy server started as a command, as users start it, and one streaming tool turn
through it (the shared part of the single-file, install and container tests); the proxy
served the production way, for the tests that attack it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.shell.test_entrypoints import ROOT, _free_port, _stop, _tool_turn, _wait_healthy


def serve_one_tool_turn(command: Sequence[str], *, cwd: Path, env: dict[str, str], port: int,
                        seconds: float = 30,
                        meanwhile: Callable[[str], None] | None = None) -> tuple[int, str]:
    """Start `command` (listening on `port`), wait for /proxy/health, run the `read` tool turn
    with the openai SDK (and `meanwhile(url)`), stop it with SIGTERM: its exit status and log."""
    process = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, process, seconds=seconds)
        _tool_turn(url)
        if meanwhile is not None:
            meanwhile(url)
    finally:
        log = _stop(process)
    return process.returncode, log


@dataclass
class Served:
    """A proxy started as `python app.py` (gunicorn, gevent workers: production)."""

    url: str
    port: int
    process: subprocess.Popen
    log: str = ""


@contextmanager
def served(upstream: str, env: Mapping[str, str] | None = None, *, workers: int = 1,
           seconds: float = 30) -> Iterator[Served]:
    """`python app.py` serving `upstream` with `env` added to this environment (no run
    directory of the tests' own unless `env` names one), until the block ends; its log then
    in `.log`."""
    port = _free_port()
    environ = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": upstream,
               "TOOLCALL_PROXY_PORT": str(port), "GUNICORN_WORKERS": str(workers)}
    environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    environ.update(env or {})
    with tempfile.TemporaryFile() as log:  # (a pipe no one reads would stall the server)
        process = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=environ,
                                   stdout=log, stderr=subprocess.STDOUT)
        server = Served(f"http://127.0.0.1:{port}", port, process)
        try:
            deadline = time.monotonic() + seconds
            while not _answers(server.url + "/proxy/health"):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise AssertionError("the proxy did not come up: "
                                         + log.read().decode(errors="replace")[-3000:])
                time.sleep(0.1)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.seek(0)
            server.log = log.read().decode(errors="replace")


def _answers(url: str) -> bool:
    try:  # a worker still starting (a loaded machine) may not answer within the second
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False
