"""Gemma 4 calls, in Gemma's own (not JSON) argument syntax.

    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>

(vLLM's `gemma4` parser.) Keys are bare, strings are delimited by `<|"|>`, objects `{…}` and
arrays `[…]` nest, and numbers, `true`, `false` and `null` are written bare. A bare value that
is none of those (a word) is not guessed at: the frame stays text. A string is kept exactly as
written between its quotes (spaces and newlines at its ends included); a bare key may hold
spaces. A value may also be a JSON string (`query:"raw \"quoted\""`, its escapes decoded),
beside `<|"|>` ones in the same call, as Ollama's `gemma4` parser reads it. Calls follow one
another without a separator; `<|tool_response>` after the last belongs to the frame, and so
does a stray `<tool_call|>` written again right after the close (Ollama drops it).

Gemma 4 also writes its calls without the special token that opens them, as vLLM's parser
reads them: `<|tool_call>:call:NAME{…}` (a stray colon), `<call>NAME{…}` (the token written
in pieces), and a bare `call:NAME{…}` that begins a line or follows the thinking's end
`<channel|>` directly (`call:` written mid-line is prose). A call may end with the turn's end
`<turn|>` instead of `<tool_call|>`, or, written without its opening token, with nothing:
then only space or the next call may follow it. Only a call opened by `<|tool_call>` is the
model's plain call to a tool not offered; the others must name an offered tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..framing.steps import OpenerMatches, at_line_start, ends_or_opens, next_or_end
from ..opener_patterns import Opener, literals, run, seq
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "gemma4"
_OPEN = "<|tool_call>"
_CLOSE = "<tool_call|>"
_CALL_TAG = "<call>"
_BARE = "call:"
_THOUGHT_END = "<channel|>"
# Not `<`-anchored: that group is the one every text is searched for.
MARKERS = (_OPEN[1:], _CALL_TAG[1:], _BARE)
_NAME = r"([\w.\-]{1,200}+)\{"
_HEAD = re.compile(r"<\|tool_call>\s*+:?\s*+call:" + _NAME)
_TAG_HEAD = re.compile(r"<call>\s*+(?:call:)?" + _NAME)
_BARE_HEAD = re.compile(r"call:" + _NAME)
_STRING = '<|"|>'
# A bare key: anything up to its colon but brackets, commas, tags and quotes; it may hold
# spaces (`first name:`), not at its ends (vLLM's parser strips them too).
_KEY = re.compile(r"\s*+([^\s:{}\[\],<>\"'](?:[^:{}\[\],<>\"'\n]{0,198}[^\s:{}\[\],<>\"'])?)"
                  r"\s*+:\s*+")
_QUOTED_KEY = re.compile(r'\s*+<\|"\|>([^<]{1,200}+)<\|"\|>\s*+:\s*+')
_BARE_VALUE = re.compile(r"\s*+(-?(?:0|[1-9]\d*+)(?:\.\d++)?(?:[eE][+-]?\d++)?|true|false|null)"
                   r"\s*+(?=[,}\]])")
# A JSON string value (raw newlines and tabs in it allowed, as models write them).
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_SEPARATOR = re.compile(r"\s*+,?\s*+")
_SPACE = re.compile(r"\s*+")
# The close, and the `<|tool_response>` the model writes next to hand over to the tool (its
# stop token, in the text when special tokens are kept).
# `<turn|>` closes a call too (the turn ends with it).
_CLOSE_AFTER = re.compile(r"\s*+(?:" + re.escape(_CLOSE) + r"(?:\s*+" + re.escape(_CLOSE)
                          + r")*+(?:\s*+<\|tool_response>)?|<turn\|>)")
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
        space = _SPACE.match(text, pos)
        assert space is not None  # it matches the empty string
        pos = space.end()
        if depth > _MAX_DEPTH or pos >= len(text):
            return self._unread(pos)
        if text.startswith(_STRING, pos):
            close = text.find(_STRING, pos + len(_STRING))
            if close < 0:
                return _Unread(end=True)
            return text[pos + len(_STRING):close], close + len(_STRING)
        if text[pos] == '"':
            quoted = _JSON_STRING.match(text, pos)
            if quoted is None:
                return self._unread(pos)
            try:
                decoded = orjson.loads(quoted[0])
            except orjson.JSONDecodeError:
                decoded = _json_string_lax(quoted[0])
            if decoded is None:
                return self._unread(pos)
            return decoded, quoted.end()
        if text[pos] == "{":
            return self.object(pos + 1, depth + 1)
        if text[pos] == "[":
            return self.array(pos + 1, depth + 1)
        bare = _BARE_VALUE.match(text, pos)
        if bare is None:
            return self._unread(pos)
        word = bare[1]
        literal: Any = {"true": True, "false": False, "null": None}.get(word, word)
        if literal is word:
            literal = float(word) if any(c in word for c in ".eE") else int(word)
        return literal, bare.end()

    def object(self, pos: int, depth: int) -> tuple[dict[str, Any], int] | _Unread:
        text = self.text
        result: dict[str, Any] = {}
        while True:
            separator = _SEPARATOR.match(text, pos)
            assert separator is not None  # it matches the empty string
            pos = separator.end()
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
        text = self.text
        result: list[Any] = []
        while True:
            separator = _SEPARATOR.match(text, pos)
            assert separator is not None  # it matches the empty string
            pos = separator.end()
            if text.startswith("]", pos):
                return result, pos + 1
            read = self.value(pos, depth)
            if isinstance(read, _Unread):
                return read
            item, pos = read
            result.append(item)


def _json_string_lax(quoted: str) -> str | None:
    """A JSON string holding raw control characters (a newline), decoded; None if it is none."""
    try:
        decoded = json.loads(quoted, strict=False)
    except ValueError:
        return None
    return decoded if isinstance(decoded, str) else None


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tool_call>call:NAME{…}<tool_call|>`, then the calls written without that
    token (see the module's docstring). A spelling whose marker does not occur is not set up
    (`</tool_call>` holds this format's `call>`: most texts that reach here hold none)."""
    if doc.has(_OPEN):
        yield from _frames(doc, OpenerMatches(doc, _HEAD, _OPEN), _OPEN)
    if doc.has(_CALL_TAG):
        yield from _frames(doc, OpenerMatches(doc, _TAG_HEAD, _CALL_TAG), _CALL_TAG)
    if doc.has(_BARE):
        yield from _frames(doc, _bare_openers(doc), _BARE)


def _bare_openers(doc: Document) -> Iterator[re.Match[str]]:
    """Each `call:NAME{` that begins a line or follows `<channel|>` directly."""
    text = doc.text
    for match in OpenerMatches(doc, _BARE_HEAD, _BARE):
        start = match.start()
        if text.endswith(_THOUGHT_END, 0, start) or (
                at_line_start(text, start) and not text.endswith(_OPEN + ":", 0, start)):
            yield match


def _frames(doc: Document, openers: Iterable[re.Match[str]], opener: str) -> Iterator[Frame]:
    """The frames that start at `openers` (matches of a head ending at its `{`)."""
    text = doc.text
    reader = _Reader(text)
    for match in openers:
        start = match.start()
        read = reader.object(match.end(), 1)
        if isinstance(read, _Unread):
            if read.end:  # cut off: an incomplete frame, its text stays
                yield Frame(NAME, start, len(text), closed=False, complete=False,
                            name=match[1])
                return
            close_at = text.find(_CLOSE, match.end(), next_or_end(text, opener, match.end()))
            if close_at >= 0 and opener == _OPEN:
                end = close_at + len(_CLOSE)  # a call we cannot read: reported, left as text
                yield Frame(NAME, start, end, name=match[1], refused="unrecognised_arguments")
                _taken(openers, end)
            continue
        arguments, pos = read
        value = {"name": match[1], "arguments": arguments}
        close = _CLOSE_AFTER.match(text, pos)
        if close is not None:
            yield Frame(NAME, start, close.end(), value=value)
            _taken(openers, close.end())
        elif ends_or_opens(doc, pos, opener):
            yield Frame(NAME, start, pos, closed=opener != _OPEN, value=value,
                        repairs=("missing_close_tag",) if opener == _OPEN else ())
            _taken(openers, pos)


def _taken(openers: Iterable[re.Match[str]], end: int) -> None:
    """Tell the opener loop that the text up to `end` is a frame's."""
    if isinstance(openers, OpenerMatches):
        openers.taken_to = end


# The turn's end token that closes a plain answer (`…<turn|>`), when the server kept it.
_TURN_END = re.compile(r"<turn\|>\s*+\Z")
# What every piece of markup `answer_markup` looks for holds (none in a plain answer).
_MARKUP_NEEDLE = '<'


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The turn's end token at the end of the answer."""
    if _MARKUP_NEEDLE not in text:  # (every token holds it)
        return [], []
    end = _TURN_END.search(text)
    return ([end.span()] if end is not None else []), []


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(*literals("<|tool_call>", "<turn|>", "<call>"),
             Opener(seq("call:", run(r"[\w.\-]", 1, 200), "{"), "line")),
    vllm=("gemma4",),
    sglang=("gemma4",),
    doctor_parser="gemma4",
    own_markers_at_start=(_OPEN,),
    answer_markup=answer_markup,
)
