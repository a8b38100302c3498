"""One model output as every parser reads it: the text, where markers stand, the spans frames
have taken, JSON spans, and the budget that keeps all of it linear."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..names import ToolNames
from ..repair import loads_repaired
from .budget import Budget
from .json_spans import JsonSpans
from .markers import MarkerIndex
from .spans import Spans


class Document:
    """Model text plus memoised scans, shared by every parser that reads it.

    A JSON span is found by bracket balance alone (string-aware, so a `}` or a closing tag
    inside a string does not end it); its content is validated later. Scans are memoised per
    opening bracket and bounded by the document's budget, so that pathological inputs
    (`<tool_call>{` repeated, a megabyte of unbalanced braces) stay linear and fast: past the
    budget a span is simply not found, and its text stays text.
    """

    # A marker written more often than this is not a response's tool calls but pathological
    # text: its format is not scanned at all (one count instead of an attempt at each).
    MAX_OCCURRENCES = 25_000

    def __init__(self, text: str, markers: frozenset[str] = frozenset(),
                 tools: frozenset[str] = frozenset(),
                 schemas: Mapping[str, Any] | None = None, names: ToolNames | None = None,
                 ) -> None:
        self.text = text
        self.tools = tools  # the request's function names, for formats that mangle them
        # Those names' index (names.py), made once for every reader of the text: the engine's
        # checks and the formats that look a written name up (given: a reader's own).
        self.names = ToolNames(tools) if names is None else names
        # The tools' parameter schemas, for formats whose nested values are text (MiniMax-M3)
        self.schemas: Mapping[str, Any] = {} if schemas is None else schemas
        self.budget = Budget(len(text))
        self.index = MarkerIndex(text, markers)
        self.present = self.index.present  # which of `markers` occur
        # Whether a marker occurs in the text: the index's own look-up, bound here (every
        # format asks, a few times each, and a call through a method of ours costs as much).
        self.has: Callable[[str], bool] = self.index.has
        # Spans frames have taken (this format's so far, and earlier formats'): a format's
        # openers inside them are not looked at (each would cost a regex attempt, and a frame
        # there would be dropped as overlapping anyway).
        self.claimed = Spans()
        self._json = JsonSpans(text, self.budget)
        # Per marker tuple and offset, finditer's start finder (None: nothing to scan), made
        # once for the formats that share one (`<tool_call>` opens five formats' frames).
        self._starts: dict[tuple[tuple[str, ...], int], Callable[[int], int] | None] = {}

    @property
    def budget_exhausted(self) -> bool:
        """Whether some scan stopped short for want of budget (its text stayed text)."""
        return self.budget.exhausted

    def spend(self) -> bool:
        """Take one candidate from the budget; False (and marked exhausted) when none is left."""
        return self.budget.spend()

    def occurrences(self, marker: str) -> list[int] | None:
        """The sorted start positions of `marker`; None when its anchor character is too
        common to list (pathological text)."""
        return self.index.occurrences(marker)

    def crowded(self, marker: str) -> bool:
        """Whether `marker` occurs too often to scan for (marked as an exhausted budget); not
        counted in a text too short to hold that many."""
        if len(self.text) > self.MAX_OCCURRENCES and self.index.count(marker) > \
                self.MAX_OCCURRENCES:
            self.budget.exhausted = True
            return True
        return False

    def finditer(self, pattern: re.Pattern[str], marker: str | tuple[str, ...],
                 pos: int = 0, offset: int = 0) -> Iterator[re.Match[str]]:
        """`pattern`'s matches from `pos` outside claimed spans, while the budget lasts.

        Every match starts with `marker` (or one of several) `offset` characters in, so the
        pattern is tried only where a marker is (see MarkerIndex.next_start). Each attempt
        that fails costs one of the budget's failed attempts; a match, one candidate. A
        crowded marker is not scanned at all.
        """
        next_start = self._start_finder((marker,) if isinstance(marker, str) else marker, offset)
        if next_start is None:
            return
        text, claimed, budget = self.text, self.claimed, self.budget
        while (start := next_start(pos)) >= 0:
            taken_until = claimed.end_of(start)
            if taken_until is not None:  # inside a frame: resume after it
                pos = taken_until
                continue
            match = pattern.match(text, start)
            if match is None:
                if not budget.fail_attempt():
                    return
                pos = start + 1
                continue
            if not budget.spend():
                return
            yield match
            pos = max(match.end(), start + 1)

    def _start_finder(self, markers: tuple[str, ...], offset: int,
                      ) -> Callable[[int], int] | None:
        """finditer's finder of the next start at which one of `markers` stands `offset`
        characters in (see MarkerIndex.next_start), memoised; None when none of them occurs
        or one is crowded (which marks the budget exhausted, once and for good)."""
        key = (markers, offset)
        if key in self._starts:
            return self._starts[key]
        present = [m for m in markers if self.has(m)]
        found = None
        if present and not any(self.crowded(m) for m in present):
            found = self.index.next_start(present, offset)
        self._starts[key] = found
        return found

    def json_end(self, start: int) -> int | None:
        """End (exclusive) of the balanced JSON value opening at `start`, or None (see
        JsonSpans.end)."""
        return self._json.end(start)

    def loads_repaired(self, payload: str) -> tuple[Any, tuple[str, ...]]:
        """repair.loads_repaired(payload): for the text of a value this document's scan read
        in its repaired copy (a large value needing repairs), the value decoded from there,
        without repairing and decoding the payload again."""
        found = self._json.repaired.value(payload)
        return found if found is not None else loads_repaired(payload)

    def skip_space(self, pos: int, end: int | None = None) -> int:
        """First position at or after `pos` (and before `end`, default the end of the text)
        that is not whitespace; `end` when there is none. Bounding the search matters to a
        caller that walks lines: unbounded, a blank line would cost the whole whitespace run
        after it (a megabyte of trailing newlines, line by line, is quadratic)."""
        text = self.text
        stop = len(text) if end is None else min(end, len(text))
        width = 64  # str.lstrip through doubling windows: 20 times the speed of a regex search
        while pos < stop:
            high = min(stop, pos + width)
            chunk = text[pos:high]
            kept = len(chunk.lstrip())
            if kept:
                return high - kept
            pos = high
            width *= 2
        return stop

    def space_before(self, pos: int) -> int:
        """Start of the whitespace run ending at `pos` (`pos` itself when none ends there)."""
        return space_before(self.text, pos)


def space_before(text: str, pos: int) -> int:
    """Start of the whitespace run ending at `pos` in `text` (`pos` itself when none ends
    there): `len(text[:pos].rstrip())`, looked at through doubling windows, so its cost is
    that run's length, not `pos`."""
    width = 64
    while True:
        low = max(0, pos - width)
        kept = len(text[low:pos].rstrip())
        if kept or low == 0:
            return low + kept
        width *= 2
