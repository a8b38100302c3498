"""Codex CLI (`@openai/codex`, a native binary from npm) through the proxy's Responses front:
a custom provider with `wire_api = "responses"` whose base_url is the proxy, against the fake
vLLM scripted to write its call as Hermes text and to answer the tool's result with text.

Codex is kept off the network: a temporary CODEX_HOME whose config.toml (the one
docs/clients/codex.md shows) turns analytics, feedback, plugins and the update check off, and
`--strict-config` so that a key this Codex does not know fails the run instead of being
ignored."""

from __future__ import annotations

import json
import secrets

import pytest

from tests.e2e.codex import run_codex, shell_call
from tests.fake_vllm import Answer, Received, vllm_answer, vllm_completion

pytestmark = pytest.mark.e2e


def _shell_call(tools: list[str]) -> tuple[str, dict]:
    """The shell tool this Codex offers, with arguments that print secret.txt."""
    return shell_call(tools, "cat secret.txt")


def _agent(received: Received) -> Answer:
    """The model: a Hermes-text call to the shell tool, then text built from its result."""
    body = received.json
    results = [m.get("content") for m in body["messages"] if m.get("role") == "tool"]
    if results:
        return vllm_answer(vllm_completion(f"The file says: {json.dumps(results[-1])}"))(
            received)
    names = [t["function"]["name"] for t in body.get("tools") or ()]
    name, arguments = _shell_call(names)
    call = json.dumps({"name": name, "arguments": arguments})
    return vllm_answer(vllm_completion(f"I'll read it.\n<tool_call>\n{call}\n</tool_call>",
                                       reasoning="The user wants the file read."))(received)


@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_codex_exec_runs_a_tool_call_written_as_hermes_text(fake, start_proxy, tmp_path, mode):
    proxy = start_proxy(responses_store_path=str(tmp_path / "responses.sqlite3"),
                        stream_mode=mode)
    fake.answer(_agent)
    marker = f"marker-{secrets.token_hex(6)}"
    result, _ = run_codex(proxy.url, tmp_path, "Read secret.txt and tell me what it says.",
                          {"secret.txt": marker + "\n"})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "The file says: " in result.stdout, output[-3000:]
    assert marker in result.stdout  # Codex ran the call and sent its result back
    chats = fake.chat_requests()
    assert len(chats) >= 2
    first, last = chats[0].json, chats[-1].json
    assert first["stream"] is (mode == "stream")  # buffered: the whole answer, then a stream
    calls = [m for m in last["messages"] if m.get("tool_calls")]
    assert calls
    assert calls[-1]["tool_calls"][0]["function"]["name"] == _shell_call(
        [t["function"]["name"] for t in first["tools"]])[0]
    results = [m["content"] for m in last["messages"] if m.get("role") == "tool"]
    assert any(marker in str(content) for content in results)
    assert not [r for r in fake.received if r.path.startswith("/v1/responses")]


@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_codex_s_loop_goes_on_after_a_call_to_a_tool_it_does_not_offer(fake, start_proxy,
                                                                      tmp_path, mode):
    """A Hermes call to a tool Codex lacks is delivered as written through the Responses
    front: Codex answers it with an error output, and the model's next answer ends the turn
    (never a 5xx Codex retries)."""
    proxy = start_proxy(responses_store_path=str(tmp_path / "responses.sqlite3"),
                        stream_mode=mode)

    def model(received: Received) -> Answer:
        results = [m.get("content") for m in received.json["messages"]
                   if m.get("role") == "tool"]
        if results:
            return vllm_answer(vllm_completion(f"Codex said: {json.dumps(results[-1])}"))(
                received)
        call = json.dumps({"name": "launch_rockets", "arguments": {"count": 3}})
        return vllm_answer(vllm_completion(f"<tool_call>\n{call}\n</tool_call>"))(received)

    fake.answer(model)
    result, _ = run_codex(proxy.url, tmp_path, "Launch the rockets.")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Codex said: " in result.stdout, output[-3000:]
    last = fake.chat_requests()[-1].json
    assert "launch_rockets" not in [t["function"]["name"] for t in last["tools"]]
    calls = [c["function"]["name"] for m in last["messages"] for c in m.get("tool_calls") or ()]
    assert calls == ["launch_rockets"]  # delivered as written, sent back in the history
    (answer,) = [m["content"] for m in last["messages"] if m.get("role") == "tool"]
    assert "launch_rockets" in answer  # Codex's own word: "unsupported call: launch_rockets"
