"""A proxy server started as a command, as users start it, and one streaming tool turn
through it (the shared part of the single-file, install and container tests)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.shell.test_entrypoints import _stop, _tool_turn, _wait_healthy


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
