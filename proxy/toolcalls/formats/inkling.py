"""Inkling calls: a JSON `{"name", "args"}` message addressed to the model's tool channel.

    <|message_model|>get_weather<|content_invoke_tool_json|>{"name": "get_weather",
    "args": {"city": "Paris"}}<|end_message|>

(vLLM's and SGLang's `inkling`.) The header's name, when written, must be the payload's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from typing import Any

from ..framing.json_payload import json_frame, reshaped
from ..framing.steps import OpenerMatches
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "inkling"
_OPEN = "<|content_invoke_tool_json|>"
MARKERS = (_OPEN[1:],)  # not `<`-anchored: the group every text is searched for
_OPENER = re.compile(re.escape(_OPEN) + r'\s*+(?=\{\s*+")')
_CLOSE = re.compile(r"\s*+<\|end_message\|>")
_HEADER = re.compile(r"<\|message_model\|>\s*+([^\s<>]{1,200}+)\s*+\Z")


def _call(value: Any, header: re.Match[str] | None) -> dict[str, Any] | None:
    """`{"name", "args"}` as a call envelope (the header's name, when written, must be the
    payload's); None when it is anything else."""
    if (not isinstance(value, dict) or set(value) != {"name", "args"}
            or (header is not None and header[1] != value["name"])):
        return None
    return {"name": value["name"], "arguments": value["args"]}


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each tool message's JSON payload, with its header, to `<|end_message|>`."""
    text = doc.text
    openers = OpenerMatches(doc, _OPENER, MARKERS[0], offset=1)
    for match in openers:
        start = match.start()
        header = _HEADER.search(text, max(openers.taken_to, start - 240), start)
        frame = json_frame(doc, NAME, start if header is None else header.start(), match.end(),
                           close=_CLOSE, opener=_OPEN)
        if frame is None:
            continue
        openers.taken_to = frame.end
        yield reshaped(frame, partial(_call, header=header))


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<|message_model|>", "<|content_invoke_tool_json|>"),
    vllm=("inkling",),
    sglang=("inkling",),
    doctor_parser="inkling",
)
