"""Where markers occur in one text: each format's trigger markers, found in one pass.

Markers are searched from an anchor character that is rare in prose; a character's positions
are listed once (str.find, memchr speed) and each marker's positions derived from them. Where
an anchor character is too common to list (pathological text), markers are searched for by
str.find, or together by one regex, whichever costs less.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

# Characters a marker is searched from, preferred first: rare in prose (and, the first ones,
# shared by many markers, so that one search finds them all). The regex engine and str.find
# scan at C speed to a rare character; a common one (a letter, a space, a quote) would cost
# an attempt every few characters.
_ANCHORS = "<[|`={\\~^_:/;"


@lru_cache(maxsize=1024)
def _anchor(marker: str) -> int:
    """Index of the character `marker` is searched from: the first preferred one it holds,
    else its first non-ASCII character, else its first punctuation, else its first."""
    for char in _ANCHORS:
        if char in marker:
            return marker.index(char)
    return next((i for i, char in enumerate(marker) if not char.isascii()),
                next((i for i, char in enumerate(marker)
                      if not char.isalnum() and not char.isspace() and char not in "\"'"), 0))


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


class _Group(NamedTuple):
    """Markers of one anchor character: the character, the markers, and the (anchor index,
    length) pairs among them, which say the slices of text around an anchor that can be one."""

    char: str
    markers: frozenset[str]
    shapes: tuple[tuple[int, int], ...]


@lru_cache(maxsize=64)
def _anchored(markers: frozenset[str]) -> tuple[_Group, ...]:
    """`markers` longer than one character grouped by anchor character: made once per set
    of markers (every document is searched for its formats'), so that a character absent
    from a text costs one search for all its markers."""
    groups: dict[str, list[str]] = {}
    for marker in sorted(markers):
        if len(marker) > 1:
            groups.setdefault(marker[_anchor(marker)], []).append(marker)
    return tuple(_Group(char, frozenset(group),
                        tuple(sorted({(_anchor(marker), len(marker)) for marker in group})))
                 for char, group in groups.items())


@lru_cache(maxsize=64)
def _singles(markers: frozenset[str]) -> tuple[str, ...]:
    """The markers of one character (searched for as they are)."""
    return tuple(sorted(marker for marker in markers if len(marker) == 1))


def markers_present(text: str, markers: frozenset[str]) -> frozenset[str]:
    """Which of `markers` occur in `text`.

    A regex attempt costs about as much as 100 characters of a substring search, so markers
    are looked for together (one search per anchor character, resuming where the last found
    marker was, without the markers found so far) only where their anchor character is rare;
    where it is common (pathological text), and for groups of a few markers, each is looked
    for on its own by str.find, whose cost does not depend on what the text holds."""
    ascii_only = text.isascii()  # O(1): then a marker with other characters cannot occur
    found = {m for m in markers if len(m) == 1 and m in text}
    occurs = _CharsOccur(text)
    for group in _by_anchor(frozenset(m for m in markers if len(m) > 1)):
        remaining = {m for m in group if (m.isascii() or not ascii_only) and occurs.all(m)}
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


class _CharsOccur:
    """Which characters occur in one text, each found once by a one-character search (memchr
    speed, and it stops at the first occurrence): a marker one of whose characters does not
    occur is not searched for at all (a search for a longer string costs about a millisecond
    per megabyte, found or not)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._known: dict[str, bool] = {}

    def all(self, marker: str) -> bool:
        """Whether every character of `marker` occurs in the text."""
        known = self._known
        for char in marker:
            occurs = known.get(char)
            if occurs is None:
                occurs = known[char] = char in self._text
            if not occurs:
                return False
        return True


# Anchors that prose is full of (a marker holds no rarer character): not listed, their
# markers are searched for (see MarkerIndex._present); letters and digits likewise.
_PROSE_CHARS = "\"' "
# A long text's first this many characters tell whether a character is too common to list.
_SAMPLE = 65_536
# Groups of this many markers or fewer are searched marker by marker.
_ALONE_UP_TO = 3
# A regex attempt at an anchor character, in characters of str.find (measured: ~25 ns vs ~0.25).
_ATTEMPT_COST = 100


def _anchor_char(group: frozenset[str]) -> str:
    marker = next(iter(group))
    return marker[_anchor(marker)]


@lru_cache(maxsize=64)
def _anchor_groups(markers: frozenset[str]) -> tuple[tuple[str, frozenset[str]], ...]:
    """`_by_anchor(markers)`, each group with its anchor character, in the same order."""
    return tuple((_anchor_char(group), group) for group in _by_anchor(markers))


# A group of more markers than _ALONE_UP_TO is searched for in the windows around its anchor
# character's positions in a short text, if those are at most this many (else in the text).
_WINDOWS_UP_TO = 16
_SEPARATOR = "\x00"  # between windows: in no marker, so none is found across two


@lru_cache(maxsize=64)
def _short_groups(markers: frozenset[str],
                  ) -> tuple[tuple[str, frozenset[str], tuple[int, int] | None], ...]:
    """`_anchor_groups(markers)`, each with the window around an anchor that holds every
    occurrence of its markers there (characters before it, characters from it on), or None
    when the group is searched for in the whole text."""
    groups = []
    for char, group in _anchor_groups(markers):
        window = None
        if len(group) > _ALONE_UP_TO and not any(_SEPARATOR in m for m in group):
            window = (max(_anchor(m) for m in group),
                      max(len(m) - _anchor(m) for m in group))
        groups.append((char, group, window))
    return tuple(groups)


def _windows(text: str, char: str, before: int, after: int) -> str | None:
    """The windows of text around every position of `char` (str.find, memchr speed),
    joined by the separator; None when there are more than _WINDOWS_UP_TO."""
    find = text.find
    pieces: list[str] = []
    pos = find(char)
    while pos >= 0:
        if len(pieces) == _WINDOWS_UP_TO:
            return None
        pieces.append(text[pos - before if pos > before else 0:pos + after])
        pos = find(char, pos + 1)
    return _SEPARATOR.join(pieces)


def _present_short(text: str, markers: frozenset[str]) -> frozenset[str]:
    """Which of `markers` occur in a short text: a group whose anchor character is absent is
    not looked for; a large group is looked for in the windows around its anchor's few
    positions (a search of a kilobyte per marker costs more than listing them)."""
    present: list[str] = []
    for char, group, window in _short_groups(markers):
        if char not in text:
            continue
        around = None if window is None else _windows(text, char, *window)
        within = text if around is None else around
        present.extend(m for m in group if m in within)
    return frozenset(present)


class MarkerIndex:
    """Which of the formats' markers occur in one text, and where each marker stands
    (memoised per anchor character and per marker)."""

    # Shorter texts are searched one marker at a time (a faster start on a few kilobytes).
    COMBINED_SEARCH_FROM = 8_192
    # A marker's anchor character is listed (str.find, memchr speed) up to this many times, plus
    # one per 2048 characters; a character more common than that (pathological text, code full
    # of `<` or `=`) is not listed, and its markers are searched for by str.find or regex.
    ANCHOR_HITS = 64

    def __init__(self, text: str, markers: frozenset[str]) -> None:
        self.text = text
        self.markers = markers  # the formats' trigger markers, all looked for at once
        self._hits: dict[str, list[int] | None] = {}
        self._occurrences: dict[str, list[int] | None] = {}
        self._other: dict[str, bool] = {}
        self._counts: dict[str, int] = {}
        self._chars = _CharsOccur(text)  # a marker with a character the text lacks is absent
        self._anchor_limit = self.ANCHOR_HITS + len(text) // 2048
        if len(text) > self.COMBINED_SEARCH_FROM:
            self.present = self._present(markers)
        else:  # a group whose anchor character is absent is not looked for at all
            self.present = _present_short(text, markers)

    def _anchor_hits(self, char: str) -> list[int] | None:
        """Every position of `char`, found by str.find (memchr speed); None when the
        character is too common to list (then markers are searched the slow way)."""
        if char in self._hits:
            return self._hits[char]
        text = self.text
        limit = self._anchor_limit
        if len(text) > 4 * _SAMPLE and text.count(char, 0, _SAMPLE) * len(text) > \
                2 * limit * _SAMPLE:
            self._hits[char] = None  # common in the first 64 KB: not worth listing
            return None
        find = text.find
        hits: list[int] = []
        pos = find(char)
        while pos >= 0:
            if len(hits) >= limit:
                self._hits[char] = None
                return None
            hits.append(pos)
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
        combined search (`markers_present`) where an anchor is too common to list. A marker
        whose anchor is a character of prose (a quote, a letter: `"name"`) is searched for by
        str.find, which costs less than listing a character that is seldom few."""
        text = self.text
        present = {m for m in _singles(markers) if m in text}
        unlisted: set[str] = set()
        for char, group, shapes in _anchored(markers):
            if char in _PROSE_CHARS or char.isalnum():  # (a character it holds may not occur:
                # `"name"` in prose without a quote costs 0.6 ms a megabyte, its quote 0.01)
                occurs = self._chars.all
                present.update(marker for marker in group if occurs(marker) and marker in text)
                continue
            hits = self._anchor_hits(char)
            if hits is None:
                unlisted |= group
            elif hits:  # the slices around its anchors that are markers (none: none is)
                present |= group.intersection([text[pos - i:pos - i + size] for pos in hits
                                               for i, size in shapes if pos >= i])
        if unlisted:
            present |= markers_present(text, frozenset(unlisted))
        return frozenset(present)

    def has(self, marker: str) -> bool:
        """Whether `marker` occurs in the text (known for the document's markers, memoised
        for any other)."""
        if marker in self.markers:
            return marker in self.present
        known = self._other.get(marker)
        if known is None:
            found = None  # a short text or marker: searched for
            if len(marker) > 1 and len(self.text) > self.COMBINED_SEARCH_FROM:
                found = self.occurrences(marker) if self._chars.all(marker) else []
            known = self._other[marker] = bool(found) if found is not None else (
                marker in self.text)
        return known

    def count(self, marker: str) -> int:
        """How many times `marker` occurs (memoised)."""
        count = self._counts.get(marker)
        if count is None:
            listed = self.occurrences(marker) if len(marker) > 1 else None
            count = len(listed) if listed is not None else self.text.count(marker)
            self._counts[marker] = count
        return count

    def next_start(self, markers: list[str], offset: int) -> Callable[[int], int]:
        """A function giving the first position at or after its argument where one of
        `markers` (all present) stands `offset` characters in, or -1: by the listed positions
        where every marker's are listed, else by str.find."""
        listed = [self.occurrences(m) for m in markers]
        if all(found is not None for found in listed):
            starts = sorted({p - offset for found in listed for p in found or ()})

            def listed_start(at: int) -> int:
                i = bisect_left(starts, at)
                return starts[i] if i < len(starts) else -1
            return listed_start
        find = self.text.find

        def found_start(at: int) -> int:
            found = [p - offset for m in markers if (p := find(m, at + offset)) >= 0]
            return min(found) if found else -1
        return found_start
