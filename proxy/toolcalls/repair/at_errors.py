"""The repairs of REPAIRS made where the strict decoder reports each error, or all at once by
str.replace: the values and names the regex repairs give, at C speed."""

from __future__ import annotations

from typing import Any

import orjson

from ..exact_json import _loads_lenient, loads
from .regexes import (
    _PY_LITERAL,
    _TRAILING_COMMA,
    _TRAILING_COMMA_UNMARKED,
    PY_NAMES_AS_JSON,
    REPAIRS,
    _control_chars_in_strings,
    _hybrid_function_key,
    _invalid_escapes,
    _names_as_json,
)


class NotJson(ValueError):
    """The text is not JSON even after every repair."""


_MAX_LOCAL_FIXES = 16
_ORDER = {name: i for i, (name, _) in enumerate(REPAIRS)}


def _repaired_at_errors(text: str, error: orjson.JSONDecodeError,
                        ) -> tuple[Any, tuple[str, ...]] | None:
    """The repairs of REPAIRS made where orjson reports each error, one error at a time (a
    C-speed parse per retry), instead of a rewrite of the whole text per repair: the same
    value and names, or None when an error is not one they repair the same way, or when
    the retries have cost more parsing than a few whole-text passes would.

    Trailing commas and Python literals are fixed at the error position; raw control
    characters by their (whole-text) repair. A comma is removed only if what follows it was
    already there, as the single-pass regex would see it (`,,}` is not two trailing commas).
    """
    applied: set[str] = set()
    if '"function=' in text:
        repaired = _hybrid_function_key(text)
        if repaired != text:
            text = repaired
            applied.add("qwen_hybrid_function_key")
    removed: list[int] = []  # where commas were removed, in the current text's positions
    spent = 0  # characters the retries have copied and parsed
    for _ in range(_MAX_LOCAL_FIXES):
        if applied:
            try:
                return loads(text), tuple(sorted(applied, key=_ORDER.__getitem__))
            except orjson.JSONDecodeError as next_error:
                error = next_error
        pos = error.pos
        spent += pos + len(text)
        if spent > 2 * len(text) + 262_144:
            return None  # many errors in a long text: the whole-text repairs are cheaper
        char = text[pos] if pos < len(text) else ""
        comma = _TRAILING_COMMA.match(text, pos) if char == "," else None
        literal = _PY_LITERAL.match(text, pos) if char in "TFN" else None
        if comma is not None and not any(pos < at < comma.end() for at in removed):
            text = text[:pos] + text[pos + 1:]
            removed = [at - 1 if at > pos else at for at in removed] + [pos]
            applied.add("trailing_comma")
        elif literal is not None:  # replaced by a word of the same length: no shift
            text = text[:pos] + PY_NAMES_AS_JSON[literal[0]] + text[literal.end():]
            applied.add("python_literals")
        elif char and char < " " and "raw_control_chars_in_string" not in applied \
                and len(text) <= 65_536:  # longer: the lenient decoder (see _repaired_at_once)
            repaired = _control_chars_in_strings(text)
            if repaired == text:
                return None
            text = repaired
            applied.add("raw_control_chars_in_string")
        else:
            return None
    return None



# A whitespace character outside strings and, raw, an error inside them (orjson, strict) or a
# character found when the value is written back (the lenient decoder): the marker below.
MARK = "\r"
# How far a trailing comma before the text's last closing brackets is looked for (see
# RepairedText.final_comma), and the last characters of a value it may follow.
_FINAL_COMMA_REACH = 64
_VALUE_ENDS = frozenset('"0123456789el]}')


class RepairedText:
    """A text repaired where the strict decoder reports each error, by the repair of REPAIRS
    that the error calls for, made over the whole text at once: a Python name at the error
    makes every such name JSON's, followed by MARK (one str.replace); a backslash that starts
    no JSON escape runs the escape repair over the whole text (unless `escapes` is False, for
    a caller that maps positions: it moves what follows); a trailing comma, reported as one,
    becomes MARK itself (the text keeps its length). A replacement that fell inside a string
    left a raw MARK there, which the strict decoder refuses; that error, and any other kind
    (a raw control character, a comma the regex repairs read otherwise, a name already
    replaced), ends the repairs (`fix` gives None) and the whole-text repairs decide. So a
    value read from the repaired text is the one the regex repairs give, with the same names,
    at the cost of one decode per kind of error rather than one pass per repair."""

    def __init__(self, text: str, *, escapes: bool = True) -> None:
        self.text = text
        self.words: list[str] = []  # the Python names replaced, in order
        self.applied: set[str] = set()
        self._escapes = escapes
        self._spent = 0  # characters copied and parsed for commas (one by one: a few only)

    def fix(self, pos: int, message: str) -> str | None:
        """Repair the error the decoder reports at `pos` with `message`: the name of the repair
        made, or None when the error is not one these repairs make (or make again)."""
        text = self.text
        if message.startswith("trailing comma") and text.startswith(",", pos):
            # orjson says so only of a comma after a value, before space and a bracket
            self._spent += pos + len(text)
            if self._spent > 2 * len(text) + 262_144:
                return None  # many: the whole-text repair is cheaper
            return self._comma(pos)
        literal = _PY_LITERAL.match(text, pos)
        if literal is not None and literal[0] not in self.words:
            self.words.append(literal[0])
            self.text = text.replace(literal[0], PY_NAMES_AS_JSON[literal[0]] + MARK)
            return self._made("python_literals")
        if self._escapes and message.startswith("invalid escape") \
                and "invalid_escape" not in self.applied:
            escaped = _invalid_escapes(text)
            if escaped is not text:
                self.text = escaped
                return self._made("invalid_escape")
        return None

    def final_comma(self) -> int | None:
        """Repair the comma among the text's last closing brackets (`…, ]}}`), when it follows
        a value as a trailing comma the decoder reports does: where a payload's one trailing
        comma usually stands (after its last item or argument), and where a read of a long
        value would fail after reading all of it, to be made again. Its position, or None."""
        text = self.text
        last = max(text.rfind("]"), text.rfind("}"))
        floor = max(0, last - _FINAL_COMMA_REACH)
        head = text[floor:last].rstrip(" \t\n\r]}") if last > 0 else ""
        pos = floor + len(head) - 1
        if not head.endswith(","):
            return None
        if text[max(0, pos - _FINAL_COMMA_REACH):pos].rstrip(" \t\n\r")[-1:] not in _VALUE_ENDS:
            return None  # `[1,,]`, `[,]`: not what the decoder calls a trailing comma
        self._comma(pos)
        return pos

    def _comma(self, pos: int) -> str:
        self.text = self.text[:pos] + MARK + self.text[pos + 1:]
        return self._made("trailing_comma")

    def _made(self, name: str) -> str:
        self.applied.add(name)
        return name

    @property
    def repairs(self) -> tuple[str, ...]:
        """The names of the repairs made, in the order of REPAIRS."""
        return tuple(sorted(self.applied, key=_ORDER.__getitem__))

    def value(self) -> tuple[Any, tuple[str, ...]] | None:
        """The value of the whole text, repaired, and the repairs' names; or None."""
        for _ in range(_MAX_LOCAL_FIXES + len(REPAIRS)):
            try:
                return loads(self.text), self.repairs
            except orjson.JSONDecodeError as error:
                if self.fix(error.pos, error.msg) is None:
                    return None
        return None


def _repaired_at_once(text: str) -> tuple[Any, tuple[str, ...]] | None:
    """The repairs of REPAIRS made where the decoder reports errors (see RepairedText), or
    else every one at once (see _repaired_all_at_once); None when neither reads the text as
    the regex repairs would."""
    repaired = RepairedText(text).value()
    return repaired if repaired is not None else _repaired_all_at_once(text)


def _repaired_all_at_once(text: str) -> tuple[Any, tuple[str, ...]] | None:
    """Every repair of REPAIRS made at once over the whole text by str.replace, which costs
    milliseconds on a megabyte where the regex repairs pay per match; raw control characters
    in strings read by the lenient decoder instead of escaped. True/False/None become JSON's
    names and `,]`/`,}` lose their comma, each followed by a carriage return (so the text
    must not hold one, raw or escaped, for these two). Where a replacement fell inside a
    string, that string now holds a raw carriage return: the strict decoder refuses it, and
    the lenient one is checked for it. So a value returned is the one the regex repairs
    give, with the same names; anything else gives None."""
    if '"function=' in text:
        return None
    applied: list[str] = []
    edited = text
    if MARK not in text and "\\r" not in text:
        named = _names_as_json(edited, MARK)
        if named is not edited:
            applied.append("python_literals")
            edited = named
        commas = [comma for comma in (",]", ",}") if comma in edited]
        for comma in commas:
            edited = edited.replace(comma, MARK + comma[1])
        if commas:
            applied.append("trailing_comma")
    escaped = _invalid_escapes(edited)
    if escaped is not edited:
        applied.append("invalid_escape")
        edited = escaped
    if applied or "," in edited:
        try:
            return loads(edited), tuple(applied)
        except orjson.JSONDecodeError as error:
            char = edited[error.pos] if error.pos < len(edited) else ""
            if char == "," and MARK not in text and "\\r" not in text:
                # a trailing comma with space before its bracket: all such, by one regex pass
                edited = _TRAILING_COMMA_UNMARKED.sub(MARK, edited)
                if "trailing_comma" not in applied:
                    applied.insert(len(applied) - ("invalid_escape" in applied),
                                   "trailing_comma")
                return _decoded_at_once(text, edited, applied)
            if not (char and char < " " and char != MARK):
                return None  # not a raw control character the model wrote
    return _lenient_at_once(text, edited, applied)


def _decoded_at_once(text: str, edited: str, applied: list[str],
                     ) -> tuple[Any, tuple[str, ...]] | None:
    """`edited` decoded strictly, else (a raw control character) leniently; or None."""
    try:
        return loads(edited), tuple(applied)
    except orjson.JSONDecodeError as error:
        char = edited[error.pos] if error.pos < len(edited) else ""
        if not (char and char < " " and char != MARK):
            return None
    return _lenient_at_once(text, edited, applied)


def _lenient_at_once(text: str, edited: str, applied: list[str],
                     ) -> tuple[Any, tuple[str, ...]] | None:
    """`edited` (the repairs of `text`, with markers) read with raw control characters in
    strings allowed, the value refused when a marker fell inside a string."""
    try:
        value = _loads_lenient(edited)
    except orjson.JSONDecodeError:
        return None
    if MARK in edited and MARK not in text and "\\r" in orjson.dumps(value).decode():
        return None  # a replacement fell inside a string
    return value, (*applied, "raw_control_chars_in_string")


# Python-literal style: a bracket, maybe more, then a single quote (`{'name': …}`). No JSON
