"""Cline's and Kilo Code's CLIs as `make e2e` runs them (tests/e2e/test_cline.py,
tests/e2e/test_kilocode.py) and as docs/clients/cline.md and docs/clients/kilo-code.md show
them: each configured for an OpenAI-compatible provider whose base URL is the proxy, in a
temporary HOME, off the network (chat_agents.offline_env, and each one's own telemetry,
update and download switches)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.chat_agents import KEY, Agent
from tests.fake_vllm import MODEL


def _data_dir(home: Path) -> Path:
    return home / ".cline" / "data"


def _cline_setup(home: Path, url: str, prompt: str) -> tuple[list[str], dict[str, str]]:
    """What `cline auth -p openai-compatible -k KEY -m MODEL -b URL/v1` writes, and global
    settings with telemetry and auto-update off."""
    settings = _data_dir(home) / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    providers = {"version": 1, "lastUsedProvider": "openai-compatible", "modes": {},
                 "providers": {"openai-compatible": {"settings": {
                     "provider": "openai-compatible", "apiKey": KEY, "model": MODEL,
                     "baseUrl": url + "/v1"},
                     "updatedAt": "2026-01-01T00:00:00.000Z", "tokenSource": "manual"}}}
    (settings / "providers.json").write_text(json.dumps(providers, indent=2))
    (settings / "global-settings.json").write_text(json.dumps(
        {"telemetryOptOut": True, "autoUpdateEnabled": False}, indent=2))
    return (["--data-dir", str(_data_dir(home)), prompt], {"CLINE_NO_AUTO_UPDATE": "1"})


CLINE = Agent("Cline", "cline", "run_commands", "Run_Commands", _cline_setup)


def _kilo_setup(home: Path, url: str, prompt: str) -> tuple[list[str], dict[str, str]]:
    """Kilo Code: a `vllm` provider in the file KILO_CONFIG names, the key from the
    environment; `--auto` approves its tools in a run no one watches."""
    config = {
        "$schema": "https://app.kilo.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"vllm/{MODEL}",
        "provider": {"vllm": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "vLLM through Tool Call Proxy",
            "options": {"baseURL": url + "/v1", "apiKey": "{env:TOOLCALL_PROXY_KEY}"},
            "models": {MODEL: {"name": "Qwen 3.6 27B (local)", "tool_call": True}},
        }},
    }
    path = home / "kilo.json"
    path.write_text(json.dumps(config, indent=2))
    return (["run", "--auto", prompt],
            {"KILO_CONFIG": str(path), "TOOLCALL_PROXY_KEY": KEY, "KILO_TELEMETRY_LEVEL": "off",
             "KILO_DISABLE_AUTOUPDATE": "1", "KILO_DISABLE_MODELS_FETCH": "1",
             "KILO_DISABLE_DEFAULT_PLUGINS": "1", "KILO_DISABLE_LSP_DOWNLOAD": "1",
             "KILO_DISABLE_SHARE": "1", "KILO_DISABLE_CLAUDE_CODE": "1", "KILO_NO_DAEMON": "1"})


KILO = Agent("Kilo Code", "kilo", "bash", "Bash", _kilo_setup)
