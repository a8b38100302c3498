"""K2 Horizon (K2-v3) calls, in its `<ifm|…>` tags: a name and key/value tags, or JSON.

    <ifm|tool_calls>
    <ifm|tool_call>get_weather
    <ifm|arg_key>city</ifm|arg_key><ifm|arg_type>string</ifm|arg_type><ifm|arg_value>Paris
    </ifm|arg_value>
    </ifm|tool_call>
    </ifm|tool_calls>
    <ifm|tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</ifm|tool_call>

(SGLang's `k2_horizon`.) The optional `<ifm|arg_type>` is the model's own hint; values are
text, coerced by the tool's schema (a string keeps its whitespace, as the reference parsers
keep it); a value ends at the `</ifm|arg_value>` the frame's structure shows to be its own
(see text_values). The section's tags go with its first and last call; a call quoted inside
another's value is that value's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import json_frames
from ..framing.pair import PairGrammar, pair_frames
from ..framing.steps import outermost
from ..opener_patterns import literals
from ..scan import Document
from ..text_values import ValueTags, stray_tags
from ..types import Frame
from .spec import FormatSpec

NAME = "k2_horizon"
_OPEN = "<ifm|tool_call>"
MARKERS = (_OPEN,)
_KEY = re.compile(r"\s*+<ifm\|arg_key>([^<>]{1,200}+)</ifm\|arg_key>\s*+"
                  r"(?:<ifm\|arg_type>[^<>]{0,64}+</ifm\|arg_type>\s*+)?<ifm\|arg_value>")
_GRAMMAR = PairGrammar(
    marker=_OPEN,
    offset=0,
    head=re.compile(r"<ifm\|tool_call>\s*+([^\s<>{}\[\]\"'`]{1,200}+)"
                    r"(?=\s*+(?:<ifm\|arg_key>|</ifm\|tool_call>))"),
    key=_KEY,
    tags=ValueTags(
        tokens=re.compile(r"<(?:(ifm\|arg_value>)|/ifm\|arg_value>)"),
        next_item=_KEY,
        stray=stray_tags(("</ifm|arg_value>", "</ifm|arg_key>", "</ifm|tool_call>",
                          "</ifm|tool_calls>"), (_OPEN,)),
    ),
    close=re.compile(r"\s*+</ifm\|tool_call>"),
    section_open=re.compile(r"<ifm\|tool_calls>\s*+\Z"),
    section_close=re.compile(r"\s*+</ifm\|tool_calls>"),
)
_JSON_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+"|\[\s*+\{))')
_JSON_CLOSE = re.compile(r"\s*+</ifm\|tool_call>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<ifm|tool_call>` call: key/value tags, then JSON payloads."""
    yield from outermost(pair_frames(doc, NAME, _GRAMMAR),
                         json_frames(doc, NAME, _JSON_OPENER, _OPEN, close=_JSON_CLOSE,
                                     listed=True))


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<ifm|tool_call"),
    sglang=("k2_horizon",),
)
