"""Codex CLI (`@openai/codex`, from npm) as the e2e tests run it: the config.toml
docs/clients/codex.md shows, pointed at the test's proxy, in a temporary CODEX_HOME, kept off
the network (`--strict-config`: a key this Codex does not know fails the run), and the shell
call its tools take."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.docs_pages import code_blocks, page

CODEX = Path(__file__).resolve().parent / "node_modules" / ".bin" / "codex"
# The config.toml docs/clients/codex.md shows a person, pointed at the test's proxy.
CONFIG = code_blocks(page("clients/codex.md"), "toml")[0].replace("http://127.0.0.1:8003", "{url}")


def shell_call(tools: list[str], command: str) -> tuple[str, dict[str, Any]]:
    """The shell tool this Codex offers, with the arguments that run `command`."""
    if "exec_command" in tools:
        return "exec_command", {"cmd": command}
    if "shell_command" in tools:
        return "shell_command", {"command": command}
    return "shell", {"command": ["bash", "-lc", command]}


def run_codex(proxy_url: str, tmp_path: Path, prompt: str,
              files: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`codex exec` of `prompt` through the proxy in a fresh work directory holding `files`:
    the run and the directory."""
    if not CODEX.exists():
        pytest.fail("Codex CLI is not installed: run `make e2e` (npm install in tests/e2e)")
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(CONFIG.format(url=proxy_url))
    for name, text in (files or {}).items():
        (work / name).write_text(text)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    env.update(CODEX_HOME=str(home), TOOLCALL_PROXY_KEY="sk-local", HOME=str(tmp_path),
               NO_COLOR="1")
    result = subprocess.run(
        [str(CODEX), "exec", "--strict-config", "--skip-git-repo-check",
         "--sandbox", "danger-full-access", prompt],
        cwd=work, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    return result, work
