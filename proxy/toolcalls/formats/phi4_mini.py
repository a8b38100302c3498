"""Phi-4-mini calls: `functools[{"name": ..., "arguments": {...}}, ...]`.

The format has no closing marker: the complete JSON array ends the frame.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import json_frame
from ..framing.steps import OpenerMatches
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "phi4_mini"
_OPEN = "functools["
MARKERS = (_OPEN,)
_OPENER = re.compile(r"functools(?=\[\s*+[{\]])")  # literal first: the regex skips ahead fast


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `functools` followed by a JSON array of calls."""
    text = doc.text
    openers = OpenerMatches(doc, _OPENER, _OPEN)
    for match in openers:
        start = match.start()
        if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
            continue  # the end of another word
        frame = json_frame(doc, NAME, start, match.end(), close=None, opener=_OPEN, listed=True)
        if frame is not None:
            yield frame
            openers.taken_to = frame.end


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("functools["),
    vllm=("phi4_mini_json",),
    llama_cpp=("FireFunction v2",),
    aliases=("firefunction_v2",),
    doctor_parser="phi4_mini_json",
)
