"""IBM Granite 3.x calls: `<|tool_call|>[{"name": ..., "arguments": {...}}, ...]`.

The format has no closing marker: the complete JSON array ends the frame.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import json_frame
from ..scan import Document
from ..types import Frame

NAME = "granite"
_OPEN = "<|tool_call|>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["}]|\[\s*+[{\]]))')


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tool_call|>` followed by a JSON array of calls (or a single call object)."""
    cursor = 0
    for match in doc.finditer(_OPENER, _OPEN):
        if match.start() < cursor:
            continue
        frame = json_frame(doc, NAME, match.start(), doc.skip_space(match.end()), close=None,
                           opener=_OPEN, listed=True)
        if frame is not None:
            yield frame
            cursor = frame.end
