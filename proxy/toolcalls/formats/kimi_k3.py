"""Kimi K3 calls, in its XTML channel tokens.

    <|open|>tools<|sep|>
    <|open|>call tool="get_weather" index="1"<|sep|>
    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
    <|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>
    <|close|>call<|sep|>
    <|close|>tools<|sep|>

(vLLM's and SGLang's `kimi_k3`.) A `type="string"` argument is the text as written, up to the
`<|close|>argument<|sep|>` the frame's structure shows to be its own (see text_values); any
other type is JSON (a value that is not stays the text written, as the reference parsers
keep it). A call may instead hold one `<|open|>json type="object"<|sep|>{…}<|close|>json
<|sep|>` block of arguments. Attribute values undo the template's `&quot;`/`&amp;`. The same frame
as vLLM detokenizes it with `spaces_between_special_tokens` on (`<|open|> call tool="…"
index="1" <|sep|>`: one space between each special token and the text beside it) is read
too, as vLLM's parser reads it; a `string` value there loses the one space on each side only
when the argument's own opener and closer are spaced (the detokenizer's join puts exactly
one there; a value the model began or ended with a space keeps it), else it stays as written,
spaces and all, as vLLM keeps it. Calls are
read inside a tools section only; the section's tokens (with an empty response channel before
it, or the close of the response channel that the template opened, and the message's close
after it) go with the first and last call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson

from ..framing.steps import OpenerMatches, section_start, unsure_frame
from ..opener_patterns import literals
from ..prose.markup import SHORT_TEXT, edges
from ..scan import Document
from ..text_values import Tail, ValueTags, stray_tags, value_end
from ..types import Frame
from .spec import FormatSpec

NAME = "kimi_k3"
_SEP = "<|sep|>"
# not `<`-anchored: that group is the one every text is searched for
MARKERS = ("|open|>call", "|open|> call")
# ` ?`: the one space vLLM's detokenizer puts beside a special token when
# `spaces_between_special_tokens` is on (never more: a second is the model's own).
_CALL = re.compile(r'<\|open\|> ?call\s++([^<>]{0,400}?)<\|sep\|>')
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
_ARGUMENT = re.compile(r'\s*+<\|open\|>( ?)argument\s++([^<>]{0,400}?)<\|sep\|>')
_ARGUMENT_CLOSE = "<|close|>argument" + _SEP
_SPACED = ("<|close|> argument <|sep|>", "<|close|> call <|sep|>", "<|close|> tools <|sep|>")
_JSON = re.compile(r'\s*+<\|open\|> ?json\b[^<>]{0,100}?<\|sep\|>\s*+(?=\{)')
_JSON_CLOSE = re.compile(r"\s*+<\|close\|> ?json ?<\|sep\|>")
_CALL_CLOSE = re.compile(r"\s*+<\|close\|> ?call ?<\|sep\|>")
# The response channel's close before the tools (the template opens the channel; an empty
# one is taken whole) and the message's close after them go with the section.
_SECTION_OPEN = re.compile(r"(?:<\|open\|> ?response ?<\|sep\|>\s*+)?"
                           r"(?:<\|close\|> ?response ?<\|sep\|>\s*+)?"
                           r"<\|open\|> ?tools ?<\|sep\|>\s*+\Z")
_SECTION_CLOSE = re.compile(r"\s*+<\|close\|> ?tools ?<\|sep\|>"
                            r"(?:\s*+<\|close\|> ?message ?<\|sep\|>)?")
_TAGS = ValueTags(
    tokens=re.compile(r"<\|(?:(open\|> ?argument\s)|close\|> ?argument ?<\|sep\|>)"),
    next_item=_ARGUMENT,
    stray=stray_tags((_ARGUMENT_CLOSE, "<|close|>call" + _SEP, "<|close|>tools" + _SEP, *_SPACED),
                     ("<|open|>tools" + _SEP, "<|open|>call", "<|open|> tools <|sep|>",
                      "<|open|> call ")),
)


def _attributes(text: str) -> dict[str, str]:
    return {key: value.replace("&quot;", '"').replace("&amp;", "&")
            for key, value in _ATTRIBUTE.findall(text)}


def _typed(raw: str, kind: str) -> Any:
    """An argument's value: the text for a string, else its JSON (or the text, unreadable)."""
    if kind == "string":
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw


def _tail(doc: Document) -> Tail:
    """Where a call's frame ends after an argument's close, when the call ends there: after
    its close (and the section's, if that follows), or at the end of the text."""
    text = doc.text

    def tail(pos: int) -> int | None:
        close = _CALL_CLOSE.match(text, pos)
        if close is None:
            return pos if doc.skip_space(pos) >= len(text) else None
        section = _SECTION_CLOSE.match(text, close.end())
        return close.end() if section is None else section.end()
    return tail


def _arguments(doc: Document, pos: int, tail: Tail,
               ) -> tuple[dict[str, Any] | None, int, bool, bool]:
    """The arguments of a call from `pos`: (them, where they end, whether whole, whether
    every text value's tags were balanced, see text_values); None as the arguments when its
    JSON block is not an object we read, or the document's budget ran out."""
    text = doc.text
    block = _JSON.match(text, pos)
    if block is not None:
        end = doc.json_end(block.end())
        if end is None:
            return None, len(text), False, True
        close = _JSON_CLOSE.match(text, end)
        try:
            value = orjson.loads(text[block.end():end])
        except orjson.JSONDecodeError:
            value = None
        ok = close is not None and isinstance(value, dict)
        return (value if ok else None), (close.end() if close else end), True, True
    arguments: dict[str, Any] = {}
    balanced = True
    while (argument := _ARGUMENT.match(text, pos)) is not None:
        if not doc.spend():
            return None, len(text), False, True
        found = value_end(doc, argument.end(), _TAGS, tail)
        if found is None:
            return (None if doc.budget.exhausted else arguments), len(text), False, balanced
        attributes = _attributes(argument[2])
        raw = text[argument.end():found.at]
        if (argument[1] and argument[2].endswith(" ") and text.startswith("<|close|> ", found.at)
                and len(raw) >= 2 and raw[0] == raw[-1] == " "):
            raw = raw[1:-1]  # the detokenizer's spaces beside the tokens, not the model's
        arguments[attributes.get("key", "")] = _typed(raw, attributes.get("type", "string"))
        balanced = balanced and found.balanced
        pos = found.end
    return arguments, pos, True, balanced


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|open|>call …<|sep|>` inside a tools section, with its arguments."""
    text = doc.text
    in_section = False
    tail = _tail(doc)
    openers = OpenerMatches(doc, _CALL, MARKERS, offset=1, keep_backticked=True)
    for match in openers:
        start = section_start(doc, _SECTION_OPEN, match.start(), openers.taken_to, in_section)
        if start is None:
            continue  # outside a tools section: a mention
        name = _attributes(match[1]).get("tool")
        arguments, pos, complete, balanced = _arguments(doc, match.end(), tail)
        if not (complete and balanced):
            if not doc.budget.exhausted:
                yield unsure_frame(doc, NAME, start, name, complete)
            return
        close = _CALL_CLOSE.match(text, pos)
        if close is None:
            if doc.skip_space(pos) >= len(text):  # cut before its close: its text stays
                yield Frame(NAME, start, len(text), closed=False, complete=False, name=name)
                return
            continue  # something else inside the call: not one we read; it stays text
        pos = close.end()
        after = _SECTION_CLOSE.match(text, pos)
        in_section = after is None
        pos = after.end() if after is not None else pos
        if arguments is None or not name:
            yield Frame(NAME, start, pos, name=name, refused="unrecognised_arguments")
        else:
            yield Frame(NAME, start, pos, value={"name": name, "arguments": arguments})
        openers.taken_to = pos


# A plain answer in its response section: `<|open|>response<|sep|>…<|close|>response<|sep|>`
# and the message's close; the template may open the section itself (then only its close is
# written, at the end of the answer).
_RESPONSE_OPEN = re.compile(r"\s*+<\|open\|> ?response ?<\|sep\|> ?")
_RESPONSE_CLOSE = re.compile(r"(?: ?<\|close\|> ?response ?<\|sep\|>\s*+)?"
                             r"(?: ?<\|close\|> ?message ?<\|sep\|>\s*+)?\Z")
# What every piece of markup `answer_markup` looks for holds (none in a plain answer).
_MARKUP_NEEDLE = '<'


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The response section's tokens at the start and the end of the answer."""
    if len(text) <= SHORT_TEXT and _MARKUP_NEEDLE not in text:  # (every token holds it)
        return [], []
    return edges(text, _RESPONSE_OPEN, _RESPONSE_CLOSE), []


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<|open|>tools", "<|open|>response", "<|close|>response", "<|close|>message",
                     "<|open|> tools", "<|open|> response", "<|close|> response",
                     "<|close|> message"),
    vllm=("kimi_k3",),
    sglang=("kimi_k3",),
    doctor_parser="kimi_k3",
    thinking_opened=("kimi_k3",),
    doctor_markers=(("<|open|>tools<|sep|>", "kimi_k3"),),
    answer_markup=answer_markup,
)
