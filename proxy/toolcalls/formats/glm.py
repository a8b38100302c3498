"""GLM-4.5 / 4.6 / 4.7 calls: parameters as key/value tags, values written as text.

    <tool_call>NAME
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>

Values are coerced later by the tool's schema. A call without parameters is
`<tool_call>NAME</tool_call>`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import Openers, ends_or_opens, next_or_end
from ..scan import Document
from ..types import Frame

NAME = "glm"
_OPEN = "<tool_call>"
MARKERS = (_OPEN,)
# The name, then what can follow it in a call: a key, the close tag, or the end of the text.
_OPENER = re.compile(r"<tool_call>\s*+([^\s<>{}\[\]\"'`]{1,200}+)"
                     r"(?=\s*+(?:<arg_key>|</tool_call>|\Z))")
_KEY = re.compile(r"\s*+<arg_key>([^<>]{1,200}+)</arg_key>\s*+<arg_value>")
_VALUE_CLOSE = "</arg_value>"
_CLOSE = re.compile(r"\s*+</tool_call>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<tool_call>NAME` followed by `<arg_key>`/`<arg_value>` pairs."""
    text = doc.text
    openers = Openers(doc, _OPENER, _OPEN)
    for match in openers:
        start = match.start()
        args: list[tuple[str, str]] = []
        pos = match.end()
        limit = next_or_end(text, _OPEN, pos)
        complete = True
        while (key := _KEY.match(text, pos, limit)) is not None:
            if not doc.spend():
                return  # out of budget: better no frame than one with parameters missing
            value_end = text.find(_VALUE_CLOSE, key.end(), limit)
            if value_end < 0:
                complete = False  # the value never closes: cut, or not a frame we read
                break
            args.append((key[1].strip(), text[key.end():value_end]))
            pos = value_end + len(_VALUE_CLOSE)
        if not complete:
            yield Frame(NAME, start, limit, closed=False, complete=False, name=match[1])
            openers.taken_to = limit
            continue
        close = _CLOSE.match(text, pos)
        if close is not None:
            yield Frame(NAME, start, close.end(), name=match[1], text_args=tuple(args))
            openers.taken_to = close.end()
        elif ends_or_opens(doc, pos, _OPEN):
            yield Frame(NAME, start, pos, closed=False, name=match[1], text_args=tuple(args),
                        repairs=("missing_close_tag",))
            openers.taken_to = pos
        # Anything else after the parameters: not a frame we understand; it stays text.
