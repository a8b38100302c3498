"""GigaChat 3 / 3.1 / 3.5 calls.

    <|message_sep|>                                                            (GigaChat3)

    function call<|role_sep|>
    {"name": ..., "arguments": {...}}
    <|function_call|>{"name": ..., "arguments": {...}}                         (GigaChat 3.1)
    <｜GCML｜tool_calls><｜GCML｜invoke name="N">                            (GigaChat 3.5)
    <｜GCML｜parameter name="K" string="true">V</｜GCML｜parameter>
    </｜GCML｜invoke></｜GCML｜tool_calls>

(vLLM's `gigachat3` reads the first two, the `gigachat35` parsers the third.) The
JSON call has no closing marker: the complete object ends the frame, with the `</s>` after it
when written. GCML is DeepSeek's DSML grammar under GigaChat's own bar; its text values are
coerced by the tool's schema, a string kept as written (as vLLM's `gigachat35` reads it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from ..framing.invoke import invoke_frames, invoke_grammar
from ..framing.json_payload import json_frame
from ..framing.steps import OpenerMatches, outermost
from ..opener_patterns import SPACE, Opener, literals, seq
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "gigachat"
_HEADER = "function call<|role_sep|>"
_TOKEN = "<|function_call|>"
_GCML = invoke_grammar("｜GCML｜", "<｜GCML｜tool_calls>", "</｜GCML｜tool_calls>", exact=True,
                       json_body=True)
MARKERS = (_HEADER[14:], _TOKEN[1:], _GCML.invoke_open)  # not `<`-anchored (see hermes)
_OPENERS = ((re.compile(r"function call<\|role_sep\|>\s*+(?=\{)"), _HEADER[14:], 14),
            (re.compile(r"<\|function_call\|>\s*+(?=\{)"), _TOKEN[1:], 1))
_MESSAGE_SEP = re.compile(r"<\|message_sep\|>\s*+\Z")
_EOS = re.compile(r"\s*+</s>")


def _json_calls(doc: Document) -> Iterator[Frame]:
    text = doc.text
    for pattern, marker, offset in _OPENERS:
        openers = OpenerMatches(doc, pattern, marker, offset=offset)
        for match in openers:
            start = match.start()
            if offset > 1:  # the role header: its message separator goes with it
                separator = _MESSAGE_SEP.search(text, max(openers.taken_to, start - 40), start)
                start = start if separator is None else separator.start()
            frame = json_frame(doc, NAME, start, match.end(), close=None, opener=_TOKEN)
            if frame is None:
                continue
            eos = _EOS.match(text, frame.end) if frame.complete else None
            if eos is not None:
                frame = replace(frame, end=eos.end())
            yield frame
            openers.taken_to = frame.end


def find_frames(doc: Document) -> Iterator[Frame]:
    """The JSON calls after GigaChat's function-call header or token, and GCML invokes (a
    call of one kind quoted in a value of the other is that value's text)."""
    gcml = invoke_frames(doc, NAME, _GCML) if doc.has(_GCML.invoke_open) else iter(())
    yield from outermost(_json_calls(doc), gcml)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(*literals("<|message_sep|>", "<|function_call|>", "<｜GCML｜"),
             Opener(seq("function call", SPACE, "<|role_sep|>"))),
    vllm=("gigachat3",),
    sglang=("gigachat3", "gigachat35"),
    llama_cpp=("GigaChat V3",),
    doctor_parser="gigachat3",
)
