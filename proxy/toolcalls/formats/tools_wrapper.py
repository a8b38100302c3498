"""Calls wrapped in `<tools>…</tools>`: one or more JSON call objects, or an array of them."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..scan import Document
from ..types import Frame

NAME = "tools_wrapper"
_OPEN = "<tools>"
_CLOSE = "</tools>"
MARKERS = (_OPEN,)
# Only openers followed by something that can start a JSON call (`{"`, `{}`, `[{`, `[]`), so
# that a megabyte of `<tool_call>{<tool_call>{…` is skipped at regex speed.
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["}]|\[\s*+[{\]]))')


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<tools>` block whose body is a sequence of JSON values (comma or space separated)."""
    text = doc.text
    cursor = 0
    for match in doc.finditer(_OPENER, _OPEN):
        start = match.start()
        if start < cursor or (start > 0 and text[start - 1] == "`"):
            continue
        values: list[str] = []
        pos = doc.skip_space(match.end())
        while pos < len(text) and text[pos] in "{[":
            end = doc.json_end(pos)
            if end is None:
                break
            values.append(text[pos:end])
            pos = doc.skip_space(end)
            if text.startswith(",", pos):
                pos = doc.skip_space(pos + 1)
        if not values:
            continue
        if text.startswith(_CLOSE, pos):
            closed, end = True, pos + len(_CLOSE)
        elif pos >= len(text):
            closed, end = False, pos
        else:
            continue  # something other than JSON inside the wrapper: not ours to read
        payload = values[0] if len(values) == 1 else "[" + ",".join(values) + "]"
        repairs = () if closed else ("missing_close_tag",)
        yield Frame(NAME, start, end, closed=closed, json_text=payload, repairs=repairs)
        cursor = end
