"""dots.llm calls: XML invokes inside a `<dots_function_call>` block, or a JSON call there.

    <dots_function_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    </invoke>
    </dots_function_call>

(SGLang's `dots`.) Values are text, coerced by the tool's schema; the reference parsers trim
them, so only the newline a template writes on each side of a value is dropped (as for
MiniMax-M2). A block holding one JSON `{"name", "arguments"}` object is read too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.invoke import invoke_frames, invoke_grammar
from ..framing.json_payload import json_frames
from ..framing.steps import outermost
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "dots"
_OPEN = "<dots_function_call>"
_GRAMMAR = invoke_grammar("", _OPEN, "</dots_function_call>")
MARKERS = (_OPEN,)
_JSON_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+\{\s*+")')
_JSON_CLOSE = re.compile(r"\s*+</dots_function_call>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<invoke>` inside a `<dots_function_call>` block, and the JSON blocks."""
    yield from outermost(invoke_frames(doc, NAME, _GRAMMAR),
                         json_frames(doc, NAME, _JSON_OPENER, _OPEN, close=_JSON_CLOSE))


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<dots_function_call>"),
    sglang=("dots",),
)
