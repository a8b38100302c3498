"""Values that need repairs, found once and read once: the document repaired where the strict
decoder reports errors (RepairedText over the whole document), the end of each value
read there mapped back to the document, and the repaired text of that value kept, so that a
frame whose payload is that span is decoded from it, not repaired and decoded again."""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass
from typing import Any

import orjson

from ..exact_json import has_long_digit_run, loads
from ..repair.at_errors import MARK, RepairedText
from ..repair.python_literal import single_quotes_as_json
from .budget import Budget
from .decode import UNKNOWN, Unknown, strict_read


class _Copy:
    """The document repaired as JSON (`python`: a Python literal's quotes made JSON's first,
    see single_quotes_as_json), and how its positions map to the document's. Every
    character the repairs add is MARK (after a name made JSON's), or, in a Python-literal
    copy, a backslash (before a `"` made part of a string): a copy is made only of a document
    that holds neither, so that counting them maps a span back. A comma made MARK keeps its
    place; where they stand is kept to tell them from the added ones."""

    def __init__(self, text: str, source: str, python: bool) -> None:
        self.original = text
        self.python = python
        self.repaired = RepairedText(source, escapes=False)
        self.commas: list[int] = []  # positions of the commas made MARK, in the copy

    @classmethod
    def of(cls, text: str, python: bool) -> _Copy | None:
        """The copy of `text`, or None when its positions could not be mapped back."""
        if MARK in text or (python and "\\" in text):
            return None
        source = single_quotes_as_json(text) if python else text
        if source is None:
            return None
        copy = cls(text, source, python)
        comma = copy.repaired.final_comma()
        if comma is not None:
            copy.commas.append(comma)
        return copy

    @property
    def text(self) -> str:
        return self.repaired.text

    def position(self, pos: int) -> int:
        """Where position `pos` of the document stands in the copy."""
        added = sum(self.original.count(word, 0, pos) for word in self.repaired.words)
        return pos + added + (self.original.count('"', 0, pos) if self.python else 0)

    def fix(self, pos: int, message: str) -> str | None:
        """Repair the error at `pos` of the copy (see RepairedText.fix), keeping track of the
        commas made MARK: the name of the repair, or None."""
        before = self.text
        made = self.repaired.fix(pos, message)
        if made == "trailing_comma":
            insort(self.commas, pos)
        elif made == "python_literals":  # each such name before a comma added a MARK there
            word = self.repaired.words[-1]
            added = len(self.text) - len(before)  # one per name
            self.commas = [at + (before.count(word, 0, at) if at < len(before) // 2
                                 else added - before.count(word, at))  # the shorter side
                           for at in self.commas]
        return made

    def _added(self, start: int, end: int) -> int:
        """How many characters the repairs added to the copy's span [start, end)."""
        text = self.text
        commas = bisect_left(self.commas, end) - bisect_left(self.commas, start)
        added = text.count(MARK, start, end) - commas
        return added + (text.count("\\", start, end) if self.python else 0)

    def span(self, start: int, end: int, origin: int) -> tuple[int, tuple[str, ...]]:
        """The length in the document of the copy's span [start, end), which starts at
        `origin` there, and the names of the repairs made inside it. What was added inside is
        counted there, or, when the rest of the copy is shorter (a payload ending its text),
        counted after it and taken from what was added in all."""
        size = len(self.text)
        if size - end < end - start:
            added = (size - len(self.original) - (start - origin)) - self._added(end, size)
        else:
            added = self._added(start, end)
        if self.python:
            repairs: tuple[str, ...] = ("python_dict_literal",)
        else:  # a JSON copy adds only the MARK after each name
            commas = bisect_left(self.commas, end) - bisect_left(self.commas, start)
            repairs = (("python_literals",) if added else ()) + (
                ("trailing_comma",) if commas else ())
        return end - start - added, repairs


@dataclass(frozen=True)
class _Read:
    """A value read in a repaired copy: its repaired text (`text[start:end]`), its value once
    decoded (else UNKNOWN), and the names of the repairs it took."""

    text: str
    start: int
    end: int
    value: Any
    repairs: tuple[str, ...]


class RepairedSpans:
    """The values of one document that the decoders read only repaired, each read once in a
    repaired copy of the document (one per style, made when a value first needs it), on the
    document's budget: each repair costs one of its patches, each decoder error met one of its
    decoder failures."""

    def __init__(self, text: str, budget: Budget) -> None:
        self.text = text
        self._budget = budget
        self._copies: dict[bool, _Copy | None] = {}
        self._reads: dict[int, _Read] = {}  # by the value's start in the document
        self._by_length: dict[int, list[int]] = {}  # the starts of the values read, by length

    def end(self, start: int, python: bool) -> int | Unknown | None:
        """End (exclusive) of the value opening at `start`, read in the repaired copy; None when
        the repaired value never closes; UNKNOWN when the repairs do not read it (an error
        they do not make, a document they cannot copy, the budget spent)."""
        if python not in self._copies:
            self._copies[python] = _Copy.of(self.text, python)
        copy = self._copies[python]
        budget = self._budget
        if copy is None or budget.decoder_failures <= 0:
            return UNKNOWN
        at = copy.position(start)
        width = 4_096
        while True:
            end, value, error, width = strict_read(copy.text, at, width)
            if error is None:
                break
            budget.decoder_failures -= 1
            if budget.patches <= 0 or budget.decoder_failures <= 0:
                return UNKNOWN
            words = len(copy.repaired.words)
            if copy.fix(*error) is None:
                return UNKNOWN
            budget.patches -= 1
            if len(copy.repaired.words) != words:
                at = copy.position(start)
        if end is None:
            return None
        length, repairs = copy.span(at, end, start)
        if value is not UNKNOWN and has_long_digit_run(copy.text[at:end]):
            value = UNKNOWN  # read again by exact_json.loads, which keeps such integers exact
        self._reads[start] = _Read(copy.text, at, end, value, repairs)
        self._by_length.setdefault(length, []).append(start)
        return start + length

    def value(self, payload: str) -> tuple[Any, tuple[str, ...]] | None:
        """What repair.loads_repaired gives for `payload` when it is the text of a value read
        here: its value, decoded from the repaired copy (once), and the repairs' names."""
        for start in self._by_length.get(len(payload), ()):
            if self.text.startswith(payload, start):
                read = self._reads[start]
                if read.value is not UNKNOWN:
                    return read.value, read.repairs
                try:
                    return loads(read.text[read.start:read.end]), read.repairs
                except orjson.JSONDecodeError:
                    return None
        return None
