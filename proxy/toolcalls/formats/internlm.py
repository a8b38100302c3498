"""InternLM 2 / 2.5 calls.

    <|action_start|><|plugin|>{"name": ..., "parameters": {...}}<|action_end|>
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import json_frame
from ..scan import Document
from ..types import Frame

NAME = "internlm"
_OPEN = "<|action_start|>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r"\s*+<\|plugin\|>(?=\s*+\{\s*+[\"}])")
_CLOSE = re.compile(r"\s*+<\|action_end\|>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each plugin action whose payload is one JSON call; `parameters` is the native key."""
    cursor = 0
    for match in doc.finditer(_OPENER, _OPEN):
        if match.start() < cursor:
            continue
        frame = json_frame(doc, NAME, match.start(), doc.skip_space(match.end()), close=_CLOSE,
                           opener=_OPEN, arguments_key="parameters")
        if frame is not None:
            yield frame
            cursor = frame.end
