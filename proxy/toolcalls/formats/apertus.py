"""Apertus calls: a JSON list of one-key objects, the key being the function's name.

    <|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"read": {"path": "/a"}}]<|tools_suffix|>

(vLLM's `apertus` parser; the suffix may be missing at the end of the output.) Each item is
turned into a `{"name", "arguments"}` envelope; an item of any other shape leaves the frame
as text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import Openers, json_frame, reshaped
from ..scan import Document
from ..types import Frame

NAME = "apertus"
_OPEN = "<|tools_prefix|>"
MARKERS = (_OPEN[1:],)  # not `<`-anchored: that group is the one every text is searched for
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\[\s*+[{\]]|\{\s*+["\'}]))')
_CLOSE = re.compile(r"\s*+<\|tools_suffix\|>")


def _envelopes(value: object) -> list[dict[str, object]] | None:
    """`[{"NAME": {args}}, …]` (or one such object) as call envelopes; None if not that."""
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            return None
        ((name, arguments),) = item.items()
        calls.append({"name": name, "arguments": arguments})
    return calls


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tools_prefix|>` list, to its suffix (or to the end of the output)."""
    openers = Openers(doc, _OPENER, _OPEN)
    for match in openers:
        start = match.start()
        frame = json_frame(doc, NAME, start, doc.skip_space(match.end()), close=_CLOSE,
                           opener=_OPEN, listed=True)
        if frame is None:
            continue
        openers.taken_to = frame.end
        yield reshaped(frame, _envelopes)
