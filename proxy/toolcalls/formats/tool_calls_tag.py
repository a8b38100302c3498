"""Calls in `<tool_calls>…</tool_calls>`: a JSON array of calls, or call objects one per line.

    <tool_calls>[{"name": ..., "arguments": {...}}]</tool_calls>          (Jamba, Hunyuan-A13B)
    <tool_calls>
    {"name": ..., "arguments": {...}}
    {"name": ..., "arguments": {...}}
    </tool_calls>                                                           (MiniMax-M1)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import Openers, ends_or_opens, joined, json_run, next_or_end
from ..scan import Document
from ..types import Frame

NAME = "tool_calls_tag"
_OPEN = "<tool_calls>"
MARKERS = (_OPEN,)
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["}]|\[\s*+[{\]]))')
_CLOSE = re.compile(r"\s*+</tool_calls>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<tool_calls>` block holding JSON calls, to its close (or to the end of the text)."""
    text = doc.text
    openers = Openers(doc, _OPENER, _OPEN)
    for match in openers:
        start = match.start()
        spans, stop, unbalanced = json_run(doc, match.end())
        if unbalanced or not spans:
            end = next_or_end(text, _OPEN, match.end())
            yield Frame(NAME, start, end, closed=False, complete=False,
                        json_text=text[match.end():end], listed=True)
            openers.taken_to = end
            continue
        close = _CLOSE.match(text, stop)
        if close is not None:
            frame = Frame(NAME, start, close.end(), json_text=joined(text, spans), listed=True)
        elif ends_or_opens(doc, stop, _OPEN):
            frame = Frame(NAME, start, stop, closed=False, json_text=joined(text, spans),
                          listed=True, repairs=("missing_close_tag",))
        else:
            continue  # something else inside the block: not ours to read; it stays text
        yield frame
        openers.taken_to = frame.end
