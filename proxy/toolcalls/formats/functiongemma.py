"""FunctionGemma calls: `call:NAME{key:<escape>value<escape>,…}` between its call tokens.

    <start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>

(vLLM's `functiongemma`, llama.cpp's "Function Gemma".) Values are text between `<escape>`
tokens (or a bare number or word), coerced by the tool's schema; keys follow one another with
or without commas. A value may be an array `[…]` or an object `{key:…}` of such values, nested
(Ollama's `functiongemma` tests: `items:[<escape>a<escape>,<escape>b<escape>]`,
`data:{name:<escape>test<escape>,value:42}`): then a bare number is that number, `true`,
`false` and `null` are themselves, and any other bare word a string, coerced where the schema
wants another type.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..framing.steps import OpenerMatches
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "functiongemma"
_OPEN = "<start_function_call>"
_ESCAPE = "<escape>"
MARKERS = (_OPEN,)
_HEAD = re.compile(r"<start_function_call>\s*+call:([\w.\-]{1,200}+)\{")
_KEY = re.compile(r"\s*+,?\s*+([^\s:{},<>\"']{1,200}+)\s*+:\s*+")
_BARE = re.compile(r"([^\s,{}<>]{1,200}+)\s*+")
_CLOSE = re.compile(r"\s*+,?\s*+\}\s*+<end_function_call>")
_NESTED_BARE = re.compile(r"\s*+([^\s,{}\[\]<>]{1,200}+)\s*+")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*+)(?:\.\d++)?(?:[eE][+-]?\d++)?")
_SEPARATOR = re.compile(r"\s*+,?\s*+")
_MAX_DEPTH = 32


def _bare_literal(word: str) -> Any:
    """A bare word inside an array or object: a number, `true`, `false`, `null`, or text."""
    if word in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[word]
    if _NUMBER.fullmatch(word):
        return float(word) if any(c in word for c in ".eE") else int(word)
    return word


def _separated(text: str, pos: int) -> int:
    """Where the separator (space, a comma, space) from `pos` ends."""
    separator = _SEPARATOR.match(text, pos)
    assert separator is not None  # it matches the empty string
    return separator.end()


def _nested(doc: Document, pos: int, depth: int) -> tuple[Any, int] | None:
    """The value at `pos` (an escaped string, a bare word, an array or an object) and where it
    ends; None when it is not this syntax or the budget ran out."""
    text = doc.text
    if depth > _MAX_DEPTH or not doc.spend():
        return None
    pos = _separated(text, pos) if text.startswith(",", pos) else pos
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if text.startswith(_ESCAPE, pos):
        end = text.find(_ESCAPE, pos + len(_ESCAPE))
        return None if end < 0 else (text[pos + len(_ESCAPE):end], end + len(_ESCAPE))
    if text.startswith("[", pos):
        items: list[Any] = []
        pos += 1
        while True:
            pos = _separated(text, pos)
            if text.startswith("]", pos):
                return items, pos + 1
            read = _nested(doc, pos, depth + 1)
            if read is None:
                return None
            item, pos = read
            items.append(item)
    if text.startswith("{", pos):
        members: dict[str, Any] = {}
        pos += 1
        while True:
            pos = _separated(text, pos)
            if text.startswith("}", pos):
                return members, pos + 1
            key = _KEY.match(text, pos)
            if key is None or key[1] in members:
                return None
            read = _nested(doc, key.end(), depth + 1)
            if read is None:
                return None
            members[key[1]], pos = read
    bare = _NESTED_BARE.match(text, pos)
    return None if bare is None else (_bare_literal(bare[1]), bare.end())


def _arguments(doc: Document, pos: int,
               ) -> tuple[list[tuple[str, Any]], int, bool, set[str]] | None:
    """The (key, value) pairs from `pos` up to the closing brace and token, where they end,
    whether a value is an array or object (then the values are read, not text) and the keys
    whose value is a bare word; None when the text is not this syntax (cut, unescaped) or
    the document's budget ran out."""
    text = doc.text
    args: list[tuple[str, Any]] = []
    nested = False
    bare_keys: set[str] = set()
    while (close := _CLOSE.match(text, pos)) is None:
        key = _KEY.match(text, pos)
        if key is None or not doc.spend():
            return None
        pos = key.end()
        if text.startswith(("[", "{"), pos):
            read = _nested(doc, pos, 1)
            if read is None:
                return None
            value, pos = read
            args.append((key[1], value))
            nested = True
        elif text.startswith(_ESCAPE, pos):
            value_end = text.find(_ESCAPE, pos + len(_ESCAPE))
            if value_end < 0:
                return None
            args.append((key[1], text[pos + len(_ESCAPE):value_end]))
            pos = value_end + len(_ESCAPE)
        elif (bare := _BARE.match(text, pos)) is not None:
            args.append((key[1], bare[1]))
            bare_keys.add(key[1])
            pos = bare.end()
        else:
            return None
    return args, close.end(), nested, bare_keys


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<start_function_call>call:NAME{…}<end_function_call>`."""
    text = doc.text
    openers = OpenerMatches(doc, _HEAD, _OPEN)
    for match in openers:
        read = _arguments(doc, match.end())
        if read is None:
            if text.find("<end_function_call>", match.end()) < 0:  # cut off: its text stays
                yield Frame(NAME, match.start(), len(text), closed=False, complete=False,
                            name=match[1])
                return
            continue  # not this syntax: it stays text
        args, end, nested, bare_keys = read
        if not nested:
            yield Frame(NAME, match.start(), end, name=match[1], text_args=tuple(args))
        elif len({key for key, _ in args}) < len(args):
            yield Frame(NAME, match.start(), end, name=match[1], refused="repeated_parameter")
        else:  # the flat values beside a structure read as they would inside one
            arguments = {key: _bare_literal(value) if key in bare_keys else value
                         for key, value in args}
            yield Frame(NAME, match.start(), end,
                        value={"name": match[1], "arguments": arguments})
        openers.taken_to = end


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<start_function_call>"),
    vllm=("functiongemma",),
    llama_cpp=("Function Gemma",),
    doctor_parser="functiongemma",
)
