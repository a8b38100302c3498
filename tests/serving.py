"""A proxy server started as a command, as users start it, and one streaming tool turn
through it (the shared part of the single-file, install and container tests); the proxy
served the production way, for the tests that attack it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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
    process = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=environ,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server = Served(f"http://127.0.0.1:{port}", port, process)
    try:
        _wait_healthy(server.url, process, seconds=seconds)
        yield server
    finally:
        server.log = _stop(process)
