"""Bare JSON calls: the whole content is a call object or array, or calls one per line.

Line-wise calls are taken only as the closing block of the content (prose may come before
them, never after), so a JSON example the model shows inside an explanation stays text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..scan import Document
from ..types import Frame

NAME = "bare_json"
MARKERS = ()  # none: recognised by shape, at the start and end of the content
# What can start a JSON call or list of calls: `{"`, `{'`, `{}`, `[{`, `[]`.
_CALL_START = re.compile(r"\{\s*+[\"'}]|\[\s*+[{\]]")


def find_frames(doc: Document) -> Iterator[Frame]:
    """The whole content as one JSON value, else the trailing block of JSON lines."""
    text = doc.text
    first = doc.skip_space(0)
    if _CALL_START.match(text, first):
        end = doc.json_end(first)
        if end is not None and doc.skip_space(end) == len(text):
            yield Frame(NAME, first, end, json_text=text[first:end])
            return
    frames: list[Frame] = []
    line_end = len(text)
    while line_end > 0:  # lines from the last one up, without splitting the whole text
        line_start = text.rfind("\n", 0, line_end) + 1
        opening = doc.skip_space(line_start, line_end)
        if opening >= line_end:  # a blank line: skip it and every blank line above it at once
            line_end = doc.space_before(line_start)
            continue
        closing = len(text[line_start:line_end].rstrip()) + line_start
        if text[opening] != "{" or not doc.spend() or doc.json_end(opening) != closing:
            break  # prose: the block of calls ends here
        frames.append(Frame(NAME, opening, closing, json_text=text[opening:closing]))
        line_end = line_start - 1
    yield from reversed(frames)
