"""FunctionGemma calls: `call:NAME{key:<escape>value<escape>,…}` between its call tokens.

    <start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>

(vLLM's `functiongemma`, llama.cpp's "Function Gemma".) Values are text between `<escape>`
tokens (or a bare number or word), coerced by the tool's schema; keys follow one another with
or without commas.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import OpenerMatches
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


def _arguments(doc: Document, pos: int) -> tuple[list[tuple[str, str]], int] | None:
    """The (key, text value) pairs from `pos` up to the closing brace and token, and where
    they end; None when the text is not this syntax (cut, nested, unescaped) or the
    document's budget ran out."""
    text = doc.text
    args: list[tuple[str, str]] = []
    while (close := _CLOSE.match(text, pos)) is None:
        key = _KEY.match(text, pos)
        if key is None or not doc.spend():
            return None
        pos = key.end()
        if text.startswith(_ESCAPE, pos):
            value_end = text.find(_ESCAPE, pos + len(_ESCAPE))
            if value_end < 0:
                return None
            args.append((key[1], text[pos + len(_ESCAPE):value_end]))
            pos = value_end + len(_ESCAPE)
        elif (bare := _BARE.match(text, pos)) is not None:
            args.append((key[1], bare[1]))
            pos = bare.end()
        else:
            return None
    return args, close.end()


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
        args, end = read
        yield Frame(NAME, match.start(), end, name=match[1], text_args=tuple(args))
        openers.taken_to = end


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<start_function_call>"),
    vllm=("functiongemma",),
    llama_cpp=("Function Gemma",),
    doctor_parser="functiongemma",
)
