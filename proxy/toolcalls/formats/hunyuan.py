"""Tencent Hunyuan 3 (Hy3) and 4 calls: a name and key/value tags, in a `<tool_calls>` section.

    <tool_calls>
    <tool_call>get_weather<tool_sep>
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>
    </tool_calls>

(vLLM's `hy_v3`, SGLang's `hunyuan`.) Hunyuan 4 (vLLM's `hy_v4`) writes no `<tool_sep>`: the
name runs up to the first `<arg_key>` or the call's close. The tokenizers write every tag with a
per-checkpoint suffix (`<tool_call:opensource>`, `</arg_value:6124c78e>`), read the same. A call
without parameters is `<tool_call>NAME<tool_sep></tool_call>` (`<tool_call>NAME</tool_call>` in
Hunyuan 4); values are text, coerced by the tool's schema (`3` for an integer, `5.5` for a
number, as both parsers type them) and keep their whitespace (vLLM's parsers keep it). An
unsuffixed Hunyuan 4 call outside its section is GLM's spelling, which `glm` reads. A value
ends at the `</arg_value>` the frame's structure shows to be its own (see text_values), so that
a value whose text says `</arg_value>`, `<tool_call>` or `</tool_call>` is read whole.

The text around a section is kept as written and joined (`text_joined`): vLLM's `hy_v3` and
`hy_v4` answer the text before `<tool_calls>` as written (`model_output[:s_index]`), SGLang's
`hunyuan` streams the text after `</tool_calls>` as written too (`I'll check.\n<section>\nDone.`
gives `I'll check.\n\nDone.`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.pair import PairGrammar, pair_frames
from ..opener_patterns import literals
from ..scan import Document
from ..text_values import ValueTags
from ..types import Frame
from .spec import FormatSpec

NAME = "hunyuan"
_SUFFIX = r"(?::[\w.\-]{1,40}+)?"
# In every call: Hunyuan 3's separator, or Hunyuan 4's suffixed tags or its section (the calls
# open with `<tool_call`, as Hermes').
MARKERS = ("<tool_sep", "<tool_call:", "<tool_calls>")
_KEY = re.compile(r"\s*+<arg_key" + _SUFFIX + r">([^<>]{1,200}+)</arg_key" + _SUFFIX
                  + r">\s*+<arg_value" + _SUFFIX + ">")
_GRAMMAR = PairGrammar(
    marker="<tool_call",
    offset=0,
    head=re.compile("<tool_call" + _SUFFIX + r">\s*+([^\s<>{}\[\]\"'`]{1,200}+)\s*+(?:<tool_sep"
                    + _SUFFIX + ">|(?=<(?:arg_key|/tool_call)" + _SUFFIX + ">))"),
    key=_KEY,
    tags=ValueTags(
        tokens=re.compile("<(?:(arg_value" + _SUFFIX + ">)|/arg_value" + _SUFFIX + ">)"),
        next_item=_KEY,
        stray=re.compile("<(?:(/(?:arg_value|arg_key|tool_calls?)" + _SUFFIX + ">)|tool_call)"),
    ),
    close=re.compile(r"\s*+</tool_call" + _SUFFIX + ">"),
    section_open=re.compile("<tool_calls" + _SUFFIX + r">\s*+\Z"),
    section_close=re.compile(r"\s*+</tool_calls" + _SUFFIX + ">"),
)


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<tool_call>NAME<tool_sep>` call with its key/value tags."""
    yield from pair_frames(doc, NAME, _GRAMMAR)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<tool_call"),
    vllm=("hy_v3",),
    aliases=("hy_v4",),
    sglang=("hunyuan",),
    text_joined=True,
    doctor_parser="hy_v3",
)
