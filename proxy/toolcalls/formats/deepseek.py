"""DeepSeek V3 / R1 and V3.1 calls, written with full-width special tokens.

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {...}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>                                 (V3, R1)
    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>…  (V3.1)

The tokens are also accepted with ASCII `|` and `_`, as some quantised builds and detokenisers
write them. The section markers around the calls are taken with the first and last call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..scan import Document
from ..types import Frame

NAME = "deepseek"
MARKERS = ("tool▁call▁begin", "tool_call_begin")


def _token(words: str) -> str:
    return "<[｜|]" + "[▁_]".join(words.split()) + "[｜|]>"


_MARK = re.compile(_token("tool call begin"))
_SEP = _token("tool sep")
_NAME = r"([^\s<>｜|{}\[\]`]{1,200}+)"
_HEAD = re.compile(
    _token("tool call begin")
    + r"\s*+(?:function\s*+" + _SEP + r"\s*+" + _NAME + r"\s*+```(?:json)?[ \t]*+\n?"  # V3
    + r"|" + _NAME + r"\s*+" + _SEP + r")\s*+(?=[{\[])"  # V3.1
)
_FENCE_END = re.compile(r"\s*+```")
_CALL_END = re.compile(r"\s*+" + _token("tool call end"))
_SECTION_BEGIN = re.compile(_token("tool calls begin") + r"\s*+\Z")
_SECTION_END = re.compile(r"\s*+" + _token("tool calls end"))


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `tool▁call▁begin … tool▁call▁end` call with its JSON arguments."""
    text = doc.text
    cursor = 0
    for match in doc.finditer(_HEAD, MARKERS, offset=2):  # after `<｜` or `<|`
        start = match.start()
        if start < cursor:
            continue
        section = _SECTION_BEGIN.search(text, max(cursor, start - 40), start)
        if section is not None:
            start = section.start()
        name = match[1] or match[2]
        body = match.end()
        end = doc.json_end(body)
        if end is None:
            following = _MARK.search(text, body)
            stop = len(text) if following is None else following.start()
            yield Frame(NAME, start, stop, closed=False, complete=False, name=name)
            cursor = stop
            continue
        pos = end
        if match[1] is not None:  # V3: the JSON sits in a code fence
            fence = _FENCE_END.match(text, pos)
            if fence is None:
                continue
            pos = fence.end()
        call_end = _CALL_END.match(text, pos)
        if call_end is not None:
            pos, closed, repairs = call_end.end(), True, ()
        elif (doc.skip_space(pos) >= len(text) or _MARK.match(text, doc.skip_space(pos))
              or _SECTION_END.match(text, pos)):
            closed, repairs = False, ("missing_close_tag",)
        else:
            continue  # something else after the arguments: not a frame we read
        section_end = _SECTION_END.match(text, pos)
        if section_end is not None:
            pos = section_end.end()
        yield Frame(NAME, start, pos, closed=closed, name=name, json_text=text[body:end],
                    repairs=repairs)
        cursor = pos
