"""Real agents through the proxy against a fake vLLM (Hermes parser) whose model botches its
call to the agent's shell tool unless constrained (`botches_call`): a frame cut off mid-JSON
(`broken`, unreadable) is asked once more with a structural tag, the agent receives the valid
call, runs its tool, sends the output back and finishes the turn; a call written whole without
a required key (`violating`) is delivered as written, never re-asked (a grammar would make the
model invent the command), and the agent's own validation answers it. One agent per family:
Codex (Responses), Claude Code (Messages), the chat agents (Chat Completions), a tool loop on
ollama-js (Ollama's /api/chat, tests/e2e/ollama_agent.mjs).

Both modes: in the streamed mode the botched frame is held back, so the re-ask comes before
anything of it went out and the text that flowed is not repeated (docs/constrained-reasks.md).

And the turns of these agents that demand a call, reachable from their settings or API:
opencode's structured output (a message with `format: {"type": "json_schema"}` sends
`tool_choice: "required"` with a StructuredOutput tool) and Qwen Code's next-speaker check
(`model.skipNextSpeakerCheck: false`: a side query demanding its `respond_in_schema` tool),
against vLLM without a tool parser and a model that never calls unless constrained, in both
modes."""

from __future__ import annotations

import dataclasses
import json
import secrets
import subprocess
from pathlib import Path

import pytest
import requests

from tests.e2e.chat_agents import (
    AFTER_TOOL,
    AGENTS,
    BIN,
    KEY,
    delivered_calls,
    tool_results,
)
from tests.e2e.claude_code import run_claude
from tests.e2e.codex import run_codex, shell_call
from tests.e2e.reasks import (
    botching_agent_model,
    constrained_reasks,
    opencode_server,
    tag_begins,
)
from tests.fake_vllm import MODEL
from tests.fakes.models import Generation, Turn, never_calls_unless_constrained

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MODES = ["buffer", "stream"]


def _marker() -> tuple[str, str]:
    marker = f"e2e-{secrets.token_hex(5)}"
    return marker, f"echo {marker} > out.txt && cat out.txt"


def _one_reask_for(fake, tool: str) -> None:
    """Exactly one constrained re-ask, with vLLM's parser kept off (`tool_choice: "none"`),
    a call forced, and `tool`'s tag among those it allows (a frame cut off mid-JSON has its
    name unread by the proxy today, and the re-ask allows every offered tool)."""
    (reask,) = constrained_reasks(fake.received)
    assert reask["tool_choice"] == "none"
    assert reask["response_format"]["format"]["at_least_one"] is True
    named = [begin for begin in tag_begins(reask) if f'"name": "{tool}"' in begin]
    assert len(named) == 1, tag_begins(reask)


@pytest.mark.parametrize("key", list(AGENTS))
@pytest.mark.parametrize("mode", MODES)
def test_a_chat_agent_runs_the_call_a_constrained_re_ask_mended(fake, start_proxy, tmp_path,
                                                                key, mode):
    agent = AGENTS[key]
    if not agent.installed():
        pytest.skip(f"{agent.name} is not installed: `make e2e` installs tests/e2e/package.json")
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode)
    marker, command = _marker()
    fake.behave(botching_agent_model(lambda _: (agent.shell_tool, {"command": command})))
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    run = agent.run(proxy.url, home, work, "Run the command this task needs, then report.")
    output = run.stdout[-2000:] + "\n--- stderr ---\n" + run.stderr[-2000:]
    assert run.returncode == 0, output
    assert AFTER_TOOL in run.stdout, output
    assert (work / "out.txt").read_text().strip() == marker  # the mended command ran
    requests = [r.json for r in fake.chat_requests()]
    (call,) = delivered_calls(requests)
    assert call["name"] == agent.shell_tool
    assert json.loads(call["arguments"])["command"] == command
    assert any(marker in result for result in tool_results(requests))
    _one_reask_for(fake, agent.shell_tool)


@pytest.mark.parametrize("key", list(AGENTS))
@pytest.mark.parametrize("mode", MODES)
def test_a_chat_agent_gets_a_call_written_without_its_command_as_written(
        fake, start_proxy, tmp_path, key, mode, log_lines):
    """Issue 41, item 2: the call comes without `command`; it is not re-asked (the model
    would have to invent one), the agent has it as written, and its tool does not run."""
    agent = AGENTS[key]
    if not agent.installed():
        pytest.skip(f"{agent.name} is not installed: `make e2e` installs tests/e2e/package.json")
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode, log_level="info")
    _, command = _marker()
    fake.behave(botching_agent_model(
        lambda _: (agent.shell_tool, {"command": command}), "violating"))
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    agent.run(proxy.url, home, work, "Run the command this task needs, then report.")
    assert constrained_reasks(fake.received) == []
    assert not (work / "out.txt").exists()  # no command was invented, none ran
    lines = log_lines(len(fake.chat_requests()))
    assert not any(line.get("reasks") for line in lines)
    assert any(line.get("schema_invalid") for line in lines)


@pytest.mark.parametrize("mode", MODES)
def test_codex_runs_the_call_a_constrained_re_ask_mended(fake, start_proxy, tmp_path, mode):
    proxy = start_proxy(responses_store_path=str(tmp_path / "responses.sqlite3"),
                        stream_mode=mode)
    marker, command = _marker()
    fake.behave(botching_agent_model(lambda tools: shell_call(tools, command)))
    result, work = run_codex(proxy.url, tmp_path, "Run the command this task needs.")
    output = result.stdout[-3000:] + "\n--- stderr ---\n" + result.stderr[-3000:]
    assert result.returncode == 0, output
    assert AFTER_TOOL in result.stdout, output
    assert (work / "out.txt").read_text().strip() == marker  # the mended command ran
    requests = [r.json for r in fake.chat_requests()]
    (call,) = delivered_calls(requests)
    name, arguments = shell_call([t["function"]["name"] for t in requests[0]["tools"]], command)
    assert (call["name"], json.loads(call["arguments"])) == (name, arguments)
    assert any(marker in result for result in tool_results(requests))
    _one_reask_for(fake, name)


@pytest.mark.parametrize("mode", MODES)
def test_claude_code_runs_the_call_a_constrained_re_ask_mended(fake, start_proxy, tmp_path,
                                                              mode):
    proxy = start_proxy(api_keys=["sk-e2e"], stream_mode=mode)
    marker, command = _marker()
    arguments = {"command": command, "description": "Write the marker"}
    fake.behave(botching_agent_model(lambda _: ("Bash", arguments)))
    done, work = run_claude(proxy.url, tmp_path, "Run the command this task needs.")
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    result = json.loads(done.stdout)
    assert result["is_error"] is False
    assert result["result"].startswith(AFTER_TOOL), result["result"]
    assert (work / "out.txt").read_text().strip() == marker  # the mended command ran
    turns = [r.json for r in fake.chat_requests()
             if "Bash" in [t["function"]["name"] for t in r.json.get("tools") or ()]]
    (call,) = delivered_calls(turns)
    assert (call["name"], json.loads(call["arguments"])) == ("Bash", arguments)
    assert any(marker in result for result in tool_results(turns))
    _one_reask_for(fake, "Bash")


@pytest.mark.parametrize(("mode", "client_streams"), [
    ("buffer", False), ("buffer", True), ("stream", False), ("stream", True)])
def test_an_ollama_js_agent_runs_the_call_a_constrained_re_ask_mended(
        fake, start_proxy, tmp_path, mode, client_streams):
    """ollama-js on the Ollama front (/api/chat), asking with `stream` false and true: a
    turn with tools is buffered either way in the buffered mode, and a turn asked without
    `stream` is one JSON answer in the streamed mode too (nothing went out live)."""
    script = Path(__file__).resolve().parent / "ollama_agent.mjs"
    if not (BIN.parent / "ollama").exists():
        pytest.skip("npm `ollama` is not installed: `make e2e` installs tests/e2e/package.json")
    node = str(BIN / "node") if (BIN / "node").exists() else "node"
    proxy = start_proxy(stream_mode=mode)
    marker, command = _marker()
    fake.behave(botching_agent_model(lambda _: ("run_command", {"command": command})))
    run = subprocess.run([node, str(script), proxy.url, MODEL, str(client_streams).lower()],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    said = json.loads(run.stdout.splitlines()[-1])
    assert said["calls"] == [{"name": "run_command", "arguments": {"command": command}}]
    assert said["answer"].startswith(AFTER_TOOL), said
    assert marker in said["answer"]  # the tool's output went back to the model
    assert (tmp_path / "out.txt").read_text().strip() == marker  # the mended command ran
    _one_reask_for(fake, "run_command")


ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
                 "required": ["answer"], "additionalProperties": False}


@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_opencode_s_structured_output_turn_gets_the_call_it_demands(fake, start_proxy, tmp_path,
                                                                    mode, log_lines):
    """opencode demands a call (`tool_choice: "required"`) when a message asks for structured
    output (`format: {"type": "json_schema"}` on its server's API): it adds a StructuredOutput
    tool with that schema and ends the turn when the tool is called. vLLM without a tool
    parser refuses `required`, and the model never calls unless constrained: the proxy's
    constrained re-ask brings the call, and opencode's turn ends with the structured answer."""
    agent = AGENTS["opencode"]
    if not agent.installed():
        pytest.skip(f"{agent.name} is not installed: `make e2e` installs tests/e2e/package.json")
    fake.tool_parser = None  # vLLM started without --enable-auto-tool-choice
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode, upstream_tool_parser=False,
                        log_level="info")
    marker, _ = _marker()

    def meant(function: dict) -> dict | None:
        return {"answer": marker} if function.get("name") == "StructuredOutput" else None

    fake.behave(never_calls_unless_constrained(meant=meant))
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with opencode_server(proxy.url, home, work) as url:
        session = requests.post(f"{url}/session", json={}, timeout=30).json()
        reply = requests.post(f"{url}/session/{session['id']}/message", timeout=120, json={
            "parts": [{"type": "text", "text": "What is the marker? Answer in the format."}],
            "format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}).json()
    assert reply["info"].get("structured") == {"answer": marker}, reply
    demanded = [r.json for r in fake.chat_requests() if "StructuredOutput" in
                [t["function"]["name"] for t in r.json.get("tools") or ()]]
    assert len(demanded) == 2  # the turn, then its one constrained re-ask
    # opencode's `required` is the proxy's to apply (a parserless vLLM would refuse it):
    # the log line of that turn says a demanded call was re-asked and recovered.
    (line,) = [line for line in log_lines(len(fake.chat_requests())) if line.get("reasks")]
    assert "tool_choice_applied_by_proxy" in line["rewrites"]
    assert [(r["reason"], r["dialect"], r["result"]) for r in line["reasks"]] == [
        ("demanded", "structural_tag", "recovered")]
    assert line["repairs"] == ["hermes:constrained:StructuredOutput"]
    (reask,) = constrained_reasks(fake.received)
    assert reask["tool_choice"] == "none"
    assert reask["response_format"]["format"]["at_least_one"] is True


@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_qwen_code_s_next_speaker_check_gets_the_call_it_demands(fake, start_proxy, tmp_path,
                                                                 mode, log_lines):
    """Qwen Code, with `model.skipNextSpeakerCheck: false`, asks after a turn that ended in
    text who speaks next: a side query whose one tool, `respond_in_schema`, it demands
    (`functionCallingConfig: ANY`, `tool_choice: "required"` on its OpenAI provider). The
    model never calls unless constrained; through the proxy's re-ask it answers "model" once
    (Qwen Code then says "Please continue." and the model answers again), then "user"."""
    base = AGENTS["qwen-code"]
    if not base.installed():
        pytest.skip(f"{base.name} is not installed: `make e2e` installs tests/e2e/package.json")

    def setup(home: Path, url: str, prompt: str) -> tuple[list[str], dict[str, str]]:
        argv, env = base.setup(home, url, prompt)
        path = home / ".qwen" / "settings.json"
        settings = json.loads(path.read_text())
        settings["model"]["skipNextSpeakerCheck"] = False
        path.write_text(json.dumps(settings))
        return argv, env

    agent = dataclasses.replace(base, setup=setup)
    fake.tool_parser = None  # vLLM started without --enable-auto-tool-choice
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode, upstream_tool_parser=False,
                        log_level="info")
    def model(turn: Turn) -> Generation:
        said = json.dumps(turn.messages)
        if [t["function"]["name"] for t in turn.tools] == ["respond_in_schema"]:
            # Its own first answer goes on ("model"); once continued, the user's turn.
            speaker = "user" if "Continued." in said else "model"
            answer = {"reasoning": "Checked.", "next_speaker": speaker}
            return never_calls_unless_constrained(meant=lambda f: answer)(turn)
        return Generation("Continued." if "Please continue." in said else "First.")

    fake.behave(model)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    run = agent.run(proxy.url, home, work, "Say something.")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "First." in run.stdout
    assert "Continued." in run.stdout  # "model" came through: Qwen Code went on
    checks = [r.json for r in fake.chat_requests()
              if [t["function"]["name"] for t in r.json.get("tools") or ()]
              == ["respond_in_schema"]]
    assert len(checks) == 4  # two checks, each asked once more constrained
    assert len(constrained_reasks(fake.received)) == 2
    lines = [line for line in log_lines(len(fake.chat_requests())) if line.get("reasks")]
    assert [[(r["reason"], r["result"]) for r in line["reasks"]] for line in lines] == [
        [("demanded", "recovered")]] * 2
    assert all(line["repairs"] == ["hermes:constrained:respond_in_schema"] for line in lines)
