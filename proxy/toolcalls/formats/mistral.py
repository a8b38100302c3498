"""Mistral calls, both generations.

    [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "a1b2c3d4e"}]     (v1–v3 tokenizers)
    [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[CALL_ID]a1b2c3d4e[ARGS]{...}     (v11+ tokenizers)

The format has no closing marker: the complete JSON value ends the frame.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from ..framing import json_frame
from ..scan import Document
from ..types import Frame

NAME = "mistral"
_OPEN = "[TOOL_CALLS]"
MARKERS = (_OPEN,)
_OPENER = re.compile(
    re.escape(_OPEN)
    + r"\s*+(?:(?=\{\s*+[\"}]|\[\s*+[{\]])"  # a JSON list (or object) of calls
    + r"|([A-Za-z0-9_.\-]{1,200}+)(?:\[CALL_ID\][A-Za-z0-9_\-]{1,64}+)?\[ARGS\](?=\s*+\{))"
)
_EOS = re.compile(r"\s*+</s>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `[TOOL_CALLS]` with its JSON list of calls, or its NAME[ARGS]{arguments}."""
    cursor = 0
    for match in doc.finditer(_OPENER, _OPEN):
        if match.start() < cursor:
            continue
        frame = json_frame(doc, NAME, match.start(), doc.skip_space(match.end()), close=_EOS,
                           opener=_OPEN, name=match[1], listed=match[1] is None)
        if frame is None:
            continue
        if "missing_close_tag" in frame.repairs:  # `</s>` is optional: no repair to record
            frame = replace(frame, closed=True, repairs=())
        yield frame
        cursor = frame.end
