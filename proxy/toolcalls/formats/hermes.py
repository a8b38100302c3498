"""Hermes / Qwen JSON frames: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..scan import Document
from ..types import Frame

NAME = "hermes"
_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
MARKERS = (_OPEN,)
# Only openers followed by something that can start a JSON call (`{"`, `{'`, `{}`, `[{`, `[]`), so
# that a megabyte of `<tool_call>{<tool_call>{…` is skipped at regex speed.
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["\'}]|\[\s*+[{\]]))')


def find_frames(doc: Document) -> Iterator[Frame]:
    """Every `<tool_call>` whose payload is JSON, scanned JSON-aware to its close tag."""
    text = doc.text
    cursor = 0
    for match in doc.finditer(_OPENER, _OPEN):
        start = match.start()
        if start < cursor or (start > 0 and text[start - 1] == "`"):
            continue  # inside the previous frame, or an inline-code mention
        body = doc.skip_space(match.end())
        if body >= len(text) or text[body] not in "{[":
            continue  # not JSON: another format's frame (Qwen XML, GLM) or prose
        end = doc.json_end(body)
        if end is None:
            following = text.find(_OPEN, body)
            stop = len(text) if following < 0 else following
            yield Frame(NAME, start, stop, closed=False, complete=False, json_text=text[body:stop])
            cursor = stop
            continue
        after = doc.skip_space(end)
        if text.startswith(_CLOSE, after):
            yield Frame(NAME, start, after + len(_CLOSE), json_text=text[body:end])
            cursor = after + len(_CLOSE)
        elif after >= len(text) or text.startswith(_OPEN, after):
            yield Frame(NAME, start, end, closed=False, json_text=text[body:end],
                        repairs=("missing_close_tag",))
            cursor = end
        # Anything else after the JSON means we do not understand the frame: it stays text.
