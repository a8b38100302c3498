"""Muse Glimmer calls: ATEM invokes in a message addressed to the tool.

    <|start|>assistant to=get_weather<|message|><atem:function_calls>
    <atem:invoke name="get_weather">
    <atem:parameter name="city">Paris</atem:parameter>
    </atem:invoke>
    </atem:function_calls><|eom|>

(SGLang's `muse`.) Values are text, coerced by the tool's schema; a string is kept as written
(the reference parsers keep it). The message's header and
its `<|eom|>` go with the call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from ..framing import invoke_frames, invoke_grammar
from ..opener_patterns import SPACE, Opener, lit, literals, opt, run, seq
from ..prose.markup import edges
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "muse"
_GRAMMAR = invoke_grammar("atem:", "<atem:function_calls>", "</atem:function_calls>",
                          exact=True)
MARKERS = (_GRAMMAR.invoke_open,)
_HEADER = re.compile(r"(?:<\|start\|>assistant)?[ \t]*+to=[^\s<>]{1,200}+<\|message\|>\s*+\Z")
_EOM = re.compile(r"\s*+<\|(?:eom|eot)\|>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<atem:invoke>` inside an `<atem:function_calls>` block, with its message's
    header before the block and its end token after it."""
    text = doc.text
    for frame in invoke_frames(doc, NAME, _GRAMMAR):
        header = _HEADER.search(text, max(0, frame.start - 240), frame.start)
        eom = _EOM.match(text, frame.end) if frame.closed else None
        yield replace(frame, start=frame.start if header is None else header.start(),
                      end=frame.end if eom is None else eom.end())


# A plain answer in its message: `<|start|>assistant<|message|>…<|eot|>` (a recipient `to=user`
# allowed in the header), the end token alone when the template wrote the header.
_ANSWER_HEADER = re.compile(r"\s*+(?:<\|start\|>assistant)?[ \t]*+(?:to=user[ \t]*+)?"
                            r"<\|message\|>")
_ANSWER_END = re.compile(r"<\|(?:eot|eom|end)\|>\s*+\Z")


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The message's header at the start of the answer and its end token at its end."""
    return edges(text, _ANSWER_HEADER, _ANSWER_END), []


# The header before a call (`<|start|>assistant to=NAME`), which belongs to its frame.
_HEADER_TO = opt(seq(opt(seq("<|start|>assistant", run(r"[ \t]", 0, 64))), "to=",
                     run(r"[^\s<>]", 1, 200)))


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(Opener(lit("<|message|>"), lead=_HEADER_TO),
             Opener(lit("<atem:"), lead=opt(seq(_HEADER_TO, "<|message|>", SPACE))),
             *literals("<|start|>assistant", "<|eot|>", "<|eom|>", "<|end|>")),
    sglang=("muse",),
    answer_markup=answer_markup,
)
