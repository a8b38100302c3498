"""LongCat-Flash calls: Hermes JSON frames under LongCat's own tag.

    <longcat_tool_call>{"name": ..., "arguments": {...}}</longcat_tool_call>

(vLLM's `longcat` parser is its Hermes parser with these tags.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import Openers, json_frame
from ..scan import Document
from ..types import Frame

NAME = "longcat"
_OPEN = "<longcat_tool_call>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["\'}]|\[\s*+[{\]]))')
_CLOSE = re.compile(r"\s*+</longcat_tool_call>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<longcat_tool_call>` whose payload is JSON, to its close tag."""
    openers = Openers(doc, _OPENER, _OPEN)
    for match in openers:
        start = match.start()
        frame = json_frame(doc, NAME, start, doc.skip_space(match.end()), close=_CLOSE,
                           opener=_OPEN)
        if frame is not None:
            yield frame
            openers.taken_to = frame.end
