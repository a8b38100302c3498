"""Claude Code (the real CLI, from npm) through the proxy's Messages front against the fake
vLLM: `claude -p` must run its Bash tool end to end when the model writes the call as Hermes
text, then answer from the tool's result. Off the internet: nonessential traffic off, no
auto-update, a temporary HOME and config dir, every model set to the fake's."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.e2e.claude_code import run_claude
from tests.fake_vllm import (
    Answer,
    Received,
    fake_token_count,
    vllm_answer,
    vllm_completion,
    vllm_context_window,
)

pytestmark = pytest.mark.e2e

MARKER = "e2e-marker-$((6*7))"
PRINTED = "e2e-marker-42"


def _tool_names(body: dict) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools") or ()}


def _script(received: Received) -> Answer:
    """The model: a Bash call written as Hermes text, then an answer from its result."""
    body = received.json
    results = [m for m in body["messages"] if m["role"] == "tool"]
    if results:
        output = results[-1]["content"]
        return vllm_answer(vllm_completion(f"The command printed: {output.strip()}",
                                           reasoning="The tool ran; report its output."))(
            received)
    if "Bash" in _tool_names(body):
        call = {"name": "Bash", "arguments": {"command": f"echo {MARKER}",
                                              "description": "Print the marker"}}
        return vllm_answer(vllm_completion(
            f"I'll run it.\n<tool_call>\n{json.dumps(call)}\n</tool_call>",
            reasoning="The user wants the command run with Bash."))(received)
    return vllm_answer(vllm_completion("OK"))(received)  # side requests (titles, summaries)


def _print_the_marker(proxy_url: str, tmp_path: Path) -> None:
    """`claude -p` asked to print the marker with its Bash tool; it must finish the turn and
    report the marker from the tool's output."""
    done, _ = run_claude(proxy_url, tmp_path, "Print the marker with the Bash tool.")
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    result = json.loads(done.stdout)
    assert result["is_error"] is False
    assert PRINTED in result["result"]


@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_claude_code_runs_its_bash_tool_through_the_proxy(fake, start_proxy, tmp_path, mode):
    proxy = start_proxy(api_keys=["sk-e2e"], stream_mode=mode)
    fake.answer(_script)
    _print_the_marker(proxy.url, tmp_path)

    turns = [r.json for r in fake.chat_requests() if "Bash" in _tool_names(r.json)]
    tool_results = [m for body in turns for m in body["messages"] if m["role"] == "tool"]
    assert any(PRINTED in m["content"] for m in tool_results)  # Bash really ran
    first = turns[0]
    assert first["stream"] is (mode == "stream")
    assert all("x-anthropic-billing-header" not in json.dumps(body["messages"])
               for body in turns)  # the per-request line is not in the cached prefix
    calls = [m for m in turns[-1]["messages"] if m.get("tool_calls")]
    assert calls[-1]["tool_calls"][0]["function"]["name"] == "Bash"


def test_claude_code_s_32000_tokens_fit_a_small_context_window(fake, start_proxy, tmp_path):
    """The model's window leaves 8,192 tokens beside Claude Code's prompt, and Claude Code asks
    32,000: vLLM refuses, the proxy asks again for what fits (`fit_max_tokens`), and the
    session goes on as if the window were big enough."""
    proxy = start_proxy(api_keys=["sk-e2e"])
    window: list[int] = []

    def model(received: Received) -> Answer:
        if not window:  # fixed at the first request: the prompt plus 8,192 tokens
            window.append(fake_token_count(received.json) + 8192)
        return vllm_context_window(window[0], _script)(received)

    fake.answer(model)
    _print_the_marker(proxy.url, tmp_path)
    asked = [r.json.get("max_tokens") for r in fake.chat_requests()
             if "Bash" in _tool_names(r.json)]
    # Each turn: 32,000 refused by the window (vLLM's words: the prompt counted to a floor),
    # then no length named, which vLLM fills with what its window leaves.
    assert asked[0] == 32000
    assert set(asked) == {32000, None}
    assert all(then is None for tokens, then in itertools.pairwise(asked) if tokens == 32000)
    assert asked.count(None) >= 2  # the call, and the answer from its result


@pytest.mark.parametrize("written", ["bash", "launch_rockets"])
def test_claude_code_s_loop_goes_on_after_a_call_by_a_name_it_does_not_offer(
        fake, start_proxy, tmp_path, written):
    """The model names Claude Code's `Bash` in the wrong case (the proxy repairs it: Bash runs)
    or calls a tool Claude Code lacks (delivered as written: Claude Code answers with an error
    result and the model answers that); the turn completes either way, never a 5xx."""
    proxy = start_proxy(api_keys=["sk-e2e"], stream_mode="stream")

    def model(received: Received) -> Answer:
        body = received.json
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if results:
            return vllm_answer(vllm_completion(
                f"The command printed: {results[-1]['content'].strip()}"))(received)
        if "Bash" in _tool_names(body):
            call = {"name": written, "arguments": {"command": f"echo {MARKER}",
                                                   "description": "Print the marker"}}
            return vllm_answer(vllm_completion(
                f"I'll run it.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"))(received)
        return vllm_answer(vllm_completion("OK"))(received)

    fake.answer(model)
    done, _ = run_claude(proxy.url, tmp_path, "Print the marker with the Bash tool.")
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    result = json.loads(done.stdout)
    assert result["is_error"] is False
    assert result["result"].startswith("The command printed: ")
    turns = [r.json for r in fake.chat_requests() if "Bash" in _tool_names(r.json)]
    calls = [c["function"]["name"] for m in turns[-1]["messages"]
             for c in m.get("tool_calls") or ()]
    outputs = [m["content"] for m in turns[-1]["messages"] if m["role"] == "tool"]
    if written == "bash":
        assert calls == ["Bash"]  # repaired to the tool Claude Code offered
        assert PRINTED in outputs[-1]  # and it ran
    else:
        assert calls == [written]  # delivered as written
        assert written in outputs[-1]  # Claude Code's own "no such tool"
        assert PRINTED not in result["result"]
