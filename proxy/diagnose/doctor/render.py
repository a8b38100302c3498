"""The doctor's report as lines for a person."""

from __future__ import annotations

from typing import Any

import orjson

from ...turn.constrained.dialects import dialects_of
from ...turn.constrained.profile import UpstreamProfile
from .fronts import front_line


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


def failure_line(failed: dict[str, Any]) -> str:
    """One failed probe's status and error, as a person reads it."""
    status = f"HTTP {failed['status']}: " if failed["status"] is not None else ""
    return status + str(failed["error"])


def _profile_lines(record: Any) -> list[str]:
    """The server as the proxy profiles it: kind, version, window, thinking, dialects."""
    profile = UpstreamProfile.from_record(record) if isinstance(record, dict) else None
    if profile is None:
        return []
    opened = {True: "yes", False: "no", None: "not told"}[profile.thinking_opened]
    dialects = ", ".join(d.name for d in dialects_of(profile)) or "none"
    return [f"server          {profile.kind} {profile.version or '(version unknown)'}, "
            f"context {profile.context_length or 'unknown'}",
            f"opens thinking  {opened} (in the generation prompt)",
            f"constraints     {dialects} (re-asks of demanded calls, unreadable frames)"]


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
        *_profile_lines(report.get("profile")),
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
        failures = ", ".join(f"probe {f['probe']} failed ({failure_line(f)})"
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
