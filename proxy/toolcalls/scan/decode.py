"""Where a JSON value ends, by the C decoders (orjson and the stdlib's): on windows of the
text, and on copies of it patched where a repair moves no bracket (Python's names, a trailing
comma, a backslash that starts no JSON escape)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from enum import Enum
from typing import Final, TypeVar

import orjson

from ...base.bulk_decode import loads
from ..repair.regexes import PY_NAMES_AS_JSON
from .budget import Budget

_PY_WORD = re.compile(r"(?:True|False|None)\b")
_SWAP_QUOTES = str.maketrans("'\"", "\"'")


def _local_fix(text: str, start: int, error_at: int) -> tuple[int, int, str] | None:
    """(start, end, replacement) that repairs the decoder's failure at `error_at` without
    moving a bracket or a string's end, or None: a Python name (same length), the comma
    before a closing bracket, a backslash that starts no JSON escape (doubled)."""
    if not start < error_at < len(text):
        return None
    char = text[error_at]
    if char in "TFN" and not (text[error_at - 1].isalnum() or text[error_at - 1] == "_"):
        word = _PY_WORD.match(text, error_at)
        return None if word is None else (error_at, word.end(), PY_NAMES_AS_JSON[word[0]])
    if char == ",":  # orjson points at a trailing comma
        after = error_at + 1 + len(text[error_at + 1:error_at + 65]) - len(
            text[error_at + 1:error_at + 65].lstrip())
        return (error_at, error_at + 1, "") if text[after:after + 1] in ("]", "}") else None
    if char in "]}":  # the stdlib decoder, at the bracket after it
        floor = max(start, error_at - 64)
        before = len(text[floor:error_at].rstrip()) + floor - 1
        return (before, before + 1, "") if before > start and text[before] == "," else None
    if char == "\\":
        return error_at, error_at + 1, "\\\\"
    if char == "u" and text[error_at - 1] == "\\":
        return error_at - 1, error_at, "\\\\"
    return None


class Unknown(Enum):
    """What the decoders could not tell (its one member, UNKNOWN)."""

    UNKNOWN = "unknown"


UNKNOWN: Final = Unknown.UNKNOWN
_WINDOW = 4_096
# Up to this window the stdlib decoder reads (no exception when a value is followed by text,
# and raw control characters allowed); past it, orjson (eight times faster on a long value of
# numbers, and its exception's cost is nothing beside a window that long).
_STDLIB_WINDOW = 65_536
# An error this close to the end of a window that holds part of the text may be where the
# window ends (`tr|ue`, `"\u00|e9"`).
_EDGE_SLACK = 8
# C-speed path for spans that are already JSON (raw control characters allowed).
_DECODER = json.JSONDecoder(strict=False)


# What a window's reader returns to the window loop instead of a result: read the next window,
# eight times wider (the window ended inside the value); read the same window again with the
# stdlib decoder (orjson refused a raw control character, which the stdlib decoder reads).
class _Signal(Enum):
    GROW = "grow"
    STDLIB = "stdlib"


_GROW: Final = _Signal.GROW
_STDLIB: Final = _Signal.STDLIB
_Read = TypeVar("_Read")
# (window, partial, slack, stdlib) -> a result, or _GROW / _STDLIB
WindowReader = Callable[[str, bool, int, bool], _Read | _Signal]


def _read_growing(text: str, start: int, width: int, read: WindowReader[_Read], *,
                  to_last_bracket: bool = False) -> tuple[_Read, int]:
    """The one window-growing loop: `read(window, partial, slack, stdlib)` on windows of
    `text` from `start`, `width` wide and growing eightfold while it returns _GROW, until it
    returns a result; that result and the last window's width. `partial`: the window holds
    only part of the text; `slack`: how close to its end an error may be where the window
    cuts a token; `stdlib`: the window is short enough (or needs) the stdlib decoder.

    With `to_last_bracket`, a window that would reach past the text's last closing bracket
    ends there instead (once; no slack then: it cuts no token but a string): a long value
    that is the last of its text (a call's payload before its closing tag) is then decoded
    in the read that finds its end."""
    size = len(text)
    last = max(text.rfind("}"), text.rfind("]")) + 1 if to_last_bracket else -1
    stdlib = False
    while True:
        stop = min(size, start + width)
        slack = _EDGE_SLACK
        if start < last < stop:
            stop, last, slack = last, -1, 0  # once: a window read again ends where windows do
        outcome = read(text[start:stop], stop < size, slack, stdlib or width <= _STDLIB_WINDOW)
        if outcome is _GROW:
            width *= 8  # a long value: a few windows, each far longer than the last
        elif outcome is _STDLIB:
            stdlib = True
        else:
            return outcome, width


def _end_in(window: str, partial: bool, slack: int, stdlib: bool,
            ) -> tuple[int | None, int | None] | _Signal:
    """value_end's reader: (end, None) or (None, error position) in the window's positions,
    (None, None) when the whole text ends inside a valid prefix, or _GROW / _STDLIB."""
    if stdlib:
        try:
            return int(_DECODER.raw_decode(window)[1]), None
        except ValueError as error:
            at: int = getattr(error, "pos", 0)
            unterminated = str(error).startswith("Unterminated string")
    else:
        try:
            loads(window)
        except orjson.JSONDecodeError as error:
            if error.msg.startswith("unexpected content after document"):
                return len(window[:error.pos].rstrip(" \t\n\r")), None
            if error.msg.startswith("unexpected control character"):
                return _STDLIB
            at = error.pos
            unterminated = error.msg.startswith("unexpected end of data")
        else:
            return len(window.rstrip(" \t\n\r")), None
    if unterminated or at >= len(window) - (slack if partial else 0):
        return _GROW if partial else (None, None)
    return None, at


def value_end(text: str, start: int) -> tuple[int | None, int | None]:
    """(end, None) of the JSON value opening at `start`, by the C decoders on windows of the
    text growing from a few kilobytes (so that a short value followed by a long text costs
    the value, not the text); (None, None) when the text ends inside a valid prefix of it
    (it never closes); (None, position) where the decoder finds it invalid. Up to a window of
    _STDLIB_WINDOW the stdlib decoder reads, past it orjson (the stdlib decoder again for raw
    control characters). Raises RecursionError on a value nested deeper than the stdlib
    decoder reads."""
    (end, at), _ = _read_growing(text, start, _WINDOW, _end_in)
    return (None if end is None else start + end), (None if at is None else start + at)


def _strict_in(window: str, partial: bool, slack: int, stdlib: bool,
               ) -> tuple[int | None, object, tuple[int, str] | None] | _Signal:
    """strict_read's reader (orjson whatever the width): (end, value, error) in the window's
    positions, or _GROW."""
    try:
        value = loads(window)
    except orjson.JSONDecodeError as error:
        if error.msg.startswith("unexpected content after document"):
            return len(window[:error.pos].rstrip(" \t\n\r")), UNKNOWN, None
        if error.msg.startswith("unexpected end of data") or (
                partial and error.pos >= len(window) - slack):
            return _GROW if partial else (None, UNKNOWN, None)
        return None, UNKNOWN, (error.pos, error.msg)
    return len(window.rstrip(" \t\n\r")), value, None


def strict_read(text: str, start: int, width: int = _WINDOW,
                ) -> tuple[int | None, object, tuple[int, str] | None, int]:
    """The strict decoder (orjson) on windows of `text` growing from `start`, as value_end
    reads them, each ending at the text's last closing bracket if it would reach past it
    (see _read_growing): (end, value, error, width). `end` is where the value opening at
    `start` ends, and `value` its value when a window held exactly it (else UNKNOWN);
    `error` the first error met instead (its position in `text`, its message); neither when
    the text ends inside a valid prefix. `width` is the last window's, for the next read of
    the same value."""
    outcome, width = _read_growing(text, start, width, _strict_in, to_last_bracket=True)
    end, value, error = outcome
    return ((None if end is None else start + end), value,
            (None if error is None else (start + error[0], error[1])), width)


def _string_in(window: str, partial: bool, slack: int, stdlib: bool) -> int | _Signal | None:
    """string_end's reader: the end of the string opening the window, in its positions;
    None when orjson cannot tell; or _GROW. The window is read to its last quote: where that
    quote closes the string, orjson raises nothing (an error's line number costs a count of
    the newlines before it, a pass over a long string)."""
    cut = window.rfind('"', 1) + 1
    if not cut:  # no quote closes it here
        return _GROW if partial else None
    try:
        orjson.loads(window[:cut])  # a string: nothing for the collector
    except orjson.JSONDecodeError as error:
        if error.msg.startswith("unexpected content after document"):
            return len(window[:error.pos].rstrip(" \t\n\r"))
        if partial and (error.msg.startswith("unexpected end of data")
                        or error.pos >= cut - slack):
            return _GROW  # a later quote may close it
        return None
    return cut


def string_end(text: str, start: int) -> int | None:
    """The end (after its closing quote) of the JSON string whose opening quote is at
    `start`, when orjson reads it as a strict JSON string, on windows growing from a few
    kilobytes; else None (a raw control character, an escape it refuses, no closing quote:
    the caller's decoder decides). A string orjson reads ends where the stdlib's lenient
    scanstring says, as strict JSON strings are lenient ones and their grammar has one end;
    orjson reads a long string with many escapes three times as fast, and builds nothing
    more than the string."""
    end, _ = _read_growing(text, start, _WINDOW, _string_in)
    return None if end is None else start + end


class Decoders:
    """The C decoders over one document: their failures capped by the budget, its patched
    copies made once."""

    # How many patched copies one value may be decoded in (see patched_end).
    MAX_PATCHES = 4

    def __init__(self, text: str, budget: Budget) -> None:
        self.text = text
        self._budget = budget
        self._bulk: tuple[str | None] | None = None  # see _same_length_copy
        self._py_copy: str | None = None  # see python_copy
        self._swapped: str | None = None  # see quotes_swapped

    def decode(self, text: str, start: int) -> tuple[int | None, int | None] | Unknown:
        """value_end, or UNKNOWN. Failures are capped per document: each one may have read
        a long valid prefix, which a call from another opener would read again."""
        budget = self._budget
        if budget.decoder_failures <= 0:
            return UNKNOWN
        try:
            end, error_at = value_end(text, start)
        except RecursionError:
            budget.decoder_failures -= 1
            return UNKNOWN
        if error_at is not None:
            budget.decoder_failures -= 1
        return end, error_at

    def decoded_end(self, text: str, start: int, shift: int, patches: int,
                    ) -> int | Unknown | None:
        """The end of the value opening at `start` in `text` (a copy of the document with
        `patches` patches, which added `shift` characters before the end) by the C decoders:
        an end in the document's positions, None when the value never closes, or UNKNOWN."""
        decoded = self.decode(text, start)
        if decoded is UNKNOWN:
            return UNKNOWN
        end, error_at = decoded
        if error_at is None:
            return end if end is None else end - shift
        return self.patched_end(text, start, error_at, shift, patches)

    def patched_end(self, text: str, start: int, error_at: int, shift: int, patches: int,
                    ) -> int | Unknown | None:
        """The end JsonSpans.end seeks, found by the C decoders on a copy of the text patched where
        they failed, when the failure is one the repairs make without moving a bracket or a
        string's end (Python's True/False/None, a trailing comma, a backslash that starts no
        JSON escape): then the patched value ends where the original's brackets balance,
        shifted by what the patches added. A few patches at most: a payload needing one or
        two repairs is found at C speed however many brackets it holds."""
        if patches >= self.MAX_PATCHES or self._budget.patches <= 0:
            return UNKNOWN
        fix = _local_fix(text, start, error_at)
        if fix is None:
            return UNKNOWN
        if text is self.text and fix[2] != "\\\\":  # a name or a comma: all of them at once
            bulk = self._same_length_copy()
            if bulk is not None:
                self._budget.patches -= 1
                return self.decoded_end(bulk, start, shift, patches + 1)
        self._budget.patches -= 1
        first, stop, replacement = fix
        patched = text[:first] + replacement + text[stop:]
        return self.decoded_end(patched, start, shift + len(replacement) - (stop - first),
                                patches + 1)

    def _same_length_copy(self) -> str | None:
        """The document with every True/False/None spelled as JSON and every `,]`/`,}` comma
        made a space: the same length, and the same quotes, backslashes and brackets, so every
        value's brackets balance where the original's do (inside a string, the change is
        only content). Made once per document, for payloads with such a repair in many rows;
        None when there is nothing to change, or so much that the text is not a payload needing
        repairs but a flood of them (decoding it would cost more than the scanner's budget)."""
        if self._bulk is None:
            text = self.text  # (a name whose capital is absent is not counted, nor a comma
            pairs = [(old, new)  # before a bracket that is)
                     for old, new in (*PY_NAMES_AS_JSON.items(), (",]", " ]"), (",}", " }"))
                     if old[old[0] == ","] in text]
            count = sum(text.count(old) for old, _ in pairs)
            bulk = self.text
            if 0 < count <= 64 + len(self.text) // 16:  # a repair per row, not per value
                for old, new in pairs:
                    bulk = bulk.replace(old, new)
            self._bulk = (bulk,) if bulk is not self.text else (None,)
        return self._bulk[0]

    def quotes_swapped(self) -> str:
        """The document with single and double quotes swapped, where a single-quoted string
        is a double-quoted one of the same length (for the C string decoder). Made once."""
        if self._swapped is None:
            self._swapped = self.text.translate(_SWAP_QUOTES)
        return self._swapped

    def python_copy(self) -> str:
        """The document with single and double quotes swapped, and the changes of
        _same_length_copy: a Python literal whose strings are all single-quoted (the style
        models write) reads there as JSON, with its brackets where the original's balance
        (a `"` inside such a string becomes `'`, only content). Any other style fails to
        decode, and the bracket scanner reads it. Made once per document."""
        if self._py_copy is None:
            bulk = self._same_length_copy()
            self._py_copy = self.quotes_swapped() if bulk is None else bulk.translate(
                _SWAP_QUOTES)
        return self._py_copy
