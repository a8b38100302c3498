"""Kimi K2 calls, between section markers.

    <|tool_calls_section_begin|>
    <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}<|tool_call_end|>
    <|tool_calls_section_end|>

The call id is `functions.NAME:INDEX` (the prefix and index are sometimes missing). The
section markers around the calls are taken with the first and last call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..scan import Document
from ..types import Frame

NAME = "kimi_k2"
_OPEN = "<|tool_call_begin|>"
MARKERS = (_OPEN,)
_HEAD = re.compile(r"<\|tool_call_begin\|>\s*+(?:functions\.)?([^\s<>:{}\[\]`]{1,200}+)"
                   r"(?::\d{1,6})?\s*+<\|tool_call_argument_begin\|>\s*+(?=[{\[])")
_CALL_END = re.compile(r"\s*+<\|tool_call_end\|>")
_SECTION_BEGIN = re.compile(r"<\|tool_calls_section_begin\|>\s*+\Z")
_SECTION_END = re.compile(r"\s*+<\|tool_calls_section_end\|>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tool_call_begin|>` call with its JSON arguments."""
    text = doc.text
    cursor = 0
    for match in doc.finditer(_HEAD, _OPEN):
        start = match.start()
        if start < cursor:
            continue
        section = _SECTION_BEGIN.search(text, max(cursor, start - 40), start)
        if section is not None:
            start = section.start()
        body = match.end()
        end = doc.json_end(body)
        if end is None:
            following = text.find(_OPEN, body)
            stop = len(text) if following < 0 else following
            yield Frame(NAME, start, stop, closed=False, complete=False, name=match[1])
            cursor = stop
            continue
        pos = end
        call_end = _CALL_END.match(text, pos)
        after = doc.skip_space(pos)
        if call_end is not None:
            pos, closed, repairs = call_end.end(), True, ()
        elif (after >= len(text) or text.startswith(_OPEN, after)
              or _SECTION_END.match(text, pos)):
            closed, repairs = False, ("missing_close_tag",)
        else:
            continue  # something else after the arguments: not a frame we read
        section_end = _SECTION_END.match(text, pos)
        if section_end is not None:
            pos = section_end.end()
        yield Frame(NAME, start, pos, closed=closed, name=match[1], json_text=text[body:end],
                    repairs=repairs)
        cursor = pos
