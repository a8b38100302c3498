"""Jamba and Hunyuan-A13B calls: `<tool_calls>[{"name": ..., "arguments": {...}}]</tool_calls>`."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import json_frame
from ..scan import Document
from ..types import Frame

NAME = "tool_calls_tag"
_OPEN = "<tool_calls>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["}]|\[\s*+[{\]]))')
_CLOSE = re.compile(r"\s*+</tool_calls>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<tool_calls>` block holding a JSON array of calls (or one call object)."""
    text = doc.text
    cursor = 0
    for match in doc.finditer(_OPENER, _OPEN):
        start = match.start()
        if start < cursor or (start > 0 and text[start - 1] == "`"):
            continue  # inside the previous frame, or an inline-code mention
        frame = json_frame(doc, NAME, start, doc.skip_space(match.end()), close=_CLOSE,
                           opener=_OPEN, listed=True)
        if frame is not None:
            yield frame
            cursor = frame.end
