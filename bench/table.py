"""The benchmark's table: its rows (`Row`), the figures in them (milliseconds, ratios, a
limit passed or failed), and the table as text or markdown."""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass
class Row:
    """One line of the table."""

    scenario: str
    direct: str
    proxy: str
    ratio: str = "—"
    target: str = "—"
    result: str = ""


def ms(seconds: float) -> str:
    """Seconds as a short millisecond figure."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    value = seconds * 1000
    return f"{value:.0f} ms" if value >= 100 else f"{value:.2f} ms" if value < 10 \
        else f"{value:.1f} ms"


def ratio_of(direct: float, proxy: float) -> float:
    """proxy / direct (NaN when undefined)."""
    if direct is None or proxy is None or math.isnan(direct) or math.isnan(proxy) or direct <= 0:
        return math.nan
    return proxy / direct


def ratio_row(scenario: str, direct: float, proxy: float, limit: float | None = None) -> Row:
    """A latency row: both sides in ms, the ratio, and pass/fail against `limit`×."""
    r = ratio_of(direct, proxy)
    row = Row(scenario, ms(direct), ms(proxy), "n/a" if math.isnan(r) else f"{r:.2f}×")
    if limit is not None:
        row.target = f"≤ {limit:.2f}×"
        row.result = "n/a" if math.isnan(r) else ("pass" if r <= limit else "FAIL")
    return row


def limit_row(scenario: str, seconds: float, limit: float, suffix: str = "") -> Row:
    """An absolute row: the proxy side against a limit in ms (a `suffix` fails it)."""
    return Row(scenario, "—", ms(seconds) + suffix, "—", f"< {limit * 1000:.0f} ms",
               "pass" if seconds < limit and not suffix else "FAIL")


HEADER = ("scenario", "direct", "proxy", "ratio", "target", "result")


def table_text(rows: list[Row]) -> str:
    """The table as aligned text."""
    cells = [HEADER] + [(r.scenario.strip("*"), r.direct, r.proxy, r.ratio, r.target, r.result)
                        for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = []
    for i, c in enumerate(cells):
        if i > 0 and rows[i - 1].scenario.startswith("**"):
            lines.append("")
            lines.append(c[0])
            continue
        lines.append("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def table_markdown(rows: list[Row]) -> str:
    """The table as GitHub markdown."""
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        out.append(f"| {r.scenario} | {r.direct} | {r.proxy} | {r.ratio} | {r.target} | "
                   f"{r.result} |")
    return "\n".join(out)
