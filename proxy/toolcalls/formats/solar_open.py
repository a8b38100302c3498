"""Upstage Solar Open calls, in Solar's `<|tool_call:…|>` tokens.

    <|tool_calls|><|tool_call:begin|>0<|tool_call:name|>get_weather
    <|tool_call:args|>{"city": "Paris"}<|tool_call:end|><|calls|>                (Solar Open)
    <|tool_call:start|>get_weather
    <|tool_arg:start|>city<|tool_arg:value|>Paris<|tool_arg:end|>
    <|tool_call:end|>                                                          (Solar Open 2)

(llama.cpp's "Solar Open", vLLM's `solar_open2`.) Solar Open's arguments are JSON after an id
and the name; Solar Open 2 writes the name on the start line and each argument as a key and
a text value, coerced by the tool's schema (a string keeps its whitespace, as vLLM's parser
keeps it). A value ends at the `<|tool_arg:end|>` the frame's structure shows to be its own
(see text_values); a call quoted inside another's value is that value's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import json_frame
from ..framing.pair import PairGrammar, pair_frames
from ..framing.steps import OpenerMatches, outermost
from ..opener_patterns import literals
from ..scan import Document
from ..text_values import ValueTags, stray_tags
from ..types import Frame
from .spec import FormatSpec

NAME = "solar_open"
_BEGIN = "<|tool_call:begin|>"
_START = "<|tool_call:start|>"
MARKERS = ("|tool_call:",)  # not `<`-anchored: the group every text is searched for
_HEAD = re.compile(r"<\|tool_call:begin\|>[^<>\n]{0,64}+<\|tool_call:name\|>\s*+"
                   r"([^\s<>{}\[\]`]{1,200}+)\s*+<\|tool_call:args\|>\s*+(?=\{)")
_END = re.compile(r"\s*+<\|tool_call:end\|>")
_SECTION_OPEN = re.compile(r"<\|tool_calls\|>\s*+\Z")
_SECTION_CLOSE = re.compile(r"\s*+<\|calls\|>")
_ARGUMENT = re.compile(r"\s*+<\|tool_arg:start\|>([^<>\n]{1,200}+)<\|tool_arg:value\|>")
_ARGUMENTS = PairGrammar(
    marker=_START[1:],
    offset=1,
    head=re.compile(r"<\|tool_call:start\|>[ \t]*+([^\s<>{}\[\]`]{1,200}+)[ \t]*+"
                    r"(?=\n|<\|tool_arg:start\|>|<\|tool_call:end\|>)"),
    key=_ARGUMENT,
    tags=ValueTags(
        tokens=re.compile(r"<(?:(\|tool_arg:start\|>)|\|tool_arg:end\|>)"),
        next_item=_ARGUMENT,
        stray=stray_tags(("<|tool_arg:end|>", "<|tool_call:end|>", "<|calls|>"),
                         (_START, _BEGIN)),
    ),
    close=re.compile(r"\s*+<\|tool_call:end\|>"),
)


def _json_calls(doc: Document) -> Iterator[Frame]:
    """Solar Open's calls: JSON arguments after the id and the name."""
    text = doc.text
    openers = OpenerMatches(doc, _HEAD, _BEGIN[1:], offset=1)
    for match in openers:
        start = match.start()
        section = _SECTION_OPEN.search(text, max(openers.taken_to, start - 40), start)
        start = start if section is None else section.start()
        frame = json_frame(doc, NAME, start, match.end(), close=_END, opener=_BEGIN,
                           name=match[1])
        if frame is None:
            continue
        after = _SECTION_CLOSE.match(text, frame.end) if frame.closed else None
        if after is not None:
            frame = Frame(NAME, frame.start, after.end(), name=frame.name,
                          json_text=frame.json_text)
        yield frame
        openers.taken_to = frame.end


def find_frames(doc: Document) -> Iterator[Frame]:
    """Solar Open's JSON calls and Solar Open 2's key/value calls."""
    yield from outermost(_json_calls(doc), pair_frames(doc, NAME, _ARGUMENTS))


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<|tool_calls|>", "<|tool_call:"),
    vllm=("solar_open2",),
    llama_cpp=("Solar Open",),
    doctor_parser="solar_open2",
)
