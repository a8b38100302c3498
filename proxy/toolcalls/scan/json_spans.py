"""Where a balanced JSON value (or Python literal) that opens at a position ends."""

from __future__ import annotations

import re

from .brackets import BracketScanner
from .budget import Budget
from .decode import UNKNOWN, Decoders, Unknown
from .repaired import RepairedSpans

# A payload in Python-literal style: brackets, then a single quote.
_PYTHON_STYLE = re.compile(r"[\[{][\s\[{]{0,32}+'")


class JsonSpans:
    """The JSON spans of one document, found by the C decoders where they can tell and by the
    bracket scanner where they cannot, memoised per opening bracket."""

    # Steps the scanner reads a value for before its patched copies are decoded (see end).
    PROBE_STEPS = 64

    def __init__(self, text: str, budget: Budget) -> None:
        self.text = text
        self._budget = budget
        self._decoders = Decoders(text, budget)
        self._scanner = BracketScanner(text, budget, self._decoders)
        self.repaired = RepairedSpans(text, budget)
        self._ends: dict[int, int | None] = {}
        self._py_ends: dict[int, int | None] = {}  # the same, for Python-literal payloads

    def end(self, start: int) -> int | None:
        """End (exclusive) of the balanced JSON value opening at `start`, or None.

        The C decoders are tried first: orjson on growing windows of the text (fast on valid
        JSON, and its errors cost only the window), then the stdlib decoder, which allows raw
        control characters (its failures are capped per document, because each one costs
        time in proportion to the text before it: the error's line number), then the copy of
        the document repaired where the strict decoder reports errors, which keeps the value
        for the engine (see RepairedSpans), then copies patched where the value needs a
        repair that moves no bracket (see Decoders.patched_end). Then the bracket scanner,
        on a budget; what the decoder read before it failed was valid JSON, and the budget
        grows with it (see Budget.credit),
        so that a large payload is found while a pathological text, which fails the decoder
        at once, gains nothing. A payload in Python-literal style (`{'name': …`) is decoded
        in a copy with its quotes made JSON's (see RepairedSpans) or swapped (see
        Decoders.python_copy), and single-quoted strings are strings to the scanner.
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
            decoded = self._decoders.decode(text, start)
            if decoded is not UNKNOWN:
                decoded_end, error_at = decoded
                if error_at is None:
                    memo[start] = decoded_end
                    return decoded_end
                self._budget.credit(start, error_at)
        # A value the scanner crosses in a few steps (a list of numbers, a long string) costs
        # less scanned than decoded again; a value of many small groups is decoded.
        found = self._scanner.scan(start, python, memo, self.PROBE_STEPS)
        if found is not UNKNOWN:
            return found
        end: int | Unknown | None = UNKNOWN
        if python or error_at is not None:  # repaired where the decoder fails, and kept
            end = self.repaired.end(start, python)
        if end is UNKNOWN and python:
            end = self._decoders.decoded_end(self._decoders.python_copy(), start, 0, 0)
        elif end is UNKNOWN and error_at is not None:
            end = self._decoders.patched_end(text, start, error_at, 0, 0)
        if end is not UNKNOWN:
            memo[start] = end
            return end
        return self._scanner.scan(start, python, memo)
