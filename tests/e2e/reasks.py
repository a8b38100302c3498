"""What the e2e tests of constrained re-asks share: the fake model of a real agent's turn
whose call to the agent's shell tool is botched unless constrained (it then writes the call
it meant), answering the tool's result with text; the constrained re-asks the fake vLLM
received; and opencode's server, whose API asks for structured output (a turn that demands a
call)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.e2e.chat_agents import AFTER_TOOL, AGENTS, BIN, offline_env
from tests.fakes.base import Received
from tests.fakes.models import Generation, Model, Turn, botches_call

Call = Callable[[list[str]], tuple[str, dict[str, Any]]]


def botching_agent_model(call: Call, how: str = "broken") -> Model:
    """A turn of an agent: the call `call` picks from the offered tools' names (the shell
    tool, the arguments that run a command) botched unless constrained (`botches_call`); a
    tool's result answered with text quoting it (AFTER_TOOL); a side request without that
    tool (titles, summaries) with prose."""
    def model(turn: Turn) -> Generation:
        last = turn.messages[-1] if turn.messages else {}
        if last.get("role") == "tool":
            return Generation(f"{AFTER_TOOL} {json.dumps(last.get('content'))[:600]}")
        name, arguments = call([(t.get("function") or {}).get("name") for t in turn.tools])
        return botches_call(name, arguments, how)(turn)
    return model


def constrained_reasks(received: list[Received]) -> list[dict[str, Any]]:
    """The chat requests that were a constrained re-ask (a structural tag in vLLM's
    `response_format`, the upstream's tool parser kept off with `tool_choice: "none"`)."""
    bodies = [r.json for r in received if r.path.startswith("/v1/chat/completions")]
    return [body for body in bodies
            if (body.get("response_format") or {}).get("type") == "structural_tag"]


def tag_begins(reask: dict[str, Any]) -> list[str]:
    """The begins of the tags a structural-tag re-ask allows (one per tool it demands)."""
    return [tag["begin"] for tag in reask["response_format"]["format"]["tags"]]


@contextmanager
def opencode_server(proxy_url: str, home: Path, work: Path) -> Iterator[str]:
    """`opencode serve` (on a port it picks) configured as the chat-agent tests configure
    `opencode run` (AGENTS["opencode"]), in `work`: its base URL, the server stopped after."""
    agent = AGENTS["opencode"]
    _, extra = agent.setup(home, proxy_url, "")
    server = subprocess.Popen([str(BIN / agent.binary), "serve", "--port", "0"], cwd=work,
                              env={**offline_env(home), **extra}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            found = re.search(r"http://127\.0\.0\.1:\d+", line)
            if found:
                yield found.group(0)
                return
        raise AssertionError(f"opencode serve ended without a URL (exit {server.wait()})")
    finally:
        server.terminate()
        server.wait(timeout=30)
