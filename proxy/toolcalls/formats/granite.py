"""IBM Granite 3.x calls: `<|tool_call|>[{"name": ..., "arguments": {...}}, ...]`.

Granite 3.0 writes the `<|tool_call|>` token; Granite 3.1 writes the string `<tool_call>`
before its list (vLLM's granite parser accepts both). The format has no closing marker: the
complete JSON array ends the frame. After `<tool_call>` only a list is Granite's (an object
there is a Hermes frame).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import Openers, json_frame
from ..scan import Document
from ..types import Frame

NAME = "granite"
_OPEN = "<|tool_call|>"
_STRING_OPEN = "<tool_call>"
MARKERS = (_OPEN, _STRING_OPEN)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["}]|\[\s*+[{\]]))')
_STRING_OPENER = re.compile(re.escape(_STRING_OPEN) + r"(?=\s*+\[\s*+[{\]])")


def _frames(doc: Document, opener: re.Pattern[str], marker: str) -> Iterator[Frame]:
    openers = Openers(doc, opener, marker)
    for match in openers:
        start = match.start()
        frame = json_frame(doc, NAME, start, doc.skip_space(match.end()), close=None,
                           opener=marker, listed=True)
        if frame is not None:
            yield frame
            openers.taken_to = frame.end


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tool_call|>` (or `<tool_call>`) followed by a JSON array of calls."""
    yield from _frames(doc, _OPENER, _OPEN)
    yield from _frames(doc, _STRING_OPENER, _STRING_OPEN)
