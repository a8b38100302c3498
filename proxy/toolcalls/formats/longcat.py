"""LongCat-Flash calls: Hermes JSON frames under LongCat's own tag.

    <longcat_tool_call>{"name": ..., "arguments": {...}}</longcat_tool_call>

(vLLM's `longcat` parser is its Hermes parser with these tags.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import json_frame
from ..scan import Document
from ..types import Frame

NAME = "longcat"
_OPEN = "<longcat_tool_call>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["\'}]|\[\s*+[{\]]))')
_CLOSE = re.compile(r"\s*+</longcat_tool_call>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<longcat_tool_call>` whose payload is JSON, to its close tag."""
    text = doc.text
    cursor = 0
    for match in doc.finditer(_OPENER, _OPEN):
        start = match.start()
        if start < cursor or (start > 0 and text[start - 1] == "`"):
            continue  # inside the previous frame, or an inline-code mention
        frame = json_frame(doc, NAME, start, doc.skip_space(match.end()), close=_CLOSE,
                           opener=_OPEN)
        if frame is not None:
            yield frame
            cursor = frame.end
