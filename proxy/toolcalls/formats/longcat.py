"""LongCat-Flash calls: Hermes JSON frames under LongCat's own tag.

    <longcat_tool_call>{"name": ..., "arguments": {...}}</longcat_tool_call>

(vLLM's `longcat` parser is its Hermes parser with these tags.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import json_frames
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "longcat"
_OPEN = "<longcat_tool_call>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["\'}]|\[\s*+[{\]]))')
_CLOSE = re.compile(r"\s*+</longcat_tool_call>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<longcat_tool_call>` whose payload is JSON, to its close tag."""
    yield from json_frames(doc, NAME, _OPENER, _OPEN, close=_CLOSE)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<longcat_tool_call>"),
    vllm=("longcat",),
    doctor_parser="longcat",
    wrapper_tags=("longcat_tool_call", "longcat_tool_calls"),
)
