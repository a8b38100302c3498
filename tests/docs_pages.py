"""Reading the documentation as the tests check it against the code: README.md and the pages
of docs/, their sections (by heading) and their tables (by header row)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
HEADING = re.compile(r"^(#{1,6}) +(.+?) *#* *$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
# A table cell boundary: a `|` not escaped as `\|` (inside code spans the tables escape theirs).
CELL = re.compile(r"(?<!\\)\|")


def markdown_files() -> list[Path]:
    """README.md and every page under docs/."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def page(name: str) -> str:
    """The text of a docs page, by its path under docs/ (`formats.md`, `clients/codex.md`)."""
    return (DOCS / name).read_text(encoding="utf-8")


def lines_outside_fences(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line not inside a fenced code block."""
    out, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match and (fence is None or match.group(1) == fence):
            fence = match.group(1) if fence is None else None
            continue
        if fence is None:
            out.append((number, line))
    return out


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of each heading outside code blocks, in order."""
    found = []
    for _, line in lines_outside_fences(text):
        match = HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2)))
    return found


def section(text: str, title: str) -> str:
    """The text under the heading `title`, up to the next heading of its level or above."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = HEADING.match(line)
        if match and match.group(2) == title:
            level = len(match.group(1))
            body = []
            for following in lines[index + 1:]:
                other = HEADING.match(following)
                if other and len(other.group(1)) <= level:
                    break
                body.append(following)
            return "\n".join(body)
    raise AssertionError(f"no heading {title!r}")


def table(text: str, header: str) -> list[list[str]]:
    """The body rows of the table whose header row starts with `header`, each a list of its
    cells (stripped, `\\|` kept as written)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[index + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([cell.strip() for cell in CELL.split(row.strip()[1:-1])])
            return rows
    raise AssertionError(f"no table headed {header!r}")


def tables(text: str, header: str) -> list[list[str]]:
    """The body rows of every table whose header row starts with `header`, in order."""
    rows: list[list[str]] = []
    rest = text
    while header in rest:
        rows += table(rest, header)
        rest = rest.split(header, 1)[1]
    return rows


def code_blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of a page in `language` (```json …```), each dedented by its
    fence's indent (a block inside a list item)."""
    blocks, current, indent = [], None, 0
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if current is None:
            if stripped.startswith("```") and stripped[3:].strip() == language:
                current, indent = [], len(line) - len(stripped)
        elif stripped.startswith("```"):
            blocks.append("\n".join(current) + "\n")
            current = None
        else:
            current.append(line[indent:])
    return blocks
