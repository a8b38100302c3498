"""The score's report, pure: every asked job's verdicts summed per way (straight, each front
of the proxy) and mode, the turns whose answers differ straight and through the proxy, as
JSON-able data (`--json`) and as the table a person reads at a glance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .checks import CHECKS, RIGHT, STREAM_EQUAL, verdicts, why_not
from .jobs import BUDGET, MODES, STRAIGHT, UNSAID, Asked
from .reading import Reading
from .suite import SUITE, VERSION

ROWS = (*CHECKS, RIGHT)
LABELS = {"answered": "answered", "tool": "right tool", "schema": "schema-valid",
          "fixed": "fixed arguments", "no_invented": "no call invented",
          "clean": "content clean", "finish": "finish reason", RIGHT: "turns right",
          STREAM_EQUAL: "streamed = buffered"}


def _entry(asked: Asked) -> dict[str, Any]:
    job, reading = asked.job, asked.reading
    entry: dict[str, Any] = {"turn": job.turn.id, "way": job.path, "mode": job.mode}
    if reading is None:
        return {**entry, "asked": False, "left_out": asked.left_out}
    return {**entry, "asked": True, "verdicts": verdicts(job.turn, reading),
            "status": reading.status, "error": reading.error,
            "answer": why_not(job.turn, reading), "requests": reading.requests,
            "seconds": round(reading.seconds, 3)}


def build(asked: Sequence[Asked], *, upstream: str, model: str, profile: dict[str, Any],
          ways: Sequence[str], seconds: float, max_requests: int) -> dict[str, Any]:
    """The report of a run (`ways`: straight first, then the fronts asked)."""
    entries = [_entry(a) for a in asked]
    readings: dict[tuple[str, str, str], Reading] = {
        (a.job.turn.id, a.job.path, a.job.mode): a.reading for a in asked
        if a.reading is not None}
    totals: dict[str, dict[str, Any]] = {}
    for way in ways:
        totals[way] = {}
        for mode in MODES:
            mine = [e for e in entries if e["way"] == way and e["mode"] == mode and e["asked"]]
            column: dict[str, Any] = {}
            for check in ROWS:
                judged = [e["verdicts"][check] for e in mine
                          if e["verdicts"][check] is not None]
                column[check] = {"passed": sum(judged), "of": len(judged)}
            column["requests"] = sum(e["requests"] for e in mine)
            column["seconds"] = round(sum(e["seconds"] for e in mine), 3)
            column["asked"] = len(mine)
            totals[way][mode] = column
        pairs = [(readings.get((t.id, way, MODES[0])), readings.get((t.id, way, MODES[1])))
                 for t in SUITE]
        both = [(b, s) for b, s in pairs if b is not None and s is not None]
        totals[way][STREAM_EQUAL] = {"passed": sum(b.same_answer(s) for b, s in both),
                                     "of": len(both),
                                     "differ": [t.id for t, (b, s) in zip(SUITE, pairs,
                                                                          strict=True)
                                                if b is not None and s is not None
                                                and not b.same_answer(s)]}
    return {
        "suite": {"version": VERSION, "turns": len(SUITE)},
        "upstream": upstream, "model": model,
        "server": {"kind": profile.get("kind"), "version": profile.get("version")},
        "profile": profile, "ways": list(ways), "modes": list(MODES),
        "max_requests": max_requests,
        "requests": sum(e.get("requests", 0) for e in entries),
        "not_asked": sum(1 for e in entries if e.get("left_out") == BUDGET),
        "unsaid": {way: [e["turn"] for e in entries if e["way"] == way
                         and e.get("left_out") == UNSAID and e["mode"] == MODES[0]]
                   for way in ways if way != STRAIGHT},
        "seconds": round(seconds, 1), "totals": totals,
        "differ": _differ(entries, ways), "turns": entries,
    }


def _differ(entries: list[dict[str, Any]], ways: Sequence[str]) -> list[dict[str, Any]]:
    """The (turn, mode) pairs whose verdict `right` is not the same straight and through
    each front: what each got, and the checks each failed."""
    by_key = {(e["turn"], e["way"], e["mode"]): e for e in entries if e["asked"]}
    out = []
    for turn in SUITE:
        for mode in MODES:
            straight = by_key.get((turn.id, STRAIGHT, mode))
            for way in ways[1:]:
                through = by_key.get((turn.id, way, mode))
                if straight is None or through is None:
                    continue
                if straight["verdicts"][RIGHT] == through["verdicts"][RIGHT]:
                    continue
                out.append({"turn": turn.id, "mode": mode, "way": way,
                            "straight": _side(straight), "proxy": _side(through)})
    return out


def _side(entry: dict[str, Any]) -> dict[str, Any]:
    failed = [c for c in CHECKS if entry["verdicts"][c] is False]
    return {"right": entry["verdicts"][RIGHT], "failed": failed, "answer": entry["answer"]}


def _cell(total: dict[str, int]) -> str:
    return f"{total['passed']}/{total['of']}" if total["of"] else "-"


def render(report: dict[str, Any]) -> str:
    """The report as a person reads it."""
    server = report["server"]
    ways = report["ways"]
    lines = [f"Tool Call Proxy score: suite {report['suite']['version']} "
             f"({report['suite']['turns']} turns), {server['kind'] or 'unknown'} "
             f"{server['version'] or ''}".rstrip() + f", model {report['model']}",
             f"upstream {report['upstream']}: {report['requests']} requests, "
             f"{report['seconds']} s" + (f", {report['not_asked']} asks left out by "
                                         f"--max-requests {report['max_requests']}"
                                         if report["not_asked"] else ""), ""]
    width = 22
    heads = ["straight" if way == STRAIGHT else f"proxy ({way})" for way in ways]
    lines.append(" " * width + "".join(f"{head:<20}" for head in heads))
    lines.append(f"{'check':<{width}}" + "".join(f"{mode:<10}" for _ in ways for mode in MODES))
    totals = report["totals"]
    for row in ROWS:
        lines.append(f"{LABELS[row]:<{width}}" + "".join(
            f"{_cell(totals[way][mode][row]):<10}" for way in ways for mode in MODES))
    lines.append(f"{LABELS[STREAM_EQUAL]:<{width}}" + "".join(
        f"{_cell(totals[way][STREAM_EQUAL]):<20}" for way in ways))
    lines.append(f"{'upstream requests':<{width}}" + "".join(
        f"{totals[way][mode]['requests']:<10}" for way in ways for mode in MODES))
    lines.append(f"{'seconds':<{width}}" + "".join(
        f"{totals[way][mode]['seconds']:<10.1f}" for way in ways for mode in MODES))
    differ = report["differ"]
    lines.append("")
    if not differ:
        lines.append("No turn differs straight and through the proxy.")
    else:
        groups: dict[tuple[str, ...], list[str]] = {}
        for item in differ:  # one entry for both modes when they got the same answers
            straight, proxy = item["straight"], item["proxy"]
            key = (item["turn"], item["way"], _verdict(straight), _verdict(proxy),
                   straight["answer"], proxy["answer"])
            groups.setdefault(key, []).append(item["mode"])
        lines.append(f"Turns that differ straight and through the proxy ({len(groups)}):")
        for (turn, way, straight_verdict, proxy_verdict, straight_answer,
             proxy_answer), modes in groups.items():
            lines.append(f"  {turn} ({'+'.join(modes)}, {way}): straight {straight_verdict}, "
                         f"through the proxy {proxy_verdict}")
            lines.append(f"      straight: {_short(straight_answer)}")
            lines.append(f"      proxy:    {_short(proxy_answer)}")
    for way, turns in report["unsaid"].items():
        if turns:
            lines.append(f"Not asked through {way} (its API cannot say them): "
                         f"{', '.join(turns)}")
    for way in ways:
        unequal = totals[way][STREAM_EQUAL]["differ"]
        if unequal:
            lines.append(f"Streamed differs from buffered ({way}): {', '.join(unequal)}")
    return "\n".join(lines) + "\n"


def _short(text: str, most: int = 160) -> str:
    return text if len(text) <= most else text[:most] + "…"


def _verdict(side: dict[str, Any]) -> str:
    return "right" if side["right"] else "wrong (" + ", ".join(side["failed"]) + ")"
