"""The hold-back rule of the streamed mode: how much of a text written so far may go out
before the turn ends, so that the finished answer still starts with what was sent.

Extraction (at the end, on the whole text) takes tool-call frames out and trims the space at
each seam. So a text flows until the first character that could open a frame in the
configured formats — an opening tag or special token (whole, or its start at the end of the
text), and for the formats recognised by shape a call object, a list or a code fence at the
start of a line — and from there on everything waits for the end. Space is never released
at the end of what went out (a seam would trim it), and a `</think>` not followed by exactly
one blank line holds what comes after it (the thinking's seam is rewritten to one when a
call is taken from the rest).

Each format's spec lists where its frames can begin (`FormatSpec.openers`); a test checks that
every format of the registry lists some, and the property that the finished content always
starts with what was released (tests/turn/test_holdback.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..toolcalls.opener_patterns import Opener, Pattern, alt, seq
from ..toolcalls.registry import OPENERS, resolve

# A think block's tags: what follows one begins a text of its own (the thinking, or the
# visible answer after it), and a close is joined back to the answer with one blank line when
# a call is taken from it (`normalize.split_thinking`).
_THINK_CLOSE = ("</think>", "</seed:think>")
_THINK_TAGS = ("<think>", "<seed:think>", *_THINK_CLOSE)
_SPACES = re.compile(r"\s*")
_LINE_END_LAST = re.compile(r"[\n>]")  # a line begins after a newline or a think tag (…>)
_SEAM_HELD = re.compile(r"[^\n]|\n[^\n]|\n\n\s")  # after a close: not exactly one blank line
_SEAM_OPEN = re.compile(r"\n\n?\Z")  # … or not yet known
_WHOLE = "whole"


def _either(patterns: list[Pattern]) -> re.Pattern[str]:
    """Whole openers (group `whole`), or a proper prefix of one ending the text."""
    pattern = alt(*patterns)
    return re.compile(f"(?P<{_WHOLE}>{pattern.full})|(?=[\\s\\S]){pattern.prefix}\\Z")


@dataclass(frozen=True)
class HoldRule:
    """The compiled openers of a set of formats. Those that stand anywhere: where they may
    begin (a first character and the two after it: `_starts`), then for each first
    character a regex of the openers it begins, the leads that may stand before an opener,
    and one regex for the unfinished end of a text.
    Those that stand at a line's start, or at the text's."""

    first: re.Pattern[str] | None
    anywhere: dict[str, re.Pattern[str]]
    # (an opener, what may stand before it): the longest such lead before a whole opener
    # goes with it (two formats may share an opener, each with a header of its own)
    leads: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...]
    # a proper prefix of an opener (with its lead) ending the text: where one may begin (its
    # first character and the two after it), then for each first character a regex of the
    # prefixes that begin with it (one regex of them all tried at every such character of
    # the last _UNFINISHED_REACH cost ~0.5 ms a token in prose, where leads begin with
    # common letters)
    unfinished_first: re.Pattern[str] | None
    unfinished: dict[str, re.Pattern[str]]
    line: re.Pattern[str] | None
    start: re.Pattern[str] | None
    # where anything at all may be found (the searches above and a line's or a think tag's
    # end, in one): a text with none from a mid-line start holds nothing, and one with some
    # is looked at from the first (None: look always, from where the last look stopped)
    quiet: re.Pattern[str] | None = None


@lru_cache(maxsize=32)
def hold_rule(formats: tuple[str, ...]) -> HoldRule | None:
    """The rule for the configured formats (names as in the config, "auto" for all); None
    when there is nothing to hold (no format)."""
    names = [name for name, _ in resolve(formats)]
    if not names:
        return None
    by_where: dict[str, list[Opener]] = {"anywhere": [], "line": [], "start": []}
    for name in names:
        for opener in OPENERS[name]:
            if opener not in by_where[opener.where]:
                by_where[opener.where].append(opener)
    anywhere = by_where["anywhere"]
    by_char: dict[str, list[str]] = {}
    for i, opener in enumerate(anywhere):
        assert opener.pattern.first is not None, "an opener found anywhere begins with a literal"
        for char in opener.pattern.first:
            by_char.setdefault(char, []).append(f"(?P<o{i}>{opener.pattern.full})")
    whole = [seq(o.lead, o.pattern) if o.lead else o.pattern for o in anywhere]
    assert all(pattern.first is not None for pattern in whole), "openers begin with literals"
    unfinished: dict[str, list[str]] = {}
    for pattern in whole:
        for char in pattern.first or ():
            unfinished.setdefault(char, []).append(pattern.prefix)
    line, start = ([o.pattern for o in by_where[where]] for where in ("line", "start"))
    fulls: dict[str, list[str]] = {}  # by first character: the openers, whole
    begun: dict[str, list[str]] = {}  # … and whole or a proper prefix
    for opener in anywhere:
        for char in opener.pattern.first or ():
            fulls.setdefault(char, []).append(opener.pattern.full)
            begun.setdefault(char, []).extend((opener.pattern.full, opener.pattern.prefix))
    begun_at = _starts(begun, fulls) if by_char else None
    unfinished_at = _starts(unfinished) if unfinished else None
    first = _search(begun_at) if begun_at is not None else None
    unfinished_first = _search(unfinished_at) if unfinished_at is not None else None
    return HoldRule(
        first,
        {char: re.compile("|".join(groups)) for char, groups in by_char.items()},
        tuple((re.compile(o.pattern.full), re.compile(f"(?:{o.lead.full})\\Z"))
              for o in anywhere if o.lead),
        unfinished_first,
        {char: re.compile("(?:" + "|".join(prefixes) + ")\\Z")
         for char, prefixes in unfinished.items()},
        _either(line) if line else None,
        _either(start) if start else None,
        _quiet(begun_at or {}, unfinished_at or {}))


def _quiet(begun: Starts, unfinished: Starts) -> re.Pattern[str]:
    """A search that finds at least wherever the searches for whole openers and for
    unfinished ones (`_starts`) find something, or a line or a think tag may end (a newline,
    a `>`): one search over a token, where there is most often nothing at all. Made of their
    tables (the filter of patterns that match what either does is theirs put together)."""
    merged: Starts = {"\n": None, ">": None}  # (each alone found, whatever follows it)
    for table in (begun, unfinished):
        for char, seconds in table.items():
            if seconds is None or merged.get(char, {}) is None:
                merged[char] = None
                continue
            into = merged.setdefault(char, {})
            assert into is not None  # (just set otherwise)
            for second, thirds in seconds.items():
                known = into.get(second, "")
                into[second] = None if thirds is None or known is None else known + thirds
    return _search(merged)


_ASCII = tuple(map(chr, range(128)))
# By the first character of a match: None when it alone is one (found whatever follows it),
# else each second character by the third ones that may follow it (None: any).
Starts = dict[str, dict[str, str | None] | None]


def _starts(patterns: dict[str, list[str]],
            whole: dict[str, list[str]] | None = None) -> Starts:
    """Where a match of one of `patterns` (by the character it begins with) may begin, for
    `_search`: that character followed by two that can come second and third in a match
    (either of them may be anything not ASCII, or the text's end, or the search's); where
    one of `whole` (the same characters' openers) matches that character alone, or with the
    second, by anything after it. Most first characters of the openers (`a`, `t`, `f`:
    common letters, and `to`, `as`, `an` common pairs) are then passed over by the search
    itself, not tried one by one against their regex. `patterns` holds the proper prefixes
    of what it matches: a match's first three characters are one of them, or a match
    whole (or its first one or two are)."""
    table: Starts = {}
    for char, alternatives in sorted(patterns.items()):
        alone = re.compile("|".join(f"(?:{p})" for p in (whole or {}).get(char, ["(?!)"])))
        if alone.fullmatch(char):
            table[char] = None
            continue
        either = re.compile("|".join(f"(?:{pattern})" for pattern in alternatives))
        table[char] = {x: (None if alone.fullmatch(char + x) else
                           "".join(y for y in _ASCII if either.fullmatch(char + x + y)))
                       for x in _ASCII if either.fullmatch(char + x)}
    return table


def _search(table: Starts) -> re.Pattern[str]:
    """The search for the places `table` (`_starts`) says a match may begin."""
    branches = []
    for char, seconds in sorted(table.items()):
        if seconds is None:
            branches.append(re.escape(char))
            continue
        grouped: dict[str | None, list[str]] = {}  # the second characters, by their thirds
        for second, thirds in seconds.items():
            key = None if thirds is None else "".join(sorted(set(thirds)))
            grouped.setdefault(key, []).append(re.escape(second))
        allowed = "".join(
            f"[{''.join(group)}]" + (
                "|" if thirds is None else
                f"(?:[{''.join(map(re.escape, thirds))}]|[^\\x00-\\x7f]|\\Z)|" if thirds else
                "(?:[^\\x00-\\x7f]|\\Z)|")
            for thirds, group in grouped.items())
        branches.append(f"{re.escape(char)}(?={allowed}[^\\x00-\\x7f]|\\Z)")
    return re.compile("|".join(branches))


Candidate = tuple[int, bool]  # where a frame may begin; True: a whole opener (final)
_LEAD_REACH = 320  # the longest lead (header pieces, each followed by at most 64 spaces)
_UNFINISHED_REACH = 400  # the longest proper prefix of an opener with its lead


def _anywhere(text: str, rule: HoldRule, pos: int) -> Candidate | None:
    """The first whole opener from `pos` (moved back over its lead), or the unfinished end of
    the text if that comes first."""
    found: Candidate | None = None
    search = pos
    while rule.first is not None and (hit := rule.first.search(text, search)) is not None:
        at = hit.start()
        match = rule.anywhere[text[at]].match(text, at)
        if match is not None:
            begins = at
            for opener, lead in rule.leads:
                if opener.match(text, at) and (header := lead.search(
                        text, max(0, at - _LEAD_REACH), at)) is not None:
                    begins = min(begins, header.start())
            found = (begins, True)
            break
        search = at + 1
    unfinished = _unfinished(text, rule, max(pos, len(text) - _UNFINISHED_REACH),
                             len(text) if found is None else found[0])
    return found if unfinished is None else (unfinished, False)


def _unfinished(text: str, rule: HoldRule, pos: int, before: int) -> int | None:
    """Where the first proper prefix of an opener that ends the text begins, from `pos` and
    before `before` (None: none)."""
    first = rule.unfinished_first
    while first is not None and (hit := first.search(text, pos, before)) is not None:
        at = hit.start()
        if rule.unfinished[text[at]].match(text, at) is not None:
            return at
        pos = at + 1
    return None


def _at_line_start(text: str, rule: HoldRule, pos: int) -> tuple[Candidate | None, int]:
    """The first opener at the start of a line (or of the text) from `pos`, and where the
    next look must begin: at that line's start (a line begun with only space so far may
    still get an opener; one with an unfinished opener may still turn to prose)."""
    while (begins := _line_start(text, pos)) >= 0:
        spaces = _SPACES.match(text, begins)
        assert spaces is not None  # it matches the empty string
        at = spaces.end()
        if at == len(text):
            return None, begins
        before = begins
        while before > 0 and text[before - 1].isspace():
            before -= 1
        starts_text = before == 0 or text.endswith(_THINK_TAGS, 0, before)
        for regex in (rule.line, rule.start if starts_text else None):
            match = regex.match(text, at) if regex is not None else None
            if match is not None:
                return (at, match.lastgroup == _WHOLE), begins
        pos = at + 1
    return None, len(text)


def _line_start(text: str, pos: int) -> int:
    """The first place from `pos` where a line begins: the text's start, or after a newline
    or a think tag (-1: none). Found by searching for the last character of one (a newline
    or `>`), not by looking behind every character: fast however long the line."""
    if pos == 0:
        return 0
    search = pos - 1
    while (hit := _LINE_END_LAST.search(text, search)) is not None:
        end = hit.end()
        if hit[0] == "\n" or text.endswith(_THINK_TAGS, 0, end):
            return end
        search = end
    return -1


def _seam(text: str, pos: int) -> Candidate | None:
    found: list[Candidate] = []
    for tag in _THINK_CLOSE:
        at = text.find(tag, max(0, pos - len(tag)))
        while at >= 0:
            end = at + len(tag)
            if _SEAM_HELD.match(text, end):
                found.append((end, True))
                break
            if _SEAM_OPEN.match(text, end):
                found.append((end, False))
                break
            at = text.find(tag, end)
    return min(found, default=None)


def hold_point(text: str, rule: HoldRule, start: int = 0) -> tuple[int, bool, int]:
    """Where the first possible frame in `text` begins, looking from `start` (len(text)
    when none); whether that is final (a whole opener, not an unfinished end that more text
    may turn into prose); and where the next look, with more text, must begin."""
    if start > 0 and _LINE_END_LAST.search(text, start - 1) is None:
        # no line can begin from `start` nor a think tag end there (both end in a newline or
        # `>`): only the openers found anywhere (the common token, in the middle of a line)
        candidate = _anywhere(text, rule, start)
        if candidate is None:
            return len(text), False, len(text)
        return candidate[0], candidate[1], candidate[0]
    return hold_point_everywhere(text, rule, start)


def hold_point_everywhere(text: str, rule: HoldRule, start: int = 0) -> tuple[int, bool, int]:
    """`hold_point` with every kind of candidate looked for (its fast path's reference)."""
    line, resume = _at_line_start(text, rule, start)
    found = [c for c in (_anywhere(text, rule, start), line, _seam(text, start)) if c]
    if not found:
        return len(text), False, resume
    at, final = min(found, key=lambda c: (c[0], not c[1]))
    return at, final, min(at, resume)


def releasable(text: str, rule: HoldRule | None) -> int:
    """How many leading characters of `text` may go out: up to the first possible frame,
    without the space before it."""
    if rule is None:
        return len(text)
    end = hold_point(text, rule)[0]
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


class Held:
    """One text as it streams in (a choice's content or reasoning): each push says what of
    it may go out now. It keeps only the unsent tail (and a few characters before it, for
    the think tags): once a whole opener is seen, the rest waits for the end."""

    _BEHIND = max(map(len, _THINK_TAGS))

    def __init__(self, rule: HoldRule | None) -> None:
        self._rule = rule
        self._base = 0  # where `_tail` begins in the whole text
        self._tail = ""
        self._sent = 0  # characters released so far
        self._scan = 0  # before this, no frame can begin
        self._closed = rule is None  # True: nothing to look for (no rule, or a frame seen)

    @property
    def sent(self) -> int:
        """How many characters have been released."""
        return self._sent

    def unsent_space(self) -> str | None:
        """What was pushed and not released, when it is space alone ("": nothing); None when
        it holds more (a frame may begin in it: it waits for the end)."""
        if self._rule is None:
            return ""
        if self._closed:
            return None
        rest = self._tail[self._sent - self._base:]
        return None if rest.strip() else rest

    def push(self, piece: str) -> str:
        """Add `piece`; the text that may go out now (possibly empty)."""
        if self._rule is None:
            self._sent += len(piece)
            return piece
        if self._closed:
            return ""
        self._tail += piece
        base, tail = self._base, self._tail
        start = self._scan - base
        quiet = self._rule.quiet
        clear = False  # nothing of any kind from the last look on
        if quiet is not None and (start > 0 or start == 0 < base):  # a look from mid-text
            hit = quiet.search(tail, max(0, start - 1))
            if hit is None:
                clear = True
            else:  # nothing before the hit: the look may begin there
                start = max(start, hit.start())
        if clear:  # the common token (what `hold_point`'s mid-line path finds: the end)
            at, final, resume = len(tail), False, len(tail)
        else:
            at, final, resume = hold_point_in(tail, self._rule, start, base)
        end = at
        while end > self._sent - base and tail[end - 1].isspace():
            end -= 1
        out = tail[self._sent - base:end] if end > self._sent - base else ""
        self._sent = max(self._sent, base + end)
        self._scan = base + resume
        if final:
            self._closed = True
            self._tail = ""
            return out
        keep = max(0, self._sent - self._BEHIND - base)
        self._tail, self._base = tail[keep:], base + keep
        return out


def hold_point_in(tail: str, rule: HoldRule, start: int, base: int,
                  ) -> tuple[int, bool, int]:
    """`hold_point` on a tail of the text that begins at `base` in the whole (the start of
    the whole text is only where `base` is 0)."""
    if base == 0:
        return hold_point(tail, rule, start)
    at, final, resume = hold_point("\0" + tail, rule, start + 1)  # a sentinel: not the start
    return at - 1, final, resume - 1
