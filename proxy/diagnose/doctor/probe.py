"""The doctor's probe turns: what is sent (a `get_weather` tool turn planned by the proxy's own
planner) and what is read from the answer (native calls, the text's format, reasoning, what the
proxy makes of it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import ProxyError
from ...toolcalls import FORMATS, extract
from ...toolcalls.registry import SPECS
from ...turn.core import Failure, UpstreamReply, decide
from ...turn.normalize import split_thinking
from ...turn.plan import TurnPlan, plan_turn
from ...turn.thinking import LONE, LONE_CLOSE_RULE, answer_thinking

TOOL_NAME = "get_weather"
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
PROMPT = ("What is the weather in Paris right now? Use the get_weather tool to find out; "
          "do not guess.")

# The vLLM `--tool-call-parser` that reads each text format the proxy knows (None: no vLLM
# parser does; the proxy recovers those calls from the text), from the formats' specs.
VLLM_TOOL_PARSERS: dict[str, str | None] = {spec.name: spec.doctor_parser for spec in SPECS}
# Call markers, and the vLLM parser that reads them: named when the text holds a marker but
# no format could read a call from it (a broken or unfamiliar call).
FOREIGN_MARKERS: dict[str, str] = {
    marker: parser for spec in SPECS for marker, parser in spec.doctor_markers}
_PARSER_OFF_SIGNS = ("enable-auto-tool-choice", "tool-call-parser")
_EXCERPT = 300
# The most the doctor reads of any answer: a model list, a health report or a probe turn of
# a few hundred tokens is far smaller; a server that sends more is not answering as one.
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class DoctorError(Exception):
    """The server could not be probed; the message is one line for a person."""


def read_failure(error: ProxyError, what: str) -> str:
    """A failed read of `what` in one line: an answer past the doctor's bound said so."""
    if error.code == "upstream_too_large":
        return (f"{what} is larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB: not the "
                "answer of an OpenAI-compatible server")
    return error.message


@dataclass
class Probe:
    """One tool turn sent to the server, and what came back."""

    name: str  # "auto" or "none"
    sent: dict[str, Any]
    status: int | None = None
    error: str | None = None  # a network failure, or the server's error message
    network_error: bool = False
    elapsed_ms: float | None = None
    native_calls: list[dict[str, Any]] = field(default_factory=list)
    content: str | None = None
    reasoning_in_field: bool = False
    reasoning_in_content: bool = False
    thinking_in_content: str | None = None  # "block" (its opening tag written) or "lone"
    finish_reason: str | None = None
    text_formats: list[str] = field(default_factory=list)  # each format read alone
    reasoning_formats: list[str] = field(default_factory=list)  # a call in the reasoning only
    foreign_markers: list[str] = field(default_factory=list)
    proxy_calls: list[dict[str, Any]] = field(default_factory=list)
    proxy_repairs: list[str] = field(default_factory=list)
    proxy_left_as_text: list[str] = field(default_factory=list)
    proxy_finish_reason: str | None = None

    @property
    def parser_off(self) -> bool:
        """The server refused tool_choice "auto" for want of a tool parser."""
        return self.status == 400 and any(s in (self.error or "") for s in _PARSER_OFF_SIGNS)

    @property
    def failed(self) -> bool:
        """The turn told nothing: no answer, an HTTP error (other than the tool-parser
        refusal, which is a finding), or an answer that is not a chat completion."""
        return self.error is not None and not self.parser_off

    @property
    def recovered(self) -> bool:
        """The proxy's answer for this turn holds a `get_weather` call."""
        return any(call["name"] == TOOL_NAME for call in self.proxy_calls)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (the content cut to an excerpt)."""
        out = dataclasses.asdict(self)
        out["content"] = _excerpt(self.content)
        out["recovered"] = self.recovered
        return out


def _excerpt(text: str | None) -> str | None:
    if text is None or len(text) <= _EXCERPT:
        return text
    return text[:_EXCERPT] + "…"


def client_request(model: str, max_tokens: int) -> dict[str, Any]:
    """The tool turn a client would send (stream off, a short answer)."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "tools": [WEATHER_TOOL],
        "tool_choice": "auto",
        "stream": False,
        "max_tokens": max_tokens,
    }


def plan_probe(model: str, max_tokens: int, *, upstream_tool_parser: bool) -> TurnPlan:
    """The proxy's plan for the probe turn under either setting of `upstream_tool_parser`."""
    config = dataclasses.replace(Config(), upstream_tool_parser=upstream_tool_parser)
    return plan_turn(client_request(model, max_tokens), config, client_stream=False,
                     include_usage=False)


def text_formats(content: str) -> list[str]:
    """The formats whose parser, used alone, reads a `get_weather` call in `content`."""
    tools = {TOOL_NAME: WEATHER_TOOL["function"]["parameters"]}
    return [name for name in FORMATS
            if any(call.name == TOOL_NAME
                   for call in extract(content, tools, formats=[name]).calls)]


def read_answer(probe: Probe, plan: TurnPlan, status: int, body: bytes) -> None:
    """Fill `probe` from the server's answer: native calls, the text's format, reasoning,
    and what the proxy would make of it."""
    probe.status = status
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        answer = None
    if status >= 400:
        probe.error = error_message(answer, body)
        return
    choices = answer.get("choices") if isinstance(answer, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        probe.error = "the answer is not a chat completion"
        return
    probe.finish_reason = choice.get("finish_reason")
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            probe.native_calls.append({"name": function.get("name"),
                                       "arguments": function.get("arguments")})
    content = message.get("content")
    probe.content = content if isinstance(content, str) else None
    reasoning = [message[key] for key in ("reasoning_content", "reasoning")
                 if isinstance(message.get(key), str) and message[key].strip()]
    probe.reasoning_in_field = bool(reasoning)
    if probe.content:
        thinking = answer_thinking(probe.content, LONE_CLOSE_RULE, probe.finish_reason)
        probe.thinking_in_content = None if thinking is None else (
            "lone" if thinking[2] == LONE else "block")
        probe.reasoning_in_content = (thinking is not None or "<think>" in probe.content
                                      or "</think>" in probe.content)
        _, thought, visible = split_thinking(probe.content)
        reasoning.append(probe.content[thought[0]:thought[1]] if thought else "")
        probe.text_formats = text_formats(visible)
        probe.foreign_markers = [m for m in FOREIGN_MARKERS if m in probe.content]
    if not probe.text_formats and not probe.native_calls:
        probe.reasoning_formats = text_formats("\n".join(reasoning)) if any(reasoning) else []
    decision = decide(plan, UpstreamReply(status, {}, body))
    if isinstance(decision, Failure):
        probe.error = decision.error.message
        return
    outcome, first = decision.outcome, decision.result.first
    probe.proxy_calls.extend({"name": call.name, "arguments": call.arguments}
                             for call in first.calls)
    probe.proxy_finish_reason = first.finish
    probe.proxy_repairs = [f"{r.format}:{r.repair}" for r in outcome.repairs]
    probe.proxy_left_as_text = [f"{t.format}:{t.reason}" + (f":{t.tool}" if t.tool else "")
                                for t in outcome.left_as_text]


def error_message(answer: Any, body: bytes) -> str:
    """The message of an error answer (OpenAI's envelope, vLLM's flat one, or raw text)."""
    if isinstance(answer, dict):
        inner = answer.get("error")
        detail = inner if isinstance(inner, dict) else answer
        if isinstance(inner, str):
            return inner
        if isinstance(message := detail.get("message"), str):
            return message
    return body[:200].decode("utf-8", "replace").strip() or "no message"
