"""MiniCPM 4.x / 5 calls: XML functions with named parameters, values written as text.

    <function name="get_weather"><param name="city">Paris</param><param name="days">3</param>
    </function>

(vLLM's and SGLang's `minicpm5`.) A value may be wrapped in `<![CDATA[…]]>` (its content is
the value, as written); any other value is trimmed, as the reference parsers read it (they
trim CDATA too). A value ends at the `</param>` the frame's structure shows to be its own
(see text_values), so that a value whose text says `</param>` or `</function>`, or quotes a
call, is read whole. The tokenizer's space marker `Ġ` (or no space at all) may stand
between `function`/`param` and `name`. Values are coerced by the tool's schema. A parameter
written twice, or a `<param>` without a name, leaves the call as text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.pair import PairGrammar, pair_frames
from ..opener_patterns import Opener, run, seq
from ..scan import Document
from ..text_values import ValueTags
from ..types import Frame
from .spec import FormatSpec

NAME = "minicpm"
MARKERS = ("<function name=", "<function\u0120name=", "<functionname=")
_NAMED = r"(?:\s++|\u0120)?name=[\"']([^\"'<>\n]{1,200}+)[\"']\s*+>"
_CDATA = re.compile(r"\s*+<!\[CDATA\[(.*)\]\]>\s*+\Z", re.DOTALL)


def _value(raw: str) -> str:
    """A parameter's text: a CDATA section's content as written, else the text trimmed."""
    cdata = _CDATA.match(raw)
    return cdata[1] if cdata is not None else raw.strip()


_KEY = re.compile(r"\s*+<param" + _NAMED)
_GRAMMAR = PairGrammar(
    marker="<function",
    offset=0,
    head=re.compile("<function" + _NAMED),
    key=_KEY,
    tags=ValueTags(
        tokens=re.compile("<(?:(param(?:[\\s\u0120]|name=))|/param>)"),
        next_item=_KEY,
        stray=re.compile("<(?:(/(?:param|function)>)|function(?:[\\s\u0120]|name=))"),
    ),
    close=re.compile(r"\s*+</function>"),
    value=_value,
)


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<function name=…>` block of `<param>`s, to its `</function>`."""
    yield from pair_frames(doc, NAME, _GRAMMAR)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(Opener(seq("<function", run(r"[\sĠ]", 0, 8), "name=")),),
    vllm=("minicpm5",),
    sglang=("minicpm5",),
    doctor_parser="minicpm5",
)
