"""IBM Granite 3.x calls: `<|tool_call|>[{"name": ..., "arguments": {...}}, ...]`.

Granite 3.0 writes the `<|tool_call|>` token; Granite 3.1 writes the string `<tool_call>`
before its list (vLLM's granite parser accepts both). The format has no closing marker: the
complete JSON array ends the frame. After `<tool_call>` only a list is Granite's (an object
there is a Hermes frame).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import json_frames
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "granite"
_OPEN = "<|tool_call|>"
_STRING_OPEN = "<tool_call>"
MARKERS = (_OPEN, _STRING_OPEN)
# Every frame opens at a match of one of the two openers below: the token, or the tag and a `[`
# (a Hermes text's `<tool_call>` holds no `[` often, and then this format is not run on it).
NEEDS = ((_OPEN,), (_STRING_OPEN, "["))
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["}]|\[\s*+[{\]]))')
_STRING_OPENER = re.compile(re.escape(_STRING_OPEN) + r"(?=\s*+\[\s*+[{\]])")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tool_call|>` (or `<tool_call>`) followed by a JSON array of calls (the
    token's scan is not set up where it does not occur: this format is tried on every
    Hermes text, for its `<tool_call>`)."""
    if doc.has(_OPEN):
        yield from json_frames(doc, NAME, _OPENER, _OPEN, close=None, listed=True)
    yield from json_frames(doc, NAME, _STRING_OPENER, _STRING_OPEN, close=None, listed=True)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS, needs=NEEDS,
    openers=literals("<|tool_call|>", "<tool_call>"),
    vllm=("granite",),
    llama_cpp=("Granite",),
    doctor_parser="granite",
)
