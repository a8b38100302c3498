"""InternLM 2 / 2.5 calls.

    <|action_start|><|plugin|>{"name": ..., "parameters": {...}}<|action_end|>
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import json_frames
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "internlm"
_OPEN = "<|action_start|>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r"\s*+<\|plugin\|>(?=\s*+\{\s*+[\"}])")
_CLOSE = re.compile(r"\s*+<\|action_end\|>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each plugin action whose payload is one JSON call; `parameters` is the native key."""
    yield from json_frames(doc, NAME, _OPENER, _OPEN, close=_CLOSE, keep_backticked=True,
                           arguments_key="parameters")


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<|action_start|>"),
    vllm=("internlm",),
    sglang=("interns1",),
    doctor_parser="internlm",
)
