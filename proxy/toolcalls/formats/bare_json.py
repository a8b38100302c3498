"""Bare JSON calls: the whole content is a call object or array, or calls one per line.

Line-wise calls are taken only as the closing block of the content (prose may come before
them, never after), so a JSON example the model shows inside an explanation stays text. The
whole content may also be the envelope `{"tool_calls": [{…}, …]}` (xLAM's native shape,
llama.cpp's "Generic" format) or `{"tool_call": {…}}` (llama.cpp's Generic, one call).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..opener_patterns import CALL_LIST, CALL_OBJECT
from ..repair import NotJson, loads_repaired
from ..repair.envelope import answer_text
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "bare_json"
MARKERS = ()  # none: recognised by shape, at the start and end of the content
# What can start a JSON call or list of calls: `{"`, `{'`, `{}`, `[{`, `[]`.
_CALL_START = re.compile(r"\{\s*+[\"'}]|\[\s*+[{\]]")
_ENVELOPE = re.compile(r'\{\s*+"tool_calls?"\s*+:')
_ANSWER = re.compile(r'\{\s*+"(?:role|content|response|answer|text|output|message)"\s*+:')


def _holds_text(payload: str) -> bool:
    """An answer object whose one text field holds no JSON (see envelope.answer_text)."""
    try:
        value = loads_repaired(payload)[0]
    except NotJson:
        return False
    text = answer_text(value)
    return text is not None and not text.lstrip().startswith(("{", "[", '"'))


def _envelope(text: str, start: int, end: int) -> Frame | None:
    """The calls of a `{"tool_calls": [...]}` or `{"tool_call": {...}}` envelope; None when
    the object is anything else."""
    try:
        value, repairs = loads_repaired(text[start:end])
    except NotJson:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((key, calls),) = value.items()
    if key == "tool_calls" and isinstance(calls, list):
        return Frame(NAME, start, end, value=calls, listed=True, repairs=repairs)
    if key == "tool_call" and isinstance(calls, dict):
        return Frame(NAME, start, end, value=calls, repairs=repairs)
    return None


def find_frames(doc: Document) -> Iterator[Frame]:
    """The whole content as one JSON value, else the trailing block of JSON lines."""
    text = doc.text
    first = doc.skip_space(0)
    if _CALL_START.match(text, first):
        end = doc.json_end(first)
        if end is not None and doc.skip_space(end) == len(text):
            if _ANSWER.match(text, first) and _holds_text(text[first:end]):
                return  # an answer object holding prose (or a call expression: improvised's)
            envelope = _envelope(text, first, end) if _ENVELOPE.match(text, first) else None
            yield envelope or Frame(NAME, first, end, json_text=text[first:end])
            return
    frames: list[Frame] = []
    line_end = len(text)
    while line_end > 0:  # lines from the last one up, without splitting the whole text
        line_start = text.rfind("\n", 0, line_end) + 1
        opening = doc.skip_space(line_start, line_end)
        if opening >= line_end:  # a blank line: skip it and every blank line above it at once
            line_end = doc.space_before(line_start)
            continue
        closing = len(text[line_start:line_end].rstrip()) + line_start
        if text[opening] != "{" or not doc.spend() or doc.json_end(opening) != closing:
            break  # prose: the block of calls ends here
        frames.append(Frame(NAME, opening, closing, json_text=text[opening:closing]))
        line_end = line_start - 1
    yield from reversed(frames)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(CALL_OBJECT, CALL_LIST),
    vllm=("xlam",),
    llama_cpp=("Generic",),
    aliases=("generic",),
    doctor_parser="llama3_json",
)
