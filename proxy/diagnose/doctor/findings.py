"""The doctor's findings from its two probes, and the configuration it recommends (pure:
the rules are tested without a server)."""

from __future__ import annotations

from typing import Any

from ...base.config import mask_url
from .probe import FOREIGN_MARKERS, VLLM_TOOL_PARSERS, Probe


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
