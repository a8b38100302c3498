"""Kilo Code's CLI (npm `@kilocode/cli`, real, from tests/e2e/package.json) through the
proxy's chat front against the fake vLLM, in both stream modes: a text turn, and a turn whose
call to Kilo's `bash` the server did not parse, written as Hermes text, as an improvised call
expression naming the tool in the wrong case, or as a JSON envelope of the model's own with
the timeout written as a string. Kilo runs the command (the file it writes is there, its
output goes back to the model) and ends the turn on the model's answer; the proxy's log line
and /proxy/metrics say what it found and repaired.

Set up as docs/clients/kilo-code.md says: a provider on its bundled
`@ai-sdk/openai-compatible` whose base URL is the proxy, in the file named by KILO_CONFIG, run
headless (`kilo run --auto PROMPT`); telemetry, auto-update, sharing, default plugins, LSP
downloads and the models fetch off, and its daemon not used. Skipped, saying so, when it is
not installed."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.e2e.chat_agents import AFTER_TOOL, KEY, TEXT, Agent, Model, tool_results
from tests.e2e.cline_kilo import KILO
from tests.e2e.written_calls import SHAPES, WrittenCall, assert_logged

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

MODES = ["buffer", "stream"]
SHELL_TOOL = KILO.shell_tool


def _installed() -> Agent:
    if not KILO.installed():
        pytest.skip("Kilo Code is not installed (tests/e2e/node_modules/.bin/kilo): "
                    "`make e2e` installs tests/e2e/package.json")
    return KILO


def _output(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout[-2000:] + "\n--- stderr ---\n" + run.stderr[-2000:]


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return home, work


@pytest.mark.parametrize("mode", MODES)
def test_a_text_turn(fake, start_proxy, tmp_path, mode):
    agent = _installed()
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode)
    fake.answer(Model())
    home, work = _dirs(tmp_path)

    run = agent.run(proxy.url, home, work, "Say hello.")

    assert run.returncode == 0, _output(run)
    assert TEXT in run.stdout, _output(run)
    turns = [r.json for r in fake.chat_requests()]
    own = [turn for turn in turns
           if SHELL_TOOL in [tool["function"]["name"] for tool in turn.get("tools") or ()]]
    assert len(own) == 1, turns  # the agent's turn, with its tools (side requests have none)
    assert own[0]["stream"] is (mode == "stream")  # buffered: one answer, asked whole


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mode", MODES)
def test_a_call_the_server_did_not_parse_runs_the_command(fake, start_proxy, tmp_path,
                                                          log_lines, mode, shape):
    agent = _installed()
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode, log_level="info")
    marker = f"e2e-{secrets.token_hex(5)}"
    arguments = {"command": f"echo {marker} > out.txt && cat out.txt",
                 "description": "Writes the marker to out.txt", "timeout": 120000}
    fake.answer(WrittenCall(SHELL_TOOL, SHAPES[shape].write(SHELL_TOOL, arguments)))
    home, work = _dirs(tmp_path)

    run = agent.run(proxy.url, home, work, "Run the command this task needs, then report.")

    assert run.returncode == 0, _output(run)
    assert (work / "out.txt").read_text().strip() == marker  # Kilo ran the command
    assert AFTER_TOOL in run.stdout, _output(run)  # the model's answer to its result: the end
    requests = [r.json for r in fake.chat_requests()]
    (assistant,) = [m for m in requests[-1]["messages"] if m.get("role") == "assistant"]
    (call,) = assistant["tool_calls"]
    assert call["function"]["name"] == SHELL_TOOL
    assert json.loads(call["function"]["arguments"]) == arguments
    assert "bash" not in (assistant.get("content") or "").lower()  # no call left as text
    assert any(marker in result for result in tool_results(requests))
    assert_logged(proxy, log_lines(len(requests)), SHAPES[shape], SHELL_TOOL, marker)
