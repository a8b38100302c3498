"""Linear-time scanning of model text: balanced JSON spans, found without backtracking."""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from functools import lru_cache
from json.decoder import scanstring  # type: ignore[attr-defined]

# One scanning step: skip text and whole strings (raw newlines allowed: models emit them) up to
# the next bracket; group 1 is that bracket, or "" at the end, or `"` at a string with more
# than 32 escapes (or unterminated): the regex engine pays per escape, so such a string (a
# file's contents) is skipped by the C string decoder instead.
_NEXT_BRACKET = re.compile(r'(?:[^{}\[\]"]++|"[^"\\]*+(?:\\.[^"\\]*+){0,32}+")*+([{}\[\]]|"|\Z)',
                           re.DOTALL)
_STRING_REST = re.compile(r'(?:[^"\\]++|\\.)*+"', re.DOTALL)  # after the opening quote


# C-speed path for spans that are already JSON (raw control characters allowed).
_DECODER = json.JSONDecoder(strict=False)


# Characters a marker is searched from, preferred first: rare in prose, and shared by many
# markers (`<`), so that one search finds them all. The regex engine scans at C speed to a
# pattern's first literal character; a pattern starting with a choice of characters is ten
# times slower, hence one search per anchor character rather than one for all.
_ANCHORS = "<[|`="


@lru_cache(maxsize=1024)
def _anchor(marker: str) -> int:
    """Index of the character `marker` is searched from (the first preferred one, else its
    first non-ASCII character, else its first punctuation, else its first)."""
    for char in _ANCHORS:
        if char in marker:
            return marker.index(char)
    return next((i for i, char in enumerate(marker) if not char.isascii()),
                next((i for i, char in enumerate(marker) if not char.isalnum()), 0))


@lru_cache(maxsize=512)
def _markers_pattern(markers: frozenset[str]) -> re.Pattern[str]:
    """One regex finding any of `markers` (all anchored on the same character)."""
    pieces = []
    for marker in sorted(markers):
        i = _anchor(marker)
        behind = f"(?<={re.escape(marker[:i + 1])})" if i else ""
        pieces.append(behind + re.escape(marker[i + 1:]))
    return re.compile(re.escape(next(iter(markers))[_anchor(next(iter(markers)))])
                      + f"(?:{'|'.join(pieces)})")


@lru_cache(maxsize=64)
def _by_anchor(markers: frozenset[str]) -> tuple[frozenset[str], ...]:
    """`markers` grouped by anchor character."""
    groups: dict[str, set[str]] = {}
    for marker in markers:
        groups.setdefault(marker[_anchor(marker)], set()).add(marker)
    return tuple(frozenset(group) for group in groups.values())


def markers_present(text: str, markers: frozenset[str]) -> frozenset[str]:
    """Which of `markers` occur in `text`.

    A regex attempt costs about as much as 100 characters of a substring search, so markers
    are looked for together (one search per anchor character, resuming where the last found
    marker was, without the markers found so far) only where their anchor character is rare;
    where it is common (pathological text), and for groups of a few markers, each is looked
    for on its own by str.find, whose cost does not depend on what the text holds."""
    ascii_only = text.isascii()  # O(1): then a marker with other characters cannot occur
    found = {m for m in markers if len(m) == 1 and m in text}
    for group in _by_anchor(frozenset(m for m in markers if len(m) > 1)):
        remaining = {m for m in group if m.isascii() or not ascii_only}
        if len(remaining) <= _ALONE_UP_TO or (
                text.count(_anchor_char(group)) * _ATTEMPT_COST > len(text) * len(remaining)):
            found.update(m for m in remaining if m in text)
            continue
        pos = 0
        while remaining:
            match = _markers_pattern(frozenset(remaining)).search(text, pos)
            if match is None:
                break
            pos = match.start()
            hits = {m for m in remaining
                    if pos >= _anchor(m) and text.startswith(m, pos - _anchor(m))}
            found |= hits
            remaining -= hits
    return frozenset(found)


# Groups of this many markers or fewer are searched marker by marker.
_ALONE_UP_TO = 3
# A regex attempt at an anchor character, in characters of str.find (measured: ~25 ns vs ~0.25).
_ATTEMPT_COST = 100


def _anchor_char(group: frozenset[str]) -> str:
    marker = next(iter(group))
    return marker[_anchor(marker)]


class Spans:
    """Disjoint spans of the text, sorted: those frames have taken, so formats never overlap."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def overlaps(self, start: int, end: int) -> bool:
        """Whether [start, end) (at least one character) meets any span."""
        i = bisect_right(self.starts, start)
        if i > 0 and self.ends[i - 1] > start:
            return True
        return i < len(self.starts) and self.starts[i] < max(end, start + 1)

    def end_of(self, pos: int) -> int | None:
        """The end of the span holding `pos`, or None."""
        i = bisect_right(self.starts, pos)
        return self.ends[i - 1] if i > 0 and self.ends[i - 1] > pos else None

    def add(self, start: int, end: int) -> None:
        """Add a span that overlaps none already held."""
        i = bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)

    def add_all(self, spans: list[tuple[int, int]]) -> None:
        """Add spans that overlap none already held (nor each other)."""
        for start, end in spans:
            self.add(start, end)


class Document:
    """Model text plus memoised scans, shared by every parser that reads it.

    A JSON span is found by bracket balance alone (string-aware, so a `}` or a closing tag
    inside a string does not end it); its content is validated later. Scans are memoised per
    opening bracket and bounded by a budget of scanning steps, so that pathological inputs
    (`<tool_call>{` repeated, a megabyte of unbalanced braces) stay linear and fast: past the
    budget a span is simply not found, and its text stays text.
    """

    # How many candidate frames (opener matches, JSON lines …) one document may cost, across
    # all formats. Far above any real response; it caps Python work on megabytes of openers.
    MAX_CANDIDATES = 400
    # A marker written more often than this is not a response's tool calls but pathological
    # text: its format is not scanned at all (one count instead of an attempt at each).
    MAX_OCCURRENCES = 25_000
    # How many marker occurrences one document may try a pattern at and find no frame, across
    # all formats (pathological text under MAX_OCCURRENCES); markers inside frames already
    # taken cost nothing.
    MAX_FAILED_ATTEMPTS = 2_048
    # Shorter texts are searched one marker at a time (a faster start on a few kilobytes).
    COMBINED_SEARCH_FROM = 8_192
    # A marker's anchor character is listed (str.find, memchr speed) up to this many times, plus
    # one per 2048 characters; a character more common than that (pathological text, code full
    # of `<` or `=`) is not listed, and its markers are searched for by str.find or regex.
    ANCHOR_HITS = 64

    def __init__(self, text: str, markers: frozenset[str] = frozenset()) -> None:
        self.text = text
        self.markers = markers  # the formats' trigger markers, all looked for at once
        self._hits: dict[str, list[int] | None] = {}
        self._occurrences: dict[str, list[int] | None] = {}
        self._anchor_limit = self.ANCHOR_HITS + len(text) // 2048
        if len(text) > self.COMBINED_SEARCH_FROM:
            self.present = self._present(markers)
        else:
            self.present = frozenset(m for m in markers if m in text)
        self._other: dict[str, bool] = {}
        # Spans frames have taken (this format's so far, and earlier formats'): a format's
        # openers inside them are not looked at (each would cost a regex attempt, and a frame
        # there would be dropped as overlapping anyway).
        self.claimed = Spans()
        self._ends: dict[int, int | None] = {}
        self._budget = 2_000 + len(text) // 512
        self._candidates = self.MAX_CANDIDATES
        self._attempts_left = self.MAX_FAILED_ATTEMPTS
        self._counts: dict[str, int] = {}
        self._decoder_failures_left = 32
        self._string_failures_left = 32
        self.budget_exhausted = False

    def spend(self) -> bool:
        """Take one candidate from the budget; False (and marked exhausted) when none is left."""
        if self._candidates <= 0:
            self.budget_exhausted = True
            return False
        self._candidates -= 1
        return True

    def _anchor_hits(self, char: str) -> list[int] | None:
        """Every position of `char`, found by str.find (memchr speed); None when the
        character is too common to list (then markers are searched the slow way)."""
        if char in self._hits:
            return self._hits[char]
        find = self.text.find
        hits: list[int] | None = []
        limit = self._anchor_limit
        pos = find(char)
        while pos >= 0:
            if len(hits) >= limit:  # type: ignore[arg-type]
                hits = None
                break
            hits.append(pos)  # type: ignore[union-attr]
            pos = find(char, pos + 1)
        self._hits[char] = hits
        return hits

    def occurrences(self, marker: str) -> list[int] | None:
        """The sorted start positions of `marker`, from the positions of its anchor character;
        None when that character is too common to list (pathological text)."""
        if marker in self._occurrences:
            return self._occurrences[marker]
        i = _anchor(marker)
        hits = self._anchor_hits(marker[i])
        found = None
        if hits is not None:
            starts = self.text.startswith
            found = [pos - i for pos in hits if pos >= i and starts(marker, pos - i)]
        self._occurrences[marker] = found
        return found

    def _present(self, markers: frozenset[str]) -> frozenset[str]:
        """Which of `markers` occur: by their anchors' positions where those are few, by the
        combined search (`markers_present`) where an anchor is too common to list."""
        present = {m for m in markers if len(m) == 1 and m in self.text}
        unlisted = set()
        for marker in markers:
            if len(marker) > 1:
                found = self.occurrences(marker)
                if found is None:
                    unlisted.add(marker)
                elif found:
                    present.add(marker)
        if unlisted:
            present |= markers_present(self.text, frozenset(unlisted))
        return frozenset(present)

    def has(self, marker: str) -> bool:
        """Whether `marker` occurs in the text (known for the document's markers, memoised
        for any other)."""
        if marker in self.markers:
            return marker in self.present
        known = self._other.get(marker)
        if known is None:
            found = (self.occurrences(marker)
                     if len(marker) > 1 and len(self.text) > self.COMBINED_SEARCH_FROM else None)
            known = self._other[marker] = bool(found) if found is not None else (
                marker in self.text)
        return known

    def crowded(self, marker: str) -> bool:
        """Whether `marker` occurs too often to scan for (marked as an exhausted budget)."""
        count = self._counts.get(marker)
        if count is None:
            listed = self.occurrences(marker) if len(marker) > 1 else None
            count = len(listed) if listed is not None else self.text.count(marker)
            self._counts[marker] = count
        if count > self.MAX_OCCURRENCES:
            self.budget_exhausted = True
            return True
        return False

    def finditer(self, pattern: re.Pattern[str], marker: str | tuple[str, ...],
                 pos: int = 0, offset: int = 0) -> Iterator[re.Match[str]]:
        """`pattern`'s matches from `pos` outside claimed spans, while the budgets last.

        Every match starts with `marker` (or one of several) `offset` characters in, so the
        pattern is tried only where a marker is: at the positions listed from its anchor
        character, or (an anchor too common to list) at each found by str.find in turn. Each
        attempt that fails costs one of the document's attempts; a match, one candidate. A
        crowded marker is not scanned at all.
        """
        markers = (marker,) if isinstance(marker, str) else marker
        present = [m for m in markers if self.has(m)]
        if not present or any(self.crowded(m) for m in present):
            return
        listed = [self.occurrences(m) for m in present]
        if all(found is not None for found in listed):
            starts = sorted({p - offset for found in listed for p in found or ()})

            def next_start(at: int) -> int:
                i = bisect_left(starts, at)
                return starts[i] if i < len(starts) else -1
        else:
            find = self.text.find

            def next_start(at: int) -> int:
                found = [p - offset for m in present if (p := find(m, at + offset)) >= 0]
                return min(found) if found else -1

        text, claimed = self.text, self.claimed
        while (start := next_start(pos)) >= 0:
            taken_until = claimed.end_of(start)
            if taken_until is not None:  # inside a frame: resume after it
                pos = taken_until
                continue
            match = pattern.match(text, start)
            if match is None:
                if self._attempts_left <= 0:
                    self.budget_exhausted = True
                    return
                self._attempts_left -= 1
                pos = start + 1
                continue
            if not self.spend():
                return
            yield match
            pos = max(match.end(), start + 1)

    def json_end(self, start: int) -> int | None:
        """End (exclusive) of the balanced JSON value opening at `start`, or None.

        The C decoder is tried first (fast on valid JSON, raw control characters allowed);
        its failures are capped per document, because each one costs time in proportion to
        the text before it (the error's line number). Then the bracket scanner, on a budget.
        """
        if start in self._ends:
            return self._ends[start]
        text = self.text
        if start >= len(text) or text[start] not in "{[":
            return None
        if self._decoder_failures_left > 0:
            try:
                end: int = _DECODER.raw_decode(text, start)[1]
            except (ValueError, RecursionError):
                self._decoder_failures_left -= 1
            else:
                self._ends[start] = end
                return end
        stack = [start]
        pos = start + 1
        result: int | None = None
        ends = self._ends
        while True:
            if self._budget <= 0:
                self.budget_exhausted = True
                break
            self._budget -= 1
            step = _NEXT_BRACKET.match(text, pos)
            char = step.group(1)  # the pattern always matches, ending at a bracket or the end
            pos = step.end()
            while char == '"':  # a long string (or an unterminated one)
                string_end = self._string_end(pos)
                if string_end is None:
                    break
                step = _NEXT_BRACKET.match(text, string_end)
                char, pos = step.group(1), step.end()
            if char in ('"', ""):
                break  # an unterminated string, or the end of the text
            if char in "{[":
                if pos - 1 in ends:  # already known from an earlier scan
                    known = ends[pos - 1]
                    if known is None:
                        break
                    pos = known
                    continue
                stack.append(pos - 1)
                continue
            opener = stack.pop()
            if (text[opener] == "{") != (char == "}"):
                stack.append(opener)
                break
            ends[opener] = pos
            if not stack:
                result = pos
                break
        if not self.budget_exhausted:
            for opener in stack:  # a bracket still open fails the same way from its own start
                self._ends[opener] = None
        if result is not None:
            self._ends[start] = result
        return result

    def _string_end(self, pos: int) -> int | None:
        """End of the string whose content starts at `pos`, or None if it never closes: by the
        C decoder (its failures capped per document, as each one costs a count of the lines
        before it), else by the regex (any escaped character, as the step regex reads them)."""
        if self.text.find('"', pos) < 0:
            return None
        if self._string_failures_left > 0:
            try:
                return int(scanstring(self.text, pos, False)[1])
            except ValueError as error:  # an escape JSON does not define, or no closing quote
                if str(error).startswith("Unterminated string"):
                    return None
                self._string_failures_left -= 1
        rest = _STRING_REST.match(self.text, pos)
        return None if rest is None else rest.end()

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
        """Start of the whitespace run ending at `pos` (`pos` itself when none ends there).
        Looked at through doubling windows, so its cost is that run's length, not `pos`."""
        text = self.text
        width = 64
        while True:
            low = max(0, pos - width)
            kept = len(text[low:pos].rstrip())
            if kept or low == 0:
                return low + kept
            width *= 2
