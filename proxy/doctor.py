"""`python app.py doctor`: probe a live vLLM and say how to set up the proxy in front of it.

Two small tool turns (a `get_weather` tool and a prompt that needs it) are built by the
proxy's own planner, exactly as the proxy would send them upstream:

* `auto`: with `upstream_tool_parser: true` (the client's `tool_choice: "auto"` as is). A 400
  naming `--enable-auto-tool-choice` means the server runs without a tool parser; parsed
  `tool_calls` mean it runs with one.
* `none`: with `upstream_tool_parser: false` (`tool_choice: "none"`, `skip_special_tokens:
  false`): the model writes its call as text, which names its format.

Each answer then goes through the proxy's normaliser, to say whether the proxy recovers the
call. `diagnose` turns the two probes into findings and a recommended configuration; it is
pure, so the rules are tested without a server.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .config import Config, mask_url
from .config_load import ConfigError, load_config
from .doctor_fronts import Turn, front_line, front_settings, probe_fronts
from .errors import ProxyError
from .shell.upstream import Timeouts, Upstream
from .toolcalls import FORMATS, extract
from .turn.core import Failure, UpstreamReply, decide
from .turn.normalize import split_thinking
from .turn.plan import TurnPlan, plan_turn
from .turn.thinking import LONE, LONE_CLOSE_RULE, answer_thinking

EXIT_OK = 0
EXIT_UNREACHABLE = 1
EXIT_USAGE = 2

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
# parser does; the proxy recovers those calls from the text).
VLLM_TOOL_PARSERS: dict[str, str | None] = {
    "hermes": "hermes",
    "qwen_xml": "qwen3_coder",
    "glm": "glm45",
    "tools_wrapper": None,
    "tool_calls_tag": "jamba",
    "granite": "granite",
    "llama3": "llama3_json",
    "mistral": "mistral",
    "deepseek": "deepseek_v3",
    "deepseek_dsml": "deepseek_v32",
    "kimi_k2": "kimi_k2",
    "minimax_m2": "minimax_m2",
    "harmony": "openai",
    "internlm": "internlm",
    "phi4_mini": "phi4_mini_json",
    "pythonic": "pythonic",
    "code_fence": None,
    "bare_json": "llama3_json",
    "longcat": "longcat",
    "granite_20b_fc": "granite-20b-fc",
    "step3": "step3",
    "apertus": "apertus",
    "gemma4": "gemma4",
    "functionary": None,  # llama.cpp reads Functionary v3.2; vLLM has no parser for it
    "kimi_k3": "kimi_k3",
    "minimax_m3": "minimax_m3",
    "lfm2": "lfm2",
    "gigachat": "gigachat3",
    "command_r": "cohere_command3",
    "solar_open": "solar_open2",
    "k2_horizon": None,  # SGLang's k2_horizon reads it; vLLM has no parser for it
    "inkling": "inkling",
    "functiongemma": "functiongemma",
    "hunyuan": "hy_v3",
    "minicpm": "minicpm5",
    "dots": None,  # SGLang's dots reads it; vLLM has no parser for it
    "muse": None,  # SGLang's muse reads it; vLLM has no parser for it
}
# Call markers, and the vLLM parser that reads them: named when the text holds a marker but
# no format could read a call from it (a broken or unfamiliar call).
FOREIGN_MARKERS: dict[str, str] = {
    "[TOOL_CALLS]": "mistral",
    "<|tool_calls_section_begin|>": "kimi_k2",
    "<｜tool▁calls▁begin｜>": "deepseek_v3",
    "<arg_key>": "glm45",
    "<|python_tag|>": "llama3_json",
    "<｜DSML｜tool_calls>": "deepseek_v4",
    "<|open|>tools<|sep|>": "kimi_k3",
    "<|tool_call_start|>": "lfm2",
}
_PARSER_OFF_SIGNS = ("enable-auto-tool-choice", "tool-call-parser")
_EXCERPT = 300


class DoctorError(Exception):
    """The server could not be probed; the message is one line for a person."""


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
        probe.error = _error_message(answer, body)
        return
    choices = answer.get("choices") if isinstance(answer, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
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
        _, thinking, visible = split_thinking(probe.content)
        reasoning.append(probe.content[thinking[0]:thinking[1]] if thinking else "")
        probe.text_formats = text_formats(visible)
        probe.foreign_markers = [m for m in FOREIGN_MARKERS if m in probe.content]
    if not probe.text_formats and not probe.native_calls:
        probe.reasoning_formats = text_formats("\n".join(reasoning)) if any(reasoning) else []
    decision = decide(plan, UpstreamReply(status, {}, body))
    if isinstance(decision, Failure):
        probe.error = decision.error.message
        return
    completion, outcome = decision.completion, decision.outcome
    for out_choice in completion["choices"][:1]:
        for call in out_choice["message"].get("tool_calls") or ():
            probe.proxy_calls.append({"name": call["function"]["name"],
                                      "arguments": call["function"]["arguments"]})
        probe.proxy_finish_reason = out_choice["finish_reason"]
    probe.proxy_repairs = [f"{r.format}:{r.repair}" for r in outcome.repairs]
    probe.proxy_left_as_text = [f"{t.format}:{t.reason}" + (f":{t.tool}" if t.tool else "")
                                for t in outcome.left_as_text]


def _error_message(answer: Any, body: bytes) -> str:
    """The message of an error answer (OpenAI's envelope, vLLM's flat one, or raw text)."""
    if isinstance(answer, dict):
        inner = answer.get("error")
        detail = inner if isinstance(inner, dict) else answer
        if isinstance(inner, str):
            return inner
        if isinstance(detail.get("message"), str):
            return detail["message"]
    return body[:200].decode("utf-8", "replace").strip() or "no message"


# -- findings --------------------------------------------------------------------------------


def _reasoning_parser_for(model: str) -> str:
    lowered = model.lower()
    if "qwen" in lowered:
        return "qwen3"
    if "glm" in lowered:
        return "glm45"
    return "deepseek_r1"


def _probe_notes(auto: Probe, none: Probe, tool_parser: str, formats: list[str],
                 markers: list[str]) -> list[str]:
    """What the two probes show about the server's tool parser and the model's calls."""
    notes: list[str] = []
    if tool_parser == "mismatch":
        notes.append("the server accepted tool_choice auto but left the call as text "
                     f"({', '.join(auto.text_formats)}): its --tool-call-parser does not read "
                     "this model's format (the proxy recovers it meanwhile)")
    elif tool_parser == "unknown" and auto.status == 200 and not auto.reasoning_formats:
        notes.append("tool_choice auto answered without any call: the server's parser may be "
                     "on, but the model did not call the tool this time; run doctor again")
    if auto.native_calls and auto.text_formats:
        notes.append("the server's parser returned calls and left others as text: the proxy "
                     "recovers those")
    if markers and not formats:
        notes.append(f"the text holds call markers ({', '.join(markers)}) but no call could "
                     "be read from them: replay the answer to see why")
    if none.status == 200 and not none.text_formats and not none.foreign_markers:
        if tool_parser == "on":
            notes.append('with tool_choice "none" the model wrote no call: if vLLM runs with '
                         "--exclude-tools-when-tool-choice-none, keep upstream_tool_parser "
                         "true")
        elif tool_parser == "off":
            notes.append('with tool_choice "none" the model wrote no call: if vLLM runs with '
                         "--exclude-tools-when-tool-choice-none the tools never reach the "
                         "prompt; remove that flag, or start vLLM with a tool parser")
    if auto.status is not None and auto.status >= 400 and not auto.parser_off:
        notes.append(f"the auto turn failed (HTTP {auto.status}), so the server's tool parser "
                     "could not be judged")
    return notes


def _recovery(auto: Probe, none: Probe, tool_parser: str,
              notes: list[str]) -> tuple[bool, Probe, bool | None]:
    """(whether the proxy should let upstream parse, the probe that setting corresponds to,
    whether the proxy recovered the call there: None when the model wrote none at all)."""
    # Parser on → let vLLM parse (the proxy repairs and recovers the rest).
    use_upstream_parser = tool_parser != "off"
    if tool_parser == "unknown" and not auto.recovered and none.recovered:
        use_upstream_parser = False
    chosen = auto if use_upstream_parser else none
    other = none if use_upstream_parser else auto
    recovers: bool | None
    if chosen.recovered:
        recovers = True
    elif any(p.native_calls or p.text_formats or p.proxy_left_as_text or p.foreign_markers
             for p in (auto, none)):
        recovers = False
    else:
        recovers = None  # the model wrote no call at all: nothing to judge
    if recovers is None and other.recovered:
        recovers = False
    if recovers is False and other.recovered:
        notes.append(f"the proxy recovered the call only in the {other.name!r} probe")
    return use_upstream_parser, chosen, recovers


def _vllm_flags(model: str, call_format: str | None, markers: list[str], tool_parser: str,
                reasoning: str | None,
                notes: list[str]) -> tuple[list[str], str | None, str | None]:
    """(the vLLM flags to run with, its tool-call parser, its reasoning parser)."""
    tool_call_parser = VLLM_TOOL_PARSERS.get(call_format) if call_format else None
    if call_format is None and markers:
        tool_call_parser = FOREIGN_MARKERS[markers[0]]
    flags: list[str] = []
    if tool_call_parser:
        flags += ["--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser]
    elif tool_parser == "on":
        notes.append("keep the server's current --tool-call-parser: it parsed the call")
    elif call_format:
        notes.append(f"no vLLM tool parser reads {call_format}: run vLLM without one and the "
                     "proxy with upstream_tool_parser false")
    reasoning_parser = None
    if reasoning == "content":
        reasoning_parser = _reasoning_parser_for(model)
        flags += ["--reasoning-parser", reasoning_parser]
        notes.append("the model's reasoning arrives inside content (<think>…</think>): a "
                     "reasoning parser moves it out, so no call drafted while thinking is "
                     "taken for a real one")
    elif reasoning == "field":
        notes.append("the server's reasoning parser is on (reasoning arrives in its own field)")
    return flags, tool_call_parser, reasoning_parser


def _thinking_opened(auto: Probe, none: Probe, reasoning: str | None,
                     notes: list[str]) -> str | None:
    """The `thinking_opened_by_template` the probes show: "true" when the model's thinking
    ended with a lone closer (its template opens the block: an answer cut while thinking is
    all thinking, and the streamed mode lets it flow live as such), "false" when the server
    parses the reasoning or the model writes its own opening tag (the content never starts
    inside a block: text flows live in the streamed mode); None when they do not tell."""
    kinds = {auto.thinking_in_content, none.thinking_in_content}
    if "lone" in kinds:
        notes.append("the model's thinking ends with a lone closing tag (its template opens "
                     "the block): thinking_opened_by_template true")
        return "true"
    if reasoning == "field" or "block" in kinds:
        return "false"
    if any(p.finish_reason == "length" and p.content and not p.native_calls
           for p in (auto, none)):
        notes.append("an answer was cut by max_tokens before the model said whether its "
                     "template opens a thinking block: run doctor again with a larger "
                     "--max-tokens")
    return None


def diagnose(upstream: str, models: list[str], model: str, auto: Probe,
             none: Probe) -> dict[str, Any]:
    """The findings and recommended configuration from the two probes (pure)."""
    # "mismatch": tool_choice auto accepted (vLLM refuses it without a parser) yet the call
    # left as text; "unknown": no refusal and no call at all (or the probe failed).
    tool_parser = ("off" if auto.parser_off else "on" if auto.native_calls
                   else "mismatch" if auto.status == 200 and auto.text_formats else "unknown")
    formats = list(dict.fromkeys([*none.text_formats, *auto.text_formats]))
    in_reasoning = not formats
    if in_reasoning:  # the call was written in the reasoning only: its format still counts
        formats = list(dict.fromkeys([*none.reasoning_formats, *auto.reasoning_formats]))
    call_format = formats[0] if formats else None
    markers = list(dict.fromkeys([*none.foreign_markers, *auto.foreign_markers]))

    notes = _probe_notes(auto, none, tool_parser, formats, markers)
    use_upstream_parser, chosen, recovers = _recovery(auto, none, tool_parser, notes)
    reasoning = ("field" if auto.reasoning_in_field or none.reasoning_in_field else
                 "content" if auto.reasoning_in_content or none.reasoning_in_content else None)
    flags, tool_call_parser, reasoning_parser = _vllm_flags(
        model, call_format, markers, tool_parser, reasoning, notes)

    if tool_parser == "off":
        notes.append("the server runs without a tool parser: the proxy must run with "
                     "upstream_tool_parser false (vLLM refuses tool_choice auto), or restart "
                     "vLLM with the flags below")
    # A call recovered from the reasoning is no repair of the call itself: no reason to
    # steady the model.
    repaired = [r for r in chosen.proxy_repairs
                if not r.endswith(":from_reasoning") and not r.startswith("content:")]
    unsteady = (repaired or chosen.proxy_left_as_text
                or (auto.text_formats and none.text_formats
                    and auto.text_formats[0] != none.text_formats[0]))
    proxy: dict[str, Any] = {
        "upstream": mask_url(upstream),
        "upstream_tool_parser": use_upstream_parser,
        "formats": formats or ["auto"],
        "tool_temperature": 0.2 if unsteady else None,
    }
    opened = _thinking_opened(auto, none, reasoning, notes)
    if opened is not None:
        proxy["thinking_opened_by_template"] = opened
    if unsteady:
        notes.append("the calls needed repair or changed format: a lower tool_temperature "
                     "keeps the model's call format steady")
    if call_format and in_reasoning:
        notes.append(f"the model wrote its call ({call_format}) only in its reasoning, where "
                     "the server's tool parser does not look; the proxy recovers it when "
                     "nothing visible follows")
    failed = [{"probe": p.name, "status": p.status, "error": p.error}
              for p in (auto, none) if p.failed]
    if failed:
        notes.append("nothing is recommended from a failed probe: fix what it says and run "
                     "doctor again")
    elif proxy["upstream"] != upstream:
        notes.append("the upstream URL's credentials are shown as ***: put them back in "
                     "config.json")
    return {
        "upstream": mask_url(upstream),
        "models": models,
        "model": model,
        "tool_parser": tool_parser,
        "call_format": call_format,
        "call_in_reasoning": bool(call_format) and in_reasoning,
        "formats_seen": formats,
        "foreign_markers": markers,
        "reasoning": reasoning,
        "proxy_recovers": recovers,
        "failed": failed,
        "recommended": None if failed else {
            "proxy": proxy,
            "vllm_flags": flags,
            "vllm_command": " ".join(["vllm serve", model, *flags]),
            "tool_call_parser": tool_call_parser,
            "reasoning_parser": reasoning_parser,
        },
        "notes": notes,
        "probes": {"auto": auto.as_dict(), "none": none.as_dict()},
    }


# -- the live server -------------------------------------------------------------------------


def _headers(api_key: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def list_models(upstream: Upstream, headers: dict[str, str], timeouts: Timeouts) -> list[str]:
    """The ids `GET /v1/models` lists; DoctorError when it cannot be read."""
    try:
        reply = upstream.complete_get("/v1/models", headers, timeouts)
    except ProxyError as exc:
        raise DoctorError(exc.message) from None
    if reply.status >= 400:
        try:
            answer = orjson.loads(reply.body)
        except orjson.JSONDecodeError:
            answer = None
        raise DoctorError(f"{mask_url(upstream.base)}/v1/models answered HTTP {reply.status}: "
                          f"{_error_message(answer, reply.body)}")
    try:
        data = orjson.loads(reply.body).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        data = None
    if not isinstance(data, list):
        raise DoctorError(f"{mask_url(upstream.base)}/v1/models did not answer a model list "
                          "(is this an OpenAI-compatible server?)")
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


def proxy_health(upstream: Upstream, headers: dict[str, str],
                 timeouts: Timeouts) -> dict[str, Any] | None:
    """The server's `/proxy/health` when it answers as a Tool Call Proxy does, else None
    (vLLM answers 404; any failure is for `/v1/models` to report)."""
    try:
        reply = upstream.complete_get("/proxy/health", headers, timeouts)
        health = orjson.loads(reply.body) if reply.status == 200 else None
    except (ProxyError, orjson.JSONDecodeError):
        return None
    if (isinstance(health, dict) and isinstance(health.get("version"), str)
            and isinstance(health.get("config"), dict) and "upstream" in health):
        return health
    return None


def run_probe(upstream: Upstream, name: str, plan: TurnPlan, headers: dict[str, str],
              timeouts: Timeouts) -> Probe:
    """Send one planned probe upstream and read the answer."""
    probe = Probe(name, orjson.loads(plan.upstream_body))
    started = time.monotonic()
    try:
        reply = upstream.complete("/v1/chat/completions", plan.upstream_body, headers,
                                  timeouts)
    except ProxyError as exc:
        probe.error, probe.network_error = exc.message, True
        return probe
    finally:
        probe.elapsed_ms = round((time.monotonic() - started) * 1000, 1)
    read_answer(probe, plan, reply.status, reply.body)
    return probe


def run_doctor(url: str, model: str | None, *, api_key: str = "", max_tokens: int = 512,
               timeout: float = 120.0) -> dict[str, Any]:
    """Probe the server at `url` and return the report; DoctorError if it cannot be probed."""
    upstream = Upstream(url, pool_size=2)
    headers = _headers(api_key)
    health = proxy_health(upstream, headers, Timeouts(5.0, 30.0))
    if health is not None:
        named = health["upstream"]  # one URL, or the list of a proxy's replicas
        behind = ",".join(mask_url(str(url)) for url in
                          (named if isinstance(named, list) else [named]))
        raise DoctorError(f"{mask_url(upstream.base)} is a Tool Call Proxy, not vLLM (its "
                          "/proxy/health answers as one), and probing through it would "
                          "judge the proxy's repairs: point doctor at the vLLM server behind "
                          f"it: --upstream {behind}")
    models = list_models(upstream, headers, Timeouts(5.0, 30.0))
    if not models:
        raise DoctorError(f"{mask_url(upstream.base)}/v1/models lists no model")
    if model is None:
        model = models[0]
    elif model not in models:
        raise DoctorError(f"model {model!r} is not served by {mask_url(upstream.base)}; it serves: "
                          f"{', '.join(models)}")
    timeouts = Timeouts(5.0, timeout)
    auto = run_probe(upstream, "auto", plan_probe(model, max_tokens, upstream_tool_parser=True),
                     headers, timeouts)
    none = run_probe(upstream, "none",
                     plan_probe(model, max_tokens, upstream_tool_parser=False),
                     headers, timeouts)
    report = diagnose(upstream.base, models, model, auto, none)
    report["fronts"] = _front_probes(report, upstream, headers, timeouts, max_tokens)
    return report


def _front_probes(report: dict[str, Any], upstream: Upstream, headers: dict[str, str],
                  timeouts: Timeouts, max_tokens: int) -> list[dict[str, Any]]:
    """Each front's tool turn with the recommended settings (none when nothing is
    recommended); a front whose turn fails is a failed probe too."""
    recommended = report["recommended"]
    if recommended is None:
        return []
    proxy = recommended["proxy"]
    turn = Turn(report["model"], WEATHER_TOOL["function"], PROMPT, max_tokens)
    probes = [probe.as_dict() for probe in probe_fronts(
        turn, front_settings(proxy["upstream_tool_parser"], proxy["formats"]), upstream,
        headers, timeouts)]
    report["failed"] += [{"probe": f"front {probe['front']}", "status": probe["status"],
                          "error": probe["error"]} for probe in probes if probe["error"]]
    return probes


# -- output ----------------------------------------------------------------------------------


def _probe_line(probe: dict[str, Any]) -> str:
    if probe["status"] is None:
        return f"no answer: {probe['error']}"
    if probe["status"] >= 400 or probe["error"]:
        return f"HTTP {probe['status']}: {probe['error']}"
    parts = [f"HTTP {probe['status']} in {probe['elapsed_ms']:.0f} ms"]
    if probe["native_calls"]:
        names = ", ".join(str(c["name"]) for c in probe["native_calls"])
        parts.append(f"parsed tool_calls: {names}")
    if probe["text_formats"]:
        parts.append(f"call written as text: {', '.join(probe['text_formats'])}")
    if probe["reasoning_formats"]:
        parts.append(f"call written in the reasoning: {', '.join(probe['reasoning_formats'])}")
    if not (probe["native_calls"] or probe["text_formats"] or probe["reasoning_formats"]):
        parts.append("no call")
    parts.append(f"finish_reason {probe['finish_reason']}")
    calls = "; ".join(f"{c['name']}({c['arguments']})" for c in probe["proxy_calls"])
    parts.append(f"the proxy sends {calls or 'no call'} with finish_reason "
                 f"{probe['proxy_finish_reason']}")
    if probe["proxy_repairs"]:
        parts.append(f"repairs {', '.join(probe['proxy_repairs'])}")
    if probe["proxy_left_as_text"]:
        parts.append(f"left as text {', '.join(probe['proxy_left_as_text'])}")
    return "; ".join(parts)


def _failure(failed: dict[str, Any]) -> str:
    """One failed probe's status and error, as a person reads it."""
    status = f"HTTP {failed['status']}: " if failed["status"] is not None else ""
    return status + str(failed["error"])


def render(report: dict[str, Any]) -> str:
    """The report for a person."""
    probes = report["probes"]
    parser = {"on": "ON (the server returned parsed tool_calls)",
              "off": "OFF (the server refuses tool_choice auto: no --enable-auto-tool-choice)",
              "mismatch": "ON but not matching the model (the call came back as text)",
              "unknown": "unknown (no parsed call and no refusal)"}[report["tool_parser"]]
    call_format = report["call_format"] or "not seen (the model wrote no call as text)"
    if report["call_in_reasoning"]:
        call_format += " (in the reasoning)"
    recovers = {True: "yes", False: "NO", None: "cannot tell (the model made no call)"}[
        report["proxy_recovers"]]
    reasoning = {"field": "in its own field (reasoning parser on)",
                 "content": "inside content (<think>): no reasoning parser",
                 None: "none seen"}[report["reasoning"]]
    recommended = report["recommended"]
    lines = [
        f"toolcall-proxy doctor: {report['upstream']}",
        "",
        f"models          {', '.join(report['models'])}",
        f"probed          {report['model']}",
        f"tool parser     {parser}",
        f"call format     {call_format}",
        f"reasoning       {reasoning}",
        f"proxy recovers  {recovers}",
        "",
        f"probe auto      {_probe_line(probes['auto'])}",
        f"probe none      {_probe_line(probes['none'])}",
    ]
    for probe in (probes["auto"], probes["none"]):
        if probe["content"] and not (probe["text_formats"] or probe["native_calls"]
                                     or probe["reasoning_formats"]):
            lines.append(f"  {probe['name']} content: {probe['content']!r}")
    if report.get("fronts"):
        lines += ["", "each front, as the proxy answers its clients with the recommended "
                      "settings:"]
        lines += [f"  {front_line(probe)}" for probe in report["fronts"]]
    if recommended is None:
        failures = ", ".join(f"probe {f['probe']} failed ({_failure(f)})"
                             for f in report["failed"])
        lines += ["", f"no recommendation: {failures}"]
    else:
        lines += ["", "recommended proxy settings (config.json):",
                  "  " + orjson.dumps(recommended["proxy"]).decode()]
        if recommended["vllm_flags"]:
            lines += ["recommended vLLM command:", f"  {recommended['vllm_command']}"]
    if report["notes"]:
        lines += ["", "notes:"] + [f"  - {note}" for note in report["notes"]]
    return "\n".join(lines) + "\n"


def _positive(kind: type[int] | type[float]) -> Any:
    """An argparse type: a number of `kind` greater than 0 (else a usage error, exit 2)."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:  # also refuses nan
            raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
        return value
    return parse


def main(argv: Sequence[str]) -> int:
    """`python app.py doctor [--upstream URL] [--model M] [--json]`: 0 when the server was
    probed, 1 when it could not be (unreachable, a probe failed, the proxy itself), 2 for a
    bad command line or config."""
    parser = argparse.ArgumentParser(
        prog="app.py doctor",
        description="Probe a live vLLM (or any OpenAI-compatible server): is its tool parser "
                    "on, which format does the model write its calls in, does the proxy "
                    "recover them, and which settings to use.")
    parser.add_argument("--upstream", help="base URL of the server (default: the proxy's "
                                           "configured upstream, http://127.0.0.1:8000)")
    parser.add_argument("--model", help="model to probe (default: the first one listed)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--config", help="the proxy's JSON config file (for upstream and "
                                         "upstream_api_key)")
    parser.add_argument("--api-key", help="bearer key for the server (default: the config's "
                                          "upstream_api_key)")
    parser.add_argument("--max-tokens", type=_positive(int), default=512,
                        help="max_tokens of each probe (default 512)")
    parser.add_argument("--timeout", type=_positive(float), default=120.0,
                        help="seconds to wait for each probe's answer (default 120)")
    args = parser.parse_args(list(argv))
    try:
        flags = [*(["--config", args.config] if args.config else []),
                 *(["--upstream", args.upstream] if args.upstream else [])]
        config = load_config(flags)
    except ConfigError as exc:
        print(f"toolcall-proxy doctor: {exc}", file=sys.stderr)
        return EXIT_USAGE
    api_key = config.upstream_api_key if args.api_key is None else args.api_key
    # Replicas of one model: each is probed, in turn (the worst outcome is the exit status).
    # With --json, several reports are printed one per line.
    urls = config.replicas()
    return max(_doctor_one(url, args, api_key, len(urls) > 1) for url in urls)


def _doctor_one(url: str, args: argparse.Namespace, api_key: str, lines: bool) -> int:
    """Probe one server and print its report: the exit status for it."""
    try:
        report = run_doctor(url, args.model, api_key=api_key,
                            max_tokens=args.max_tokens, timeout=args.timeout)
    except DoctorError as exc:
        if args.json:
            print(orjson.dumps({"upstream": mask_url(url), "error": str(exc)}).decode())
        print(f"toolcall-proxy doctor: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json:
        print(orjson.dumps(report, option=0 if lines else orjson.OPT_INDENT_2).decode())
    else:
        sys.stdout.write(render(report))
    for failed in report["failed"]:
        print(f"toolcall-proxy doctor: probe {failed['probe']}: {_failure(failed)}",
              file=sys.stderr)
    return EXIT_UNREACHABLE if report["failed"] else EXIT_OK
