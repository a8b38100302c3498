"""Claude Code (the real CLI, from npm) as the e2e tests run it: off the internet, every
model set to the fake's, through the proxy's Messages front."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fake_vllm import MODEL

CLAUDE = Path(__file__).parent / "node_modules" / ".bin" / "claude"


def claude_env(proxy_url: str, home: Path) -> dict[str, str]:
    """Claude Code's environment: the proxy as its API, every model the fake's, a HOME and
    config dir of its own, nonessential traffic, updates, telemetry and retries off."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TERM", "TMPDIR")}
    return {**keep,
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": proxy_url,
            "ANTHROPIC_API_KEY": "sk-e2e",
            "ANTHROPIC_MODEL": MODEL,
            "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": MODEL,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": MODEL,
            "CLAUDE_CODE_SUBAGENT_MODEL": MODEL,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0"}


def run_claude(proxy_url: str, tmp_path: Path, prompt: str,
               ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`claude -p` of `prompt` with its Bash tool allowed, in a fresh work directory under
    `tmp_path` (also its HOME): the run (its JSON result on stdout) and the directory."""
    if not CLAUDE.exists():
        pytest.fail("Claude Code is not installed: run `make e2e` (npm install in tests/e2e)")
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [str(CLAUDE), "-p", prompt, "--output-format", "json", "--allowedTools", "Bash"],
        cwd=work, env=claude_env(proxy_url, tmp_path), capture_output=True, text=True,
        timeout=240, stdin=subprocess.DEVNULL)
    return done, work
