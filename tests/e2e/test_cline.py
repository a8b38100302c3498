"""Cline's CLI (npm `cline`, real, from tests/e2e/package.json) through the proxy's chat
front against the fake vLLM, in both stream modes: a text turn, and a turn whose call to
Cline's `run_commands` the server did not parse, written as Hermes text, as an improvised call
expression naming the tool in the wrong case, or as a JSON envelope of the model's own with
the command list written as a string. Cline runs the command (the file it writes is there,
its output goes back to the model) and ends the turn on the model's answer; the proxy's log
line and /proxy/metrics say what it found and repaired.

Set up as docs/clients/cline.md says: an `openai-compatible` provider whose base URL is the
proxy, telemetry and auto-update off, run one-shot (`cline --data-dir DIR PROMPT`: act mode,
tools auto-approved; `--data-dir` keeps its state in the temporary HOME and runs it in-process,
with no hub daemon left behind). Skipped, saying so, when it is not installed."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.e2e.chat_agents import AFTER_TOOL, KEY, TEXT, Agent, Model, tool_results
from tests.e2e.cline_kilo import CLINE
from tests.e2e.written_calls import SHAPES, WrittenCall, assert_logged

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

MODES = ["buffer", "stream"]
SHELL_TOOL = CLINE.shell_tool


def _installed() -> Agent:
    if not CLINE.installed():
        pytest.skip("Cline is not installed (tests/e2e/node_modules/.bin/cline): "
                    "`make e2e` installs tests/e2e/package.json")
    return CLINE


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
    (turn,) = [r.json for r in fake.chat_requests()]
    assert SHELL_TOOL in [tool["function"]["name"] for tool in turn["tools"]]
    assert turn["stream"] is (mode == "stream")  # buffered: one answer, asked whole


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mode", MODES)
def test_a_call_the_server_did_not_parse_runs_the_command(fake, start_proxy, tmp_path,
                                                          log_lines, mode, shape):
    agent = _installed()
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode, log_level="info")
    marker = f"e2e-{secrets.token_hex(5)}"
    command = f"echo {marker} > out.txt && cat out.txt"
    fake.answer(WrittenCall(SHELL_TOOL, SHAPES[shape].write(SHELL_TOOL,
                                                            {"commands": [command]})))
    home, work = _dirs(tmp_path)

    run = agent.run(proxy.url, home, work, "Run the command this task needs, then report.")

    assert run.returncode == 0, _output(run)
    assert (work / "out.txt").read_text().strip() == marker  # Cline ran the command
    assert AFTER_TOOL in run.stdout, _output(run)  # the model's answer to its result: the end
    requests = [r.json for r in fake.chat_requests()]
    assert len(requests) == 2
    (assistant,) = [m for m in requests[-1]["messages"] if m.get("role") == "assistant"]
    (call,) = assistant["tool_calls"]
    assert call["function"]["name"] == SHELL_TOOL
    assert json.loads(call["function"]["arguments"]) == {"commands": [command]}
    assert "run_commands" not in (assistant.get("content") or "").lower()  # no call as text
    assert any(marker in result for result in tool_results(requests))
    assert_logged(proxy, log_lines(len(requests)), SHAPES[shape], SHELL_TOOL, marker)
