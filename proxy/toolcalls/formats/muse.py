"""Muse Glimmer calls: ATEM invokes in a message addressed to the tool.

    <|start|>assistant to=get_weather<|message|><atem:function_calls>
    <atem:invoke name="get_weather">
    <atem:parameter name="city">Paris</atem:parameter>
    </atem:invoke>
    </atem:function_calls><|eom|>

(SGLang's `muse`, vLLM's `muse_glimmer`.) Values are text, coerced by the tool's schema; a
string is kept as written (the reference parsers keep it). The message's header and its
`<|eom|>` go with the call. The turn is a run of messages, each with its recipient: a
message `to=self` is the model's reasoning, one `to=user` (or with no recipient) the answer,
and an invoke written inside either is text, never a call (vLLM's parser selects the tool
messages' bodies for the same reason). A header counts where a message can start: at the
start of the text (the template wrote `<|start|>assistant`, the model goes on with
` to=self<|message|>`), after another message's end token, or led by `<|start|>assistant`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from ..framing.invoke import invoke_frames, invoke_grammar
from ..opener_patterns import SPACE, Opener, lit, literals, opt, run, seq
from ..prose.markup import edges, holds
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "muse"
_GRAMMAR = invoke_grammar("atem:", "<atem:function_calls>", "</atem:function_calls>",
                          exact=True)
MARKERS = (_GRAMMAR.invoke_open,)
_HEADER = re.compile(r"(?:<\|start\|>assistant)?[ \t]*+to=[^\s<>]{1,200}+<\|message\|>\s*+\Z")
_EOM = re.compile(r"\s*+<\|(?:eom|eot)\|>")


# A message's header where one can start (see the module's docstring): the recipient is
# group 1 (none: the answer).
_MESSAGE = re.compile(r"(?:<\|start\|>[ \t]*+assistant)?[ \t]*+(?:to=([A-Za-z0-9_.\-]{1,200}+))?"
                      r"[ \t]*+<\|message\|>")
_MESSAGE_END = re.compile(r"<\|(?:eom|eot|end)\|>")
_NOT_TOOLS = frozenset({"self", "user"})


def _message_starts_at(text: str, header: re.Match[str]) -> bool:
    """Whether `header` stands where a message can start."""
    before = text[:header.start()].rstrip()
    return (not before or _MESSAGE_END.search(before, max(0, len(before) - 8)) is not None
            or text.startswith("<|start|>", header.start()))


def _recipient_around(text: str, pos: int) -> str | None:
    """The recipient of the message whose body holds `pos` ("" for the answer's), or None
    when no message holds it."""
    header_end = text.rfind("<|message|>", 0, pos)
    if header_end < 0 or _MESSAGE_END.search(text, header_end, pos) is not None:
        return None
    low = max(0, header_end - 240)
    header = None
    for found in _MESSAGE.finditer(text, low, header_end + len("<|message|>")):
        header = found
    if header is None or header.end() != header_end + len("<|message|>") or not (
            _message_starts_at(text, header)):
        return None
    return header[1] or ""


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<atem:invoke>` inside an `<atem:function_calls>` block, with its message's
    header before the block and its end token after it; one written inside the reasoning's
    or the answer's message stays text."""
    text = doc.text
    for frame in invoke_frames(doc, NAME, _GRAMMAR):
        header = _HEADER.search(text, max(0, frame.start - 240), frame.start)
        eom = _EOM.match(text, frame.end) if frame.closed else None
        framed = replace(frame, start=frame.start if header is None else header.start(),
                         end=frame.end if eom is None else eom.end())
        recipient = _recipient_around(text, frame.start)
        if recipient in _NOT_TOOLS or (recipient == "" and header is None):
            framed = replace(framed, refused="in_reasoning" if recipient == "self"
                             else "in_answer")
        yield framed


def content_markup(text: str, frames: Sequence[tuple[int, int]],
                   ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Around the taken `frames`: the other messages' headers and end tokens (markup), and
    the text of the messages `to=self` (reasoning); the answer's text stays."""
    gaps = list(zip([0, *(end for _, end in frames)], [*(start for start, _ in frames),
                                                       len(text)], strict=True))
    markup: list[tuple[int, int]] = []
    reasoning: list[tuple[int, int]] = []
    for low, high in gaps:
        pos = low
        while (header := _MESSAGE.search(text, pos, high)) is not None:
            if not _message_starts_at(text, header):
                pos = header.end()
                continue
            markup.append(header.span())
            end = _MESSAGE_END.search(text, header.end(), high)
            next_header = _MESSAGE.search(text, header.end(), high)
            stop = end.start() if end is not None else high
            if next_header is not None and next_header.start() < stop and (
                    text.startswith("<|start|>", next_header.start())):
                stop, end = next_header.start(), None
            if header[1] == "self":
                reasoning.append((header.end(), stop))
            if end is not None:
                markup.append(end.span())
                pos = end.end()
            else:
                pos = stop
            if pos <= header.start():
                break
    return markup, reasoning


# A plain answer in its message: `<|start|>assistant<|message|>…<|eot|>` (a recipient `to=user`
# allowed in the header), the end token alone when the template wrote the header.
_ANSWER_HEADER = re.compile(r"\s*+(?:<\|start\|>assistant)?[ \t]*+(?:to=user[ \t]*+)?"
                            r"<\|message\|>")
_ANSWER_END = re.compile(r"<\|(?:eot|eom|end)\|>\s*+\Z")
# What every piece of markup `answer_markup` looks for holds (none in a plain answer).
_MARKUP_NEEDLE = '<'


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The messages' headers and end tokens, and the reasoning's text (`to=self`); without
    a header, the end token at the end of the answer (the template wrote the header)."""
    if _MARKUP_NEEDLE not in text:  # (every token holds it)
        return [], []
    if holds(text, "<|message|>"):
        markup, reasoning = content_markup(text, [])
        if markup:
            return markup, reasoning
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
    aliases=("muse_glimmer",),
    content_markup=content_markup,
    answer_markup=answer_markup,
)
