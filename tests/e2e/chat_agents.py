"""Three chat agents from npm (Qwen Code, opencode, Continue's `cn`), each set up as
docs/clients/chat-agents.md says: a custom OpenAI-compatible provider whose base URL is the proxy,
run headless (`qwen -p`, `opencode run`, `cn -p`) in a temporary HOME. And the fake model that
drives them: plain text, or one call to the agent's shell tool (as Hermes text or as a call
vLLM's parser returned), then text built from the tool's result.

Off the network: each agent's update check, telemetry and plugins are off, and what cannot be
turned off is pointed at a dead port (`DEAD`): Continue's version check (through the proxy
variables Node 24 honours with NODE_USE_ENV_PROXY), opencode's npm installs (its registry)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fake_vllm import (
    MODEL,
    Answer,
    Received,
    vllm_answer,
    vllm_completion,
    vllm_tool_call,
)

BIN = Path(__file__).resolve().parent / "node_modules" / ".bin"
DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens there
KEY = "sk-e2e"  # the proxy's only api_key: each agent must send it
TEXT = "Hello from the fake model."
AFTER_TOOL = "The tool answered:"


@dataclass(frozen=True)
class Agent:
    """One agent: its command, the shell tool it offers, a wrong-case spelling of that tool's
    name, how it is configured (files written under HOME, the environment), and the tool its
    history files a call to an unknown tool under (None: under the name the model wrote)."""

    name: str
    binary: str
    shell_tool: str
    wrong_case: str
    setup: Callable[[Path, str, str], tuple[list[str], dict[str, str]]]
    unknown_filed_as: str | None = None

    def installed(self) -> bool:
        return (BIN / self.binary).exists()

    def run(self, proxy_url: str, home: Path, work: Path, prompt: str,
            timeout: float = 150) -> subprocess.CompletedProcess[str]:
        """One headless turn of the agent in `work`, configured under `home`."""
        argv, extra = self.setup(home, proxy_url, prompt)
        return subprocess.run([str(BIN / self.binary), *argv], cwd=work,
                              env={**offline_env(home), **extra}, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def offline_env(home: Path) -> dict[str, str]:
    """A clean environment: the Node 24 of tests/e2e first on PATH, a HOME of its own, and
    any traffic not for the proxy (on 127.0.0.1) sent to a dead port."""
    return {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home), "SHELL": "/bin/bash", "LANG": "C.UTF-8", "NO_COLOR": "1",
            "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
            "NODE_USE_ENV_PROXY": "1", "HTTP_PROXY": DEAD, "HTTPS_PROXY": DEAD,
            "NO_PROXY": "127.0.0.1,localhost", "npm_config_registry": DEAD + "/"}


def _qwen_code(home: Path, url: str, prompt: str) -> tuple[list[str], dict[str, str]]:
    """Qwen Code: `~/.qwen/settings.json` with an `openai` model provider; `--yolo` lets the
    headless run use its shell tool."""
    settings = {
        "modelProviders": {"openai": [{"id": MODEL, "name": "Qwen 3.6 27B (local)",
                                       "baseUrl": url + "/v1",
                                       "envKey": "TOOLCALL_PROXY_KEY"}]},
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": MODEL},
        "general": {"enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings, indent=2))
    return (["-p", prompt, "--yolo"],
            {"TOOLCALL_PROXY_KEY": KEY, "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"})


def _opencode(home: Path, url: str, prompt: str) -> tuple[list[str], dict[str, str]]:
    """opencode: a provider on its bundled `@ai-sdk/openai-compatible` in the file named by
    OPENCODE_CONFIG; autoupdate, sharing, default plugins, LSP downloads and the models.dev
    fetch off."""
    config = {
        "$schema": "https://opencode.ai/config.json",
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
    path = home / "opencode.json"
    path.write_text(json.dumps(config, indent=2))
    return (["run", prompt],
            {"OPENCODE_CONFIG": str(path), "TOOLCALL_PROXY_KEY": KEY,
             "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
             "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
             "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1"})


CONTINUE_CONFIG = """\
name: Local vLLM through Tool Call Proxy
version: 1.0.0
schema: v1
models:
  - name: Qwen 3.6 27B (local)
    provider: openai
    model: {model}
    apiBase: {url}/v1
    apiKey: {key}
    roles: [chat, edit, apply]
    capabilities: [tool_use]
"""


def _continue_cli(home: Path, url: str, prompt: str) -> tuple[list[str], dict[str, str]]:
    """Continue's `cn`: a config.yaml with an `openai` provider whose apiBase is the proxy;
    telemetry off, and its API (the version check) at a dead port."""
    path = home / ".continue" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONTINUE_CONFIG.format(model=MODEL, url=url, key=KEY))
    return (["-p", prompt, "--config", str(path)],
            {"CONTINUE_CLI_ENABLE_TELEMETRY": "0", "CONTINUE_API_BASE": DEAD + "/"})


AGENTS = {
    "qwen-code": Agent("Qwen Code", "qwen", "run_shell_command", "Run_Shell_Command",
                       _qwen_code),
    # opencode turns a call to a tool it lacks into one to its `invalid` tool, naming it.
    "opencode": Agent("opencode", "opencode", "bash", "Bash", _opencode, "invalid"),
    "continue": Agent("Continue CLI", "cn", "Bash", "bash", _continue_cli),
}


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or ()]


class Model:
    """The fake model of one run. `call`: the first request that offers `tool` is answered
    with a call to `name` for each of `commands`, written as `source` says (`hermes` or
    `qwen_xml` text, one frame each, or `native`: calls vLLM's parser returned); a request
    ending with a tool's result, with text quoting it; anything else (titles, summaries,
    memory) with plain text. `thinking`: every answer
    starts inside a thinking block the template opened (`thinking`, then a lone `</think>`),
    left in the content as a server without a reasoning parser leaves it."""

    def __init__(self, call: bool = False, *, tool: str = "", name: str = "",
                 commands: tuple[str, ...] = (), source: str = "hermes",
                 thinking: str = "") -> None:
        self.call, self.tool, self.name, self.source = call, tool, name, source
        self.commands, self.thinking = commands, thinking
        self._lock = threading.Lock()
        self.called = False

    def _said(self, content: str, reasoning: str | None = None) -> dict[str, Any]:
        """An answer; with `thinking`, no reasoning field (a server that parsed reasoning
        leaves no closer in the content, and the proxy then leaves the content alone)."""
        if self.thinking:
            return vllm_completion(f"{self.thinking}\n</think>\n\n{content}")
        return vllm_completion(content, reasoning=reasoning)

    def __call__(self, received: Received) -> Answer:
        body = received.json
        last = body["messages"][-1]
        if last.get("role") == "tool":
            result = json.dumps(last.get("content"))[:600]
            return vllm_answer(self._said(f"{AFTER_TOOL} {result}"))(received)
        with self._lock:
            now = self.call and not self.called and self.tool in tool_names(body)
            self.called = self.called or now
        if not now:
            return vllm_answer(self._said(TEXT))(received)
        calls = [{"name": self.name, "arguments": {"command": command}}
                 for command in self.commands]
        if self.source == "native":
            return vllm_answer(vllm_completion(
                "I'll run it.", finish_reason="tool_calls",
                tool_calls=[vllm_tool_call(call["name"], json.dumps(call["arguments"]))
                            for call in calls]))(received)
        frames = "".join(f"\n<tool_call>\n{_frame(call, self.source)}\n</tool_call>"
                         for call in calls)
        return vllm_answer(self._said(f"I'll run it.{frames}",
                                      reasoning="The user wants the command run."))(received)


def _frame(call: dict[str, Any], source: str) -> str:
    """A call inside `<tool_call>`: Hermes JSON, or Qwen3-Coder's XML."""
    if source == "qwen_xml":
        parameters = "".join(f"<parameter={key}>\n{value}\n</parameter>\n"
                             for key, value in call["arguments"].items())
        return f"<function={call['name']}>\n{parameters}</function>"
    return json.dumps(call)


def delivered_calls(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls the agent sent back in its history (what it received from the proxy)."""
    last = requests[-1]
    return [call["function"] for message in last["messages"]
            if message.get("role") == "assistant" for call in message.get("tool_calls") or ()]


def tool_results(requests: list[dict[str, Any]]) -> list[str]:
    """The tool results the agent sent back, as JSON text."""
    return [json.dumps(message.get("content")) for body in requests
            for message in body["messages"] if message.get("role") == "tool"]
