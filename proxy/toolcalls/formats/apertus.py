"""Apertus calls: a JSON list of one-key objects, the key being the function's name.

    <|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"read": {"path": "/a"}}]<|tools_suffix|>

(vLLM's `apertus` parser; the suffix may be missing at the end of the output, and so may the
list's closing `]` when whole objects end it before the suffix or the end, as vLLM reads it:
a repair.) Each item is turned into a `{"name", "arguments"}` envelope; an item of any other
shape leaves the frame as text. A whole list (its `]` written) is a whole frame even when the
suffix token is missing, an output cut by `length` right there too: the list's close ends
the calls (`missing_close_tag`); a list missing its `]` cut so stays text (it may have gone
on).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from ..framing.json_payload import json_frame, json_run, reshaped
from ..framing.steps import OpenerMatches
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

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


def _list_without_close(doc: Document, start: int, body: int) -> Frame | None:
    """The frame of a `[` list whose `]` is missing: whole objects, separated by commas, then
    only the suffix or the end of the output (anything else: None, the frame stays as read)."""
    spans, stop, unbalanced = json_run(doc, body + 1, commas=True)
    if unbalanced or not spans or any(doc.text[a] != "{" for a, _ in spans):
        return None
    after = doc.skip_space(stop)
    if doc.text.startswith(",", after):
        after = doc.skip_space(after + 1)
    closing = _CLOSE.match(doc.text, after)
    if closing is None and after < len(doc.text):
        return None
    end = closing.end() if closing is not None else stop
    return Frame(NAME, start, end, closed=closing is not None, listed=True,
                 json_text="[" + ",".join(doc.text[a:b] for a, b in spans) + "]",
                 repairs=("missing_list_close",))


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tools_prefix|>` list, to its suffix (or to the end of the output)."""
    openers = OpenerMatches(doc, _OPENER, _OPEN)
    for match in openers:
        start = match.start()
        body = doc.skip_space(match.end())
        frame = json_frame(doc, NAME, start, body, close=_CLOSE, opener=_OPEN, listed=True)
        if frame is not None and not frame.complete and doc.text.startswith("[", body):
            frame = _list_without_close(doc, start, body) or frame
        if frame is None:
            continue
        if frame.complete and not frame.closed and "missing_list_close" not in frame.repairs:
            frame = replace(frame, closed=True)  # the JSON's own close ends the calls
        openers.taken_to = frame.end
        yield reshaped(frame, _envelopes)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<|tools_prefix|>"),
    vllm=("apertus",),
    sglang=("apertus2509",),
    llama_cpp=("Apertus",),
    doctor_parser="apertus",
)
