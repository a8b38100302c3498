"""Qwen Code, opencode and Continue's `cn` (real, from npm) through the proxy's chat front
against the fake vLLM, in both stream modes: a text turn; a turn whose call to the agent's
shell tool is written as text (Hermes JSON, Qwen3-Coder XML); two such calls in one answer;
answers that start inside a thinking block the template opened (a lone `</think>`); a call
naming that tool in the wrong case (`Bash` where `bash` is offered), which the proxy repairs;
and a call to a tool the agent does not offer, which the proxy delivers as written, so that
the agent answers "no such tool" and the loop goes on (never a 5xx the agent retries). The
last two both as Hermes text and as a call vLLM's parser returned.

Each agent is skipped, saying so, when its package is not installed (`make e2e` installs
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
    AGENTS,
    KEY,
    TEXT,
    Agent,
    Model,
    delivered_calls,
    tool_names,
    tool_results,
)
from tests.fakes.template import ChatTemplate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

MODES = ["buffer", "stream"]
SOURCES = ["hermes", "native"]
UNKNOWN = "launch_rockets"


def _agent(key: str) -> Agent:
    agent = AGENTS[key]
    if not agent.installed():
        pytest.skip(f"{agent.name} is not installed (tests/e2e/node_modules/.bin/"
                    f"{agent.binary}): `make e2e` installs tests/e2e/package.json")
    return agent


def _output(run: subprocess.CompletedProcess[str]) -> str:
    return (run.stdout[-2000:] + "\n--- stderr ---\n" + run.stderr[-2000:])


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return home, work


def _shell_turn(fake: Any, start_proxy: Any, tmp_path: Path, agent: Agent, mode: str,
                name: str, source: str,
                ) -> tuple[subprocess.CompletedProcess[str], list[dict], str, Path]:
    """A turn where the model calls `name` with a command that writes a marker to out.txt:
    the run, the chat requests the fake received, the marker and the work directory."""
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode)
    marker = f"e2e-{secrets.token_hex(5)}"
    command = f"echo {marker} > out.txt && cat out.txt"
    fake.answer(Model(True, tool=agent.shell_tool, name=name, commands=(command,),
                      source=source))
    home, work = _dirs(tmp_path)
    run = agent.run(proxy.url, home, work, "Run the command this task needs, then report.")
    return run, [r.json for r in fake.chat_requests()], marker, work


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", list(AGENTS))
def test_a_text_turn(fake, start_proxy, tmp_path, key, mode):
    agent = _agent(key)
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode)
    fake.answer(Model())
    home, work = _dirs(tmp_path)

    run = agent.run(proxy.url, home, work, "Say hello.")

    assert run.returncode == 0, _output(run)
    assert TEXT in run.stdout, _output(run)
    turns = [r.json for r in fake.chat_requests()]
    own = [turn for turn in turns if agent.shell_tool in tool_names(turn)]
    assert own, [tool_names(turn) for turn in turns]  # the agent's turn, with its tools
    assert all(turn["stream"] is (mode == "stream") for turn in own)  # buffered: one answer


@pytest.mark.parametrize("source", ["hermes", "qwen_xml"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", list(AGENTS))
def test_a_call_written_as_text_runs_the_shell_tool(fake, start_proxy, tmp_path, key, mode,
                                                    source):
    agent = _agent(key)
    run, requests, marker, work = _shell_turn(fake, start_proxy, tmp_path, agent, mode,
                                              agent.shell_tool, source)

    assert run.returncode == 0, _output(run)
    assert AFTER_TOOL in run.stdout, _output(run)  # the answer to the tool's result
    assert (work / "out.txt").read_text().strip() == marker  # the agent ran the command
    (call,) = delivered_calls(requests)
    assert call["name"] == agent.shell_tool
    assert json.loads(call["arguments"])["command"].startswith(f"echo {marker} ")
    assert any(marker in result for result in tool_results(requests))
    assert "<tool_call>" not in run.stdout  # the frame reached the agent as a call


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", list(AGENTS))
def test_two_calls_in_one_answer_both_run(fake, start_proxy, tmp_path, key, mode):
    agent = _agent(key)
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode)
    markers = [f"e2e-{secrets.token_hex(5)}" for _ in range(2)]
    commands = tuple(f"echo {marker} > out{i}.txt" for i, marker in enumerate(markers))
    fake.answer(Model(True, tool=agent.shell_tool, name=agent.shell_tool, commands=commands))
    home, work = _dirs(tmp_path)

    run = agent.run(proxy.url, home, work, "Run the commands this task needs, then report.")

    assert run.returncode == 0, _output(run)
    assert AFTER_TOOL in run.stdout, _output(run)
    assert [(work / f"out{i}.txt").read_text().strip() for i in range(2)] == markers
    requests = [r.json for r in fake.chat_requests()]
    calls = delivered_calls(requests)
    assert [json.loads(call["arguments"])["command"] for call in calls] == list(commands)
    assert len(tool_results(requests[-1:])) == 2  # both results went back in one turn


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", list(AGENTS))
def test_thinking_closed_by_a_lone_end_tag_stays_off_the_screen(fake, start_proxy, tmp_path,
                                                                key, mode):
    """Every answer starts inside the thinking block the template opened: the agent shows
    the answers only, and runs the call written after the closer."""
    agent = _agent(key)
    fake.template = ChatTemplate(opens_thinking=True)  # what the proxy's profile reads of it
    proxy = start_proxy(api_keys=[KEY], stream_mode=mode)
    marker = f"e2e-{secrets.token_hex(5)}"
    thinking = "Pondering what the user wants before I answer"
    fake.answer(Model(True, tool=agent.shell_tool, name=agent.shell_tool,
                      commands=(f"echo {marker} > out.txt",), thinking=thinking))
    home, work = _dirs(tmp_path)

    run = agent.run(proxy.url, home, work, "Run the command this task needs, then report.")

    assert run.returncode == 0, _output(run)
    assert AFTER_TOOL in run.stdout, _output(run)
    assert (work / "out.txt").read_text().strip() == marker
    assert thinking not in run.stdout
    assert "</think>" not in run.stdout
    (call,) = delivered_calls([r.json for r in fake.chat_requests()])
    assert call["name"] == agent.shell_tool


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", list(AGENTS))
def test_a_tool_named_in_the_wrong_case_is_the_offered_one(fake, start_proxy, tmp_path, key,
                                                           mode, source):
    agent = _agent(key)
    assert agent.wrong_case != agent.shell_tool
    assert agent.wrong_case.lower() == agent.shell_tool.lower()
    run, requests, marker, work = _shell_turn(fake, start_proxy, tmp_path, agent, mode,
                                              agent.wrong_case, source)

    assert run.returncode == 0, _output(run)
    assert AFTER_TOOL in run.stdout, _output(run)
    assert (work / "out.txt").read_text().strip() == marker
    (call,) = delivered_calls(requests)
    assert call["name"] == agent.shell_tool  # repaired to the name the agent offered


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", list(AGENTS))
def test_a_call_to_a_tool_not_offered_keeps_the_loop_alive(fake, start_proxy, tmp_path, key,
                                                           mode, source):
    agent = _agent(key)
    run, requests, _, work = _shell_turn(fake, start_proxy, tmp_path, agent, mode, UNKNOWN,
                                         source)

    assert run.returncode == 0, _output(run)
    assert AFTER_TOOL in run.stdout, _output(run)  # the model answered the agent's refusal
    assert UNKNOWN not in tool_names(requests[0])
    (call,) = delivered_calls(requests)
    assert call["name"] == (agent.unknown_filed_as or UNKNOWN)  # delivered as written
    assert UNKNOWN in call["name"] + call["arguments"]
    results = tool_results(requests)
    assert results
    assert UNKNOWN in results[-1]  # the agent's own "no such tool"
    assert not (work / "out.txt").exists()  # nothing ran
    assert len(requests) <= 6  # one call, one answer, side requests: no retried 5xx
