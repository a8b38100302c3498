"""Granite-20B-FunctionCalling calls: each call object after its own `<function_call>`.

    <function_call> {"name": "get_weather", "arguments": {"city": "Tokyo"}}
    <function_call> {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}

(vLLM's `granite-20b-fc` parser.) The format has no closing tag; a `</function_call>` after
the object is taken with it. A call must begin a line (or follow the previous call), and only
space (or the next call) may follow its object on that line, so that a tag mentioned in prose
stays text; lines after it stay content.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from ..framing.json_payload import json_frame
from ..framing.steps import OpenerMatches, at_line_start
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "granite_20b_fc"
_OPEN = "<function_call>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+\{\s*+["\'}])')
_CLOSE = re.compile(r"\s*+</function_call>")
_LINE_END = re.compile(r"[ \t]*+(?:\r?\n|\Z)")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<function_call>` with its JSON call object."""
    text = doc.text
    openers = OpenerMatches(doc, _OPENER, _OPEN, keep_backticked=True)
    for match in openers:
        start = match.start()
        cursor = openers.taken_to
        if not (at_line_start(text, start) or (cursor and doc.skip_space(cursor) == start)):
            continue  # in the middle of a line of prose
        body = doc.skip_space(match.end())
        frame = json_frame(doc, NAME, start, body, close=_CLOSE, opener=_OPEN)
        if frame is None:  # more text after the object: fine on the lines after it
            end = doc.json_end(body)
            if end is None or not _LINE_END.match(text, end):
                continue  # prose on the object's own line: not a call we read
            frame = Frame(NAME, start, end, json_text=text[body:end])
        elif frame.complete and not frame.closed:
            frame = replace(frame, closed=True, repairs=())  # the format writes no close tag
        yield frame
        openers.taken_to = frame.end


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<function_call>"),
    vllm=("granite-20b-fc",),
    doctor_parser="granite-20b-fc",
)
