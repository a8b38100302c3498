"""The fake model of an agent turn whose call the server did not parse, for the agents driven
on their own (Cline, Kilo Code): the call is written in the content as text, in one of the
`SHAPES` a model writes when its server has no parser for it (or none at all), and the proxy
must find it, repair it and hand it to the agent as a call. What the proxy logged about such
a turn and counted in /proxy/metrics is checked (`assert_logged`) against what the
shape needs (`Shape.repairs`).

The agents themselves are set up as for the chat agents (tests/e2e/chat_agents.py `Agent`,
`offline_env`): off the network, a HOME of their own, the proxy their only provider."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.e2e.chat_agents import AFTER_TOOL, TEXT, tool_names
from tests.fake_vllm import Answer, Received, vllm_answer, vllm_completion
from tests.metrics_text import metric, settled_metrics


def _hermes(name: str, arguments: dict[str, Any]) -> str:
    """A Hermes frame, as Qwen and Hermes models write it."""
    frame = json.dumps({"name": name, "arguments": arguments})
    return f"I'll run it.\n<tool_call>\n{frame}\n</tool_call>"


def _improvised(name: str, arguments: dict[str, Any]) -> str:
    """A call expression after a lead-in, the tool's name in the wrong case (a model with no
    trained format): `Run_Commands(commands=["…"])`."""
    written = "_".join(part[:1].upper() + part[1:] for part in name.split("_"))
    assert written != name, name  # the repair the shape exists for
    keywords = ", ".join(f"{key}={json.dumps(value)}" for key, value in arguments.items())
    return f"Sure, running it now:\n{written}({keywords})"


def _envelope(name: str, arguments: dict[str, Any]) -> str:
    """A bare JSON object of the model's own spelling (`tool`, `args`), each value that is no
    string written as its JSON text (`"[\\"…\\"]"`, `"120000"`): the answer is the call."""
    args = {key: value if isinstance(value, str) else json.dumps(value)
            for key, value in arguments.items()}
    return json.dumps({"tool": name, "args": args})


@dataclass(frozen=True)
class Shape:
    """How the model writes its call: the text (from the tool's name and arguments), the
    format the proxy reads it as, and the repairs it needs (what the log line and
    /proxy/metrics count, each `format:repair`)."""

    write: Callable[[str, dict[str, Any]], str]
    format: str
    repairs: tuple[str, ...]


SHAPES = {
    "hermes": Shape(_hermes, "hermes", ()),
    "improvised": Shape(_improvised, "improvised", ("tool_name_matched",)),
    "envelope": Shape(_envelope, "bare_json", ("args_as_arguments", "schema_coerced")),
}


class WrittenCall:
    """The fake model: the first request offering `tool` is answered with `text` in the
    content (finish_reason `stop`, no `tool_calls`: a server that parsed nothing); a request
    ending with a tool's result, with text quoting it; anything else (titles, summaries),
    with plain text."""

    def __init__(self, tool: str, text: str) -> None:
        self.tool, self.text = tool, text
        self._lock = threading.Lock()
        self.called = False

    def __call__(self, received: Received) -> Answer:
        body = received.json
        last = body["messages"][-1]
        if last.get("role") == "tool":
            result = json.dumps(last.get("content"))[:600]
            return vllm_answer(vllm_completion(f"{AFTER_TOOL} {result}"))(received)
        with self._lock:
            now = not self.called and self.tool in tool_names(body)
            self.called = self.called or now
        return vllm_answer(vllm_completion(self.text if now else TEXT))(received)


def _turn_line(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The one log line of a chat request whose answer held a call."""
    (line,) = [line for line in lines
               if line.get("path") == "/v1/chat/completions" and line.get("tool_calls")]
    return line


def _counted(proxy: Any, shape: Shape) -> dict[str, float]:
    """What /proxy/metrics counted of the shape: its calls, and each of its repairs."""
    text = settled_metrics(proxy)
    counts = {"calls": metric(text, "toolcall_proxy_tool_calls_total", format=shape.format)}
    for repair in shape.repairs:
        counts[repair] = metric(text, "toolcall_proxy_repairs_total", format=shape.format,
                                repair=repair)
    return counts


def assert_logged(proxy: Any, lines: list[dict[str, Any]], shape: Shape, tool: str,
                  secret: str) -> None:
    """The turn's log line names the one call's format and the shape's repairs of `tool`
    (`format:repair:tool`), nothing refused or left as text, the server's `stop` corrected,
    and no text of the turn (`secret`, in the call's arguments); /proxy/metrics counted the
    call and each repair once."""
    line = _turn_line(lines)
    assert line["formats"] == [shape.format], line
    assert sorted(line["repairs"]) == sorted(f"{shape.format}:{repair}:{tool}"
                                             for repair in shape.repairs), line
    assert line["schema_invalid"] == [], line
    assert line["left_as_text"] == [], line
    assert line["finish_reason"] == ["stop->tool_calls"], line
    assert secret not in json.dumps(line)
    assert _counted(proxy, shape) == {"calls": 1, **dict.fromkeys(shape.repairs, 1)}
