"""The bracket scanner: where a JSON value (or Python literal) ends, by bracket balance alone,
string-aware, in bounded regex steps: for what the C decoders cannot tell (invalid JSON, a
value nested deeper than they read), at Python speed, on the document's budget."""

from __future__ import annotations

import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # C, not in typeshed
from typing import overload

from .budget import Budget
from .decode import UNKNOWN, Decoders, Unknown, string_end


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
_SPECIALS = '{}[]"'  # what a long run of plain text ends at (see BracketScanner._next_special)
_SPECIALS_PY = "{}[]\"'"


class BracketScanner:
    """The bracket scanner over one document, its steps and string decodes charged to the
    document's budget."""

    def __init__(self, text: str, budget: Budget, decoders: Decoders) -> None:
        self.text = text
        self._budget = budget
        self._decoders = decoders  # for the copy of the text with its quotes swapped

    @overload
    def scan(self, start: int, python: bool, memo: dict[int, int | None],
             limit: None = None) -> int | None: ...

    @overload
    def scan(self, start: int, python: bool, memo: dict[int, int | None],
             limit: int) -> int | Unknown | None: ...

    def scan(self, start: int, python: bool, memo: dict[int, int | None],
             limit: int | None = None) -> int | Unknown | None:
        """The end of the value opening at `start` (see _step_pattern), memoising in `memo`
        every group it closes and, unless the budget ran out, every bracket it leaves open.
        With `limit`, a probe: UNKNOWN when the value takes more steps than that (charged to
        the budget all the same), and nothing is marked."""
        text = self.text
        size = len(text)
        step_at = (_NEXT_BRACKET_PY if python else _NEXT_BRACKET).match
        grouped = (_NEXT_GROUPS_PY if python else _NEXT_GROUPS).match
        closes = 0  # groups closed: many, and few left open, make a payload of rows
        specials = _SPECIALS_PY if python else _SPECIALS
        stack = [start]
        pos = start + 1
        result: int | None = None
        steps = self._budget.steps  # left to take
        floor = 0 if limit is None else max(0, steps - limit)
        while True:
            if steps <= floor:
                if floor:  # the probe's end, not the budget's
                    self._budget.steps = steps
                    return UNKNOWN
                self._budget.exhausted = True
                break
            step = step_at(text, pos)
            assert step is not None  # every part of a step is optional: it always matches
            char = step.group(1)
            end = step.end()
            steps -= 1 if step_at is not grouped else 1 + ((end - pos) >> 6)  # by groups
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
        self._budget.steps = steps
        if not self._budget.exhausted:
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
        if self._budget.string_failures > 0:
            end = string_end(self.text, pos - 1)  # orjson, where it reads the string
            if end is not None:
                return end
            try:
                return int(scanstring(self.text, pos, False)[1])
            except ValueError as error:  # an escape JSON does not define, or no closing quote
                if str(error).startswith("Unterminated string"):
                    return None
                self._budget.string_failures -= 1
        return self._quoted_end(pos, '"', _STRING_REST)

    def _single_end(self, pos: int) -> int | None:
        """End of the single-quoted string whose content starts at `pos`, or None: by the C
        string decoder on the copy with quotes swapped (see Decoders.quotes_swapped), where it
        is a double-quoted string of the same length, else by str.find."""
        if self._budget.string_failures > 0:
            swapped = self._decoders.quotes_swapped()
            end = string_end(swapped, pos - 1)
            if end is not None:
                return end
            try:
                return int(scanstring(swapped, pos, False)[1])
            except ValueError as error:
                if str(error).startswith("Unterminated string"):
                    return None
                self._budget.string_failures -= 1
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
