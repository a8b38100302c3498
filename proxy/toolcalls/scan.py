"""Linear-time scanning of model text: balanced JSON spans, found without backtracking."""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from functools import lru_cache
from json.decoder import scanstring  # type: ignore[attr-defined]

import orjson

from .repair import PY_NAMES_AS_JSON


# One scanning step: skip text and whole strings (raw newlines allowed: models emit them) up to
# the next bracket; group 1 is that bracket, or a quote where a string is left to the string
# scanner (a long one, one with many escapes, or an unterminated one: the regex engine pays
# per character and per escape, str.find and the C string decoder far less), or "" where the
# step stopped (the end of the text, or a long run of plain text, left to str.find). Every
# repetition is bounded, so that a step never reads more than a few dozen kilobytes.
#
# The grouped step also skips a small balanced group (at most two levels deep: a row
# `{"id": 1, "tags": ["a"]}`) inside the step, so that a payload of thousands of rows costs a
# step per few dozen rows, not one per bracket. Trying a group that does not close costs a
# second reading of its start, so a scan takes the grouped step only once many groups have
# been seen to close and few are left open (real payloads), never on text that mostly opens
# them (pathological text).
def _step_pattern(quotes: str, grouped: bool) -> re.Pattern[str]:
    specials = r"{}\[\]" + quotes
    plain = f"[^{specials}]{{1,256}}+"
    strings = "|".join(f"{q}[^{q}\\\\]{{0,256}}+(?:\\\\.[^{q}\\\\]{{0,256}}+){{0,32}}+{q}"
                       for q in quotes)
    item = f"(?:{plain}|{strings})"
    if not grouped:
        return re.compile(f"{item}{{0,64}}+([{specials}]?)", re.DOTALL)
    flat = f"\\{{{item}{{0,64}}+\\}}|\\[{item}{{0,64}}+\\]"
    item1 = f"(?:{plain}|{strings}|{flat})"
    nested = f"\\{{{item1}{{0,64}}+\\}}|\\[{item1}{{0,64}}+\\]"
    return re.compile(f"(?:{plain}|{strings}|{nested}){{0,64}}+([{specials}]?)", re.DOTALL)


_NEXT_BRACKET = _step_pattern('"', False)
_NEXT_GROUPS = _step_pattern('"', True)
# The same for Python-literal payloads (`{'name': 'f', …}`): single-quoted strings are strings.
_NEXT_BRACKET_PY = _step_pattern("\"'", False)
_NEXT_GROUPS_PY = _step_pattern("\"'", True)
# A step that read this much without reaching a bracket stopped in a long run of plain text,
# which str.find crosses far faster than the regex engine.
_LONG_STEP = 8_192
# Groups a scan sees close before it takes the grouped step (and eight per group left open).
_CLOSES_BEFORE_GROUPS = 16
_STRING_REST = re.compile(r'(?:[^"\\]++|\\.)*+"', re.DOTALL)  # after the opening quote
_SINGLE_REST = re.compile(r"(?:[^'\\]++|\\.)*+'", re.DOTALL)
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


_UNKNOWN = object()  # what the decoders could not tell
_WINDOW = 4_096
# Up to this window the stdlib decoder reads (no exception when a value is followed by text,
# and raw control characters allowed); past it, orjson (eight times faster on a long value of
# numbers, and its exception's cost is nothing beside a window that long).
_STDLIB_WINDOW = 65_536
# An error this close to the end of a window may be the window's cut (`tr|ue`, `"\u00|e9"`).
_CUT_SLACK = 8


def _value_end(text: str, start: int) -> tuple[int | None, int | None]:
    """(end, None) of the JSON value opening at `start`, by the C decoders on windows of the
    text growing from a few kilobytes (so that a short value followed by a long text costs
    the value, not the text); (None, None) when the text ends inside a valid prefix of it
    (it never closes); (None, position) where the decoder finds it invalid. Raises
    RecursionError on a value nested deeper than the stdlib decoder reads."""
    width = _WINDOW
    size = len(text)
    lenient = False
    while True:
        stop = min(size, start + width)
        window = text[start:stop]
        cut = stop < size
        if width <= _STDLIB_WINDOW or lenient:
            try:
                return start + int(_DECODER.raw_decode(window)[1]), None
            except ValueError as error:
                at: int = getattr(error, "pos", 0)
                unterminated = str(error).startswith("Unterminated string")
        else:
            try:
                orjson.loads(window)
            except orjson.JSONDecodeError as error:
                if error.msg.startswith("unexpected content after document"):
                    return start + len(window[:error.pos].rstrip(" \t\n\r")), None
                if error.msg.startswith("unexpected control character"):
                    lenient = True  # raw control characters: the stdlib decoder reads them
                    continue
                at = error.pos
                unterminated = error.msg.startswith("unexpected end of data")
            else:
                return start + len(window.rstrip(" \t\n\r")), None
        if unterminated or at >= len(window) - (_CUT_SLACK if cut else 0):
            if not cut:
                return None, None
            width *= 8  # a long value: a few windows, each far longer than the last
            continue
        return None, start + at


# A payload in Python-literal style: brackets, then a single quote.
_PYTHON_STYLE = re.compile(r"[\[{][\s\[{]{0,32}+'")
_SPECIALS = '{}[]"'
_SPECIALS_PY = "{}[]\"'"


# C-speed path for spans that are already JSON (raw control characters allowed).
_DECODER = json.JSONDecoder(strict=False)


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


# A long text's first this many characters tell whether a character is too common to list.
_SAMPLE = 65_536
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
    # Steps json_end scans a value for before it decodes patched copies (see json_end).
    PROBE_STEPS = 64
    # How many patched copies json_end may decode for one value, and for one document (each
    # costs a copy of the text and a decoder run; see _patched_end).
    MAX_PATCHES = 4
    MAX_DOCUMENT_PATCHES = 16
    # Shorter texts are searched one marker at a time (a faster start on a few kilobytes).
    COMBINED_SEARCH_FROM = 8_192
    # A marker's anchor character is listed (str.find, memchr speed) up to this many times, plus
    # one per 2048 characters; a character more common than that (pathological text, code full
    # of `<` or `=`) is not listed, and its markers are searched for by str.find or regex.
    ANCHOR_HITS = 64

    def __init__(self, text: str, markers: frozenset[str] = frozenset(),
                 tools: frozenset[str] = frozenset()) -> None:
        self.text = text
        self.tools = tools  # the request's function names, for formats that mangle them
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
        self._py_ends: dict[int, int | None] = {}  # the same, for Python-literal payloads
        self._credited_to = 0  # text before this the decoder has read as valid JSON
        self._patches_left = self.MAX_DOCUMENT_PATCHES
        self._bulk: tuple[str | None] | None = None  # see _same_length_copy
        self._py_copy: str | None = None  # see _python_copy
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
        text = self.text
        limit = self._anchor_limit
        if len(text) > 4 * _SAMPLE and text.count(char, 0, _SAMPLE) * len(text) > \
                2 * limit * _SAMPLE:
            self._hits[char] = None  # common in the first 64 KB: not worth listing
            return None
        find = text.find
        hits: list[int] | None = []
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

        The C decoders are tried first: orjson on growing windows of the text (fast on valid
        JSON, and its errors cost only the window), then the stdlib decoder, which allows raw
        control characters (its failures are capped per document, because each one costs
        time in proportion to the text before it: the error's line number), then copies
        patched where the value needs a repair that moves no bracket (see _patched_end).
        Then the bracket scanner, on a budget; what the decoder read before it failed was
        valid JSON, and the budget grows with it (one step per 32 characters, each character
        credited once per document), so that a large payload is found while a pathological
        text, which fails the decoder at once, gains nothing. A payload in Python-literal
        style (`{'name': …`) is decoded in a copy with its quotes swapped (see _python_copy),
        and single-quoted strings are strings to the scanner.
        """
        python = _PYTHON_STYLE.match(self.text, start) is not None
        memo = self._py_ends if python else self._ends
        if start in memo:
            return memo[start]
        text = self.text
        if start >= len(text) or text[start] not in "{[":
            return None
        error_at = None
        if not python:  # valid JSON: read by the decoder at once
            decoded = self._decode(text, start)
            if decoded is not _UNKNOWN:
                end, error_at = decoded  # type: ignore[misc]
                if error_at is None:
                    memo[start] = end
                    return end
                self._credit(start, error_at)
        # A value the scanner crosses in a few steps (a list of numbers, a long string) costs
        # less scanned than decoded again; a value of many small groups is decoded.
        found = self._scan(start, python, memo, self.PROBE_STEPS)
        if found is not _UNKNOWN:
            return found  # type: ignore[return-value]
        end: object = _UNKNOWN
        if python:
            end = self._decoded_end(self._python_copy(), start, 0, 0)
        elif error_at is not None:
            end = self._patched_end(text, start, error_at, 0, 0)
        if end is not _UNKNOWN:
            memo[start] = end  # type: ignore[assignment]
            return end  # type: ignore[return-value]
        return self._scan(start, python, memo)  # type: ignore[return-value]

    def _decode(self, text: str, start: int) -> tuple[int | None, int | None] | object:
        """_value_end, or _UNKNOWN. Failures are capped per document: each one may have read
        a long valid prefix, which a call from another opener would read again."""
        if self._decoder_failures_left <= 0:
            return _UNKNOWN
        try:
            end, error_at = _value_end(text, start)
        except RecursionError:
            self._decoder_failures_left -= 1
            return _UNKNOWN
        if error_at is not None:
            self._decoder_failures_left -= 1
        return end, error_at

    def _decoded_end(self, text: str, start: int, shift: int, patches: int,
                     ) -> int | object | None:
        """The end of the value opening at `start` in `text` (a copy of the document with
        `patches` patches, which added `shift` characters before the end) by the C decoders:
        an end in the document's positions, None when the value never closes, or _UNKNOWN."""
        decoded = self._decode(text, start)
        if decoded is _UNKNOWN:
            return _UNKNOWN
        end, error_at = decoded  # type: ignore[misc]
        if error_at is None:
            return end if end is None else end - shift
        return self._patched_end(text, start, error_at, shift, patches)

    def _patched_end(self, text: str, start: int, error_at: int, shift: int, patches: int,
                     ) -> int | object | None:
        """The end json_end seeks, found by the C decoders on a copy of the text patched where
        they failed, when the failure is one the repairs make without moving a bracket or a
        string's end (Python's True/False/None, a trailing comma, a backslash that starts no
        JSON escape): then the patched value ends where the original's brackets balance,
        shifted by what the patches added. A few patches at most: a payload needing one or
        two repairs is found at C speed however many brackets it holds."""
        if patches >= self.MAX_PATCHES or self._patches_left <= 0:
            return _UNKNOWN
        fix = _local_fix(text, start, error_at)
        if fix is None:
            return _UNKNOWN
        if text is self.text and fix[2] != "\\\\":  # a name or a comma: all of them at once
            bulk = self._same_length_copy()
            if bulk is not None:
                self._patches_left -= 1
                return self._decoded_end(bulk, start, shift, patches + 1)
        self._patches_left -= 1
        cut, stop, replacement = fix
        patched = text[:cut] + replacement + text[stop:]
        return self._decoded_end(patched, start, shift + len(replacement) - (stop - cut),
                                 patches + 1)

    def _same_length_copy(self) -> str | None:
        """The document with every True/False/None spelled as JSON and every `,]`/`,}` comma
        made a space: the same length, and the same quotes, backslashes and brackets, so every
        value's brackets balance where the original's do (inside a string, the change is
        only content). Made once per document, for payloads with such a repair in many rows;
        None when there is nothing to change, or so much that the text is not a payload needing
        repairs but a flood of them (decoding it would cost more than the scanner's budget)."""
        if self._bulk is None:
            pairs = (*PY_NAMES_AS_JSON.items(), (",]", " ]"), (",}", " }"))
            count = sum(self.text.count(old) for old, _ in pairs)
            bulk = self.text
            if 0 < count <= 64 + len(self.text) // 16:  # a repair per row, not per value
                for old, new in pairs:
                    bulk = bulk.replace(old, new)
            self._bulk = (bulk,) if bulk is not self.text else (None,)
        return self._bulk[0]

    def _python_copy(self) -> str:
        """The document with single and double quotes swapped, and the changes of
        _same_length_copy: a Python literal whose strings are all single-quoted (the style
        models write) reads there as JSON, with its brackets where the original's balance
        (a `"` inside such a string becomes `'`, only content). Any other style fails to
        decode, and the bracket scanner reads it. Made once per document."""
        if self._py_copy is None:
            self._py_copy = (self._same_length_copy() or self.text).translate(_SWAP_QUOTES)
        return self._py_copy

    def _credit(self, start: int, valid_to: int) -> None:
        """Budget for text the decoder has read as valid JSON, each character once."""
        fresh = valid_to - max(start, self._credited_to)
        if fresh > 0:
            self._budget += fresh // 32
            self._credited_to = valid_to

    def _scan(self, start: int, python: bool, memo: dict[int, int | None],
              limit: int | None = None) -> int | object | None:
        """The bracket scanner of json_end (see _step_pattern), memoising every group it
        closes and, unless the budget ran out, every bracket it leaves open. With `limit`,
        a probe: _UNKNOWN when the value takes more steps than that (charged to the budget
        all the same), and nothing is marked."""
        text = self.text
        size = len(text)
        step_at = (_NEXT_BRACKET_PY if python else _NEXT_BRACKET).match
        grouped = (_NEXT_GROUPS_PY if python else _NEXT_GROUPS).match
        closes = 0  # groups closed: many, and few left open, make a payload of rows
        specials = _SPECIALS_PY if python else _SPECIALS
        stack = [start]
        pos = start + 1
        result: int | None = None
        budget = self._budget
        floor = 0 if limit is None else max(0, budget - limit)
        while True:
            if budget <= floor:
                if floor:  # the probe's end, not the budget's
                    self._budget = budget
                    return _UNKNOWN
                self.budget_exhausted = True
                break
            step = step_at(text, pos)
            char = step.group(1)
            end = step.end()
            budget -= 1 if step_at is not grouped else 1 + ((end - pos) >> 6)  # by groups
            start_of_step, pos = pos, end
            if not char:
                if pos >= size:
                    break  # the end of the text
                if end - start_of_step >= _LONG_STEP:  # within a long run of plain text
                    pos = self._next_special(pos, specials)
                continue
            if char == '"' or char == "'":  # a string the step left to us
                string_end = self._string_end(pos) if char == '"' else self._single_end(pos)
                if string_end is None:
                    break  # unterminated
                pos = string_end
                continue
            if char in "{[":
                if pos - 1 in memo:  # already known from an earlier scan
                    known = memo[pos - 1]
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
            memo[opener] = pos
            if not stack:
                result = pos
                break
            closes += 1
            if closes >= _CLOSES_BEFORE_GROUPS and closes >= 8 * len(stack):
                step_at = grouped  # a payload of groups: skip them by the dozen
        self._budget = budget
        if not self.budget_exhausted:
            for opener in stack:  # a bracket still open fails the same way from its own start
                memo[opener] = None
        if result is not None:
            memo[start] = result
        return result

    def _next_special(self, pos: int, specials: str) -> int:
        """The next bracket or quote at or after `pos` (or the end of the text), found by
        str.find through doubling windows: the cost is the distance, at memchr speed."""
        text, find = self.text, self.text.find
        width = 4_096
        while pos < len(text):
            high = min(len(text), pos + width)
            found = [at for char in specials if (at := find(char, pos, high)) >= 0]
            if found:
                return min(found)
            pos = high
            width *= 2
        return len(text)

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
        return self._quoted_end(pos, '"', _STRING_REST)

    def _single_end(self, pos: int) -> int | None:
        """End of the single-quoted string whose content starts at `pos`, or None: by the C
        string decoder on the copy with quotes swapped (see _python_copy), where it is a
        double-quoted string of the same length, else by str.find."""
        if self._string_failures_left > 0:
            try:
                return int(scanstring(self._python_copy(), pos, False)[1])
            except ValueError as error:
                if str(error).startswith("Unterminated string"):
                    return None
                self._string_failures_left -= 1
        return self._quoted_end(pos, "'", _SINGLE_REST)

    def _quoted_end(self, pos: int, quote: str, rest: re.Pattern[str]) -> int | None:
        """End of the string whose content starts at `pos`: the next `quote` after an even run
        of backslashes (any escaped character, as the step regex reads them), by str.find;
        by the regex `rest` past a few escaped quotes or a long run of backslashes."""
        text = self.text
        at = pos
        for _ in range(32):
            found = text.find(quote, at)
            if found < 0:
                return None
            run = 0
            while run < 64 and found - 1 - run >= pos and text[found - 1 - run] == "\\":
                run += 1
            if run == 64:
                break
            if run % 2 == 0:
                return found + 1
            at = found + 1
        match = rest.match(text, pos)
        return None if match is None else match.end()

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
