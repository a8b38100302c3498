"""Ollama's JavaScript client (npm `ollama`, what Open WebUI's and Zed's requests look like)
and Continue's `cn` with `provider: ollama`, real, against the fake vLLM: ollama-js through
the proxy's Ollama front (the models, a chat with tools streamed and not, a tool result sent
back, thinking, `format`, a `pull` of the served model and one of another); `cn` completing
a tool turn whose call the model wrote as text, on the base URL it was given for Ollama (its
`ollama` provider chats on the OpenAI route Ollama serves there, `/v1/chat/completions`).

Skipped, saying so, when the packages are not installed (`make e2e` installs
tests/e2e/package.json)."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.chat_agents import (
    AFTER_TOOL,
    BIN,
    DEAD,
    Agent,
    Model,
    delivered_calls,
    tool_results,
)
from tests.fake_vllm import MODEL, Answer, vllm_completion

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

HERE = Path(__file__).resolve().parent
CALL = ('Checking.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris",}}'
        "</tool_call>")


def _node() -> str:
    if not (HERE / "node_modules" / "ollama").exists():
        pytest.skip("npm `ollama` is not installed (tests/e2e/node_modules/ollama): "
                    "`make e2e` installs tests/e2e/package.json")
    return str(BIN / "node") if (BIN / "node").exists() else "node"


def _fake_model(received: Any) -> Answer:
    """A call as text for a turn with tools; the weather after its result; thinking, then
    JSON, for the rest."""
    body = received.json
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Answer(body=vllm_completion(f"Clear skies, says {last['content']}."))
    if body.get("tools"):
        return Answer(body=vllm_completion(CALL, reasoning="Weather: a tool."))
    return Answer(body=vllm_completion('{"sky": "clear"}', reasoning="Paris is sunny."))


@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_ollama_js_lists_shows_and_chats_with_tools(fake, start_proxy, mode):
    node = _node()
    proxy = start_proxy(stream_mode=mode)
    fake.answer(_fake_model)
    run = subprocess.run([node, str(HERE / "ollama_js.mjs"), proxy.url, MODEL], cwd=HERE,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    said = {line["step"]: line["value"] for line in map(json.loads, run.stdout.splitlines())}
    assert said["list"] == [MODEL]
    assert said["show"]["qwen3.context_length"] == 32768
    assert said["chat"]["content"] == "Checking."
    assert said["chat"]["thinking"] == "Weather: a tool."
    assert [call["function"]["arguments"] for call in said["chat"]["tool_calls"]] == [
        {"city": "Paris"}]
    assert said["stream"]["content"] == "Checking."
    assert [call["arguments"] for call in said["stream"]["calls"]] == [{"city": "Paris"}]
    assert said["stream"]["done"][-1] is True
    assert said["stream"]["done"].count(True) == 1
    assert said["result"]["content"] == 'Clear skies, says {"sky": "clear"}.'
    sent = fake.chat_requests()[2].json["messages"]
    assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
    assert said["think"] == {"role": "assistant", "content": '{"sky": "clear"}',
                             "thinking": "Paris is sunny."}
    assert json.loads(said["format"]["content"]) == {"sky": "clear"}
    assert fake.chat_requests()[-1].json["response_format"]["type"] == "json_schema"
    assert said["pulled"] == "success"
    assert said["pull"]["status"] == 404
    assert "'llama3' is not one the upstream serves" in said["pull"]["error"]


CONTINUE_OLLAMA = """\
name: Local vLLM through Tool Call Proxy (Ollama's API)
version: 1.0.0
schema: v1
models:
  - name: Local Qwen
    provider: ollama
    model: {model}
    apiBase: {url}
    roles: [chat, edit, apply]
    capabilities: [tool_use]
"""


def _continue_ollama(home: Path, url: str, prompt: str) -> tuple[list[str], dict[str, str]]:
    """Continue's `cn` with a `provider: ollama` model whose apiBase is the proxy."""
    path = home / ".continue" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONTINUE_OLLAMA.format(model=MODEL, url=url))
    return (["-p", prompt, "--config", str(path)],
            {"CONTINUE_CLI_ENABLE_TELEMETRY": "0", "CONTINUE_API_BASE": DEAD + "/"})


CN = Agent("Continue CLI (Ollama)", "cn", "Bash", "bash", _continue_ollama)


@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_continue_on_ollamas_api_completes_a_tool_turn(fake, start_proxy, tmp_path, mode,
                                                      log_lines):
    if not CN.installed():
        pytest.skip("Continue's cn is not installed (tests/e2e/node_modules/.bin/cn): "
                    "`make e2e` installs tests/e2e/package.json")
    proxy = start_proxy(stream_mode=mode, log_level="info")
    marker = f"e2e-{secrets.token_hex(5)}"
    fake.answer(Model(True, tool=CN.shell_tool, name=CN.shell_tool,
                      commands=(f"echo {marker} > out.txt && cat out.txt",)))
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    run = CN.run(proxy.url, home, work, "Run the command this task needs, then report.")
    output = run.stdout[-2000:] + "\n--- stderr ---\n" + run.stderr[-2000:]
    assert run.returncode == 0, output
    assert AFTER_TOOL in run.stdout, output
    assert (work / "out.txt").read_text().strip() == marker
    requests = [r.json for r in fake.chat_requests()]
    (call,) = delivered_calls(requests)
    assert call["name"] == CN.shell_tool
    assert any(marker in result for result in tool_results(requests))
    assert "<tool_call>" not in run.stdout
    # cn's `ollama` provider (its openai-adapters) chats on the OpenAI route Ollama serves
    # beside /api/… under the same base URL: the proxy serves it there too.
    turns = [line for line in log_lines(len(requests)) if line["model"] == MODEL]
    assert [(line["path"], line["front"]) for line in turns] == [
        ("/v1/chat/completions", "chat")] * len(requests)
