"""Gemma 4 calls, in Gemma's own (not JSON) argument syntax.

    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>

(vLLM's `gemma4` parser.) Keys are bare, strings are delimited by `<|"|>`, objects `{…}` and
arrays `[…]` nest, and numbers, `true`, `false` and `null` are written bare. A bare value that
is none of those (a word) is not guessed at: the frame stays text. A string is kept exactly as
written between its quotes (spaces and newlines at its ends included); a bare key may hold
spaces. Calls follow one another without a separator; `<|tool_response>` after the last
belongs to the frame.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..framing import OpenerMatches, ends_or_opens, next_or_end
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "gemma4"
_OPEN = "<|tool_call>"
_CLOSE = "<tool_call|>"
MARKERS = (_OPEN[1:],)  # not `<`-anchored: that group is the one every text is searched for
_HEAD = re.compile(r"<\|tool_call>\s*+call:([\w.\-]{1,200}+)\{")
_STRING = '<|"|>'
# A bare key: anything up to its colon but brackets, commas, tags and quotes; it may hold
# spaces (`first name:`), not at its ends (vLLM's parser strips them too).
_KEY = re.compile(r"\s*+([^\s:{}\[\],<>\"'](?:[^:{}\[\],<>\"'\n]{0,198}[^\s:{}\[\],<>\"'])?)"
                  r"\s*+:\s*+")
_QUOTED_KEY = re.compile(r'\s*+<\|"\|>([^<]{1,200}+)<\|"\|>\s*+:\s*+')
_BARE = re.compile(r"\s*+(-?(?:0|[1-9]\d*+)(?:\.\d++)?(?:[eE][+-]?\d++)?|true|false|null)"
                   r"\s*+(?=[,}\]])")
_SEPARATOR = re.compile(r"\s*+,?\s*+")
_SPACE = re.compile(r"\s*+")
# The close, and the `<|tool_response>` the model writes next to hand over to the tool (its
# stop token, in the text when special tokens are kept).
_CLOSE_AFTER = re.compile(r"\s*+" + re.escape(_CLOSE) + r"(?:\s*+<\|tool_response>)?")
_MAX_DEPTH = 64


@dataclass(frozen=True)
class _Unread:
    """Not Gemma's syntax here (`end`: the text ran out first): what the reader returns."""

    end: bool


class _Reader:
    """A recursive-descent reader of one call's arguments (depth-bounded): each step returns
    what it read and where it stopped, or _Unread."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _unread(self, pos: int) -> _Unread:
        return _Unread(end=pos >= len(self.text))

    def value(self, pos: int, depth: int) -> tuple[Any, int] | _Unread:
        text = self.text
        pos = _SPACE.match(text, pos).end()
        if depth > _MAX_DEPTH or pos >= len(text):
            return self._unread(pos)
        if text.startswith(_STRING, pos):
            close = text.find(_STRING, pos + len(_STRING))
            if close < 0:
                return _Unread(end=True)
            return text[pos + len(_STRING):close], close + len(_STRING)
        if text[pos] == "{":
            return self.object(pos + 1, depth + 1)
        if text[pos] == "[":
            return self.array(pos + 1, depth + 1)
        bare = _BARE.match(text, pos)
        if bare is None:
            return self._unread(pos)
        word = bare[1]
        literal: Any = {"true": True, "false": False, "null": None}.get(word, word)
        if literal is word:
            literal = float(word) if any(c in word for c in ".eE") else int(word)
        return literal, bare.end()

    def object(self, pos: int, depth: int) -> tuple[dict[str, Any], int] | _Unread:
        text, result = self.text, {}
        while True:
            pos = _SEPARATOR.match(text, pos).end()
            if text.startswith("}", pos):
                return result, pos + 1
            key = _QUOTED_KEY.match(text, pos) or _KEY.match(text, pos)
            if key is None:
                return self._unread(pos)
            read = self.value(key.end(), depth)
            if isinstance(read, _Unread):
                return read
            result[key[1]], pos = read

    def array(self, pos: int, depth: int) -> tuple[list[Any], int] | _Unread:
        text, result = self.text, []
        while True:
            pos = _SEPARATOR.match(text, pos).end()
            if text.startswith("]", pos):
                return result, pos + 1
            read = self.value(pos, depth)
            if isinstance(read, _Unread):
                return read
            item, pos = read
            result.append(item)


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tool_call>call:NAME{…}<tool_call|>`."""
    text = doc.text
    reader = _Reader(text)
    openers = OpenerMatches(doc, _HEAD, _OPEN)
    for match in openers:
        start = match.start()
        read = reader.object(match.end(), 1)
        if isinstance(read, _Unread):
            if read.end:  # cut off: an incomplete frame, its text stays
                yield Frame(NAME, start, len(text), closed=False, complete=False,
                            name=match[1])
                return
            close_at = text.find(_CLOSE, match.end(), next_or_end(text, _OPEN, match.end()))
            if close_at >= 0:
                end = close_at + len(_CLOSE)  # a call we cannot read: reported, left as text
                yield Frame(NAME, start, end, name=match[1], refused="unrecognised_arguments")
                openers.taken_to = end
            continue
        arguments, pos = read
        value = {"name": match[1], "arguments": arguments}
        close = _CLOSE_AFTER.match(text, pos)
        if close is not None:
            yield Frame(NAME, start, close.end(), value=value)
            openers.taken_to = close.end()
        elif ends_or_opens(doc, pos, _OPEN):
            yield Frame(NAME, start, pos, closed=False, value=value,
                        repairs=("missing_close_tag",))
            openers.taken_to = pos


# The turn's end token that closes a plain answer (`…<turn|>`), when the server kept it.
_TURN_END = re.compile(r"<turn\|>\s*+\Z")


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The turn's end token at the end of the answer."""
    end = _TURN_END.search(text)
    return ([end.span()] if end is not None else []), []


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<|tool_call>", "<turn|>"),
    vllm=("gemma4",),
    sglang=("gemma4",),
    doctor_parser="gemma4",
    answer_markup=answer_markup,
)
