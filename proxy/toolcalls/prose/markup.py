"""Helpers for the markup that frames a plain answer in a format's own tokens (see
`answer`): what a format's `answer_markup` hook is made of."""

from __future__ import annotations

import re
from functools import lru_cache
from re import _constants as _c  # type: ignore[attr-defined]  # private: not in typeshed
from re import _parser  # type: ignore[attr-defined]  # private: not in typeshed
from typing import Any

from ...base import text_search

Span = tuple[int, int]

# How far before the end of a text (its trailing space aside) a closing token may start: the
# tokens that close an answer are short.
TAIL = 512


@lru_cache(maxsize=256)
def _first_rare(needle: str) -> int:
    """Where in `needle` the character looked for stands: its first that is neither a
    letter, a digit nor space (rare in prose), else its first."""
    return next((i for i, char in enumerate(needle) if not (char.isalnum() or char.isspace())),
                0)


def holds(text: str, needle: str) -> bool:
    """`needle in text`, searched from one of its characters that prose seldom holds (see
    base.text_search): a substring search of a megabyte of prose costs 0.3 ms for
    `<|message|>`, 0.85 ms for `<|`, and each hook's test would pay it on every answer."""
    if len(text) < text_search.SHORT:
        return needle in text
    return text_search.find(text, needle, 0, _first_rare(needle)) >= 0


def at_end(closing: re.Pattern[str], text: str, low: int = 0) -> re.Match[str] | None:
    """`closing`, a pattern anchored with `\\Z`, searched near the end of `text` only: a
    search from `low` would try it at every position of a long answer (a megabyte of text
    took tens of milliseconds per format). A match runs to the end, so it cannot begin
    before the last character it cannot hold (`_alphabet`): in prose, that is the end's
    last word, and the search tries one or two places instead of 512 (25 µs a format)."""
    low = max(low, len(text.rstrip()) - TAIL)
    alphabet = _alphabet(closing)
    if alphabet is not None:
        chars, spaces = alphabet
        end = len(text)
        while end > low and (text[end - 1] in chars or (spaces and text[end - 1].isspace())):
            end -= 1
        low = end
    return closing.search(text, low)


@lru_cache(maxsize=256)
def _alphabet(pattern: re.Pattern[str]) -> tuple[frozenset[str], bool] | None:
    """The characters a match of `pattern` can hold (its literals, and whether `\\s` space),
    or None when it can hold others (a class or an item this does not read)."""
    if pattern.flags & re.IGNORECASE:
        return None
    chars: set[str] = set()
    spaces = False

    def walk(items: Any) -> bool:
        nonlocal spaces
        for op, arg in items:
            if op is _c.LITERAL:
                chars.add(chr(arg))
            elif op is _c.IN:
                for kind, value in arg:
                    if kind is _c.LITERAL:
                        chars.add(chr(value))
                    elif kind is _c.CATEGORY and value is _c.CATEGORY_SPACE:
                        spaces = True
                    else:
                        return False
            elif op is _c.SUBPATTERN:
                if not walk(arg[3]):
                    return False
            elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
                if not walk(arg[2]):
                    return False
            elif op is _c.BRANCH:
                if not all(walk(branch) for branch in arg[1]):
                    return False
            elif op is _c.ATOMIC_GROUP:
                if not walk(arg):
                    return False
            elif op is not _c.AT:
                return False
        return True

    return (frozenset(chars), spaces) if walk(_parser.parse(pattern.pattern)) else None


def edges(text: str, opening: re.Pattern[str] | None, closing: re.Pattern[str] | None,
          inner: re.Pattern[str] | None = None) -> list[Span]:
    """The spans of a frame around the whole text: `opening` where it starts the text (it
    may allow space before it), `closing` where it ends it (anchored with `\\Z`), and, only
    inside a text that `opening` opened, the `inner` tokens between them."""
    spans: list[Span] = []
    start = opening.match(text) if opening is not None else None
    low = start.end() if start is not None else 0
    if start is not None:
        spans.append(start.span())
    end = at_end(closing, text, low) if closing is not None else None
    high = end.start() if end is not None else len(text)
    if end is not None and end.end() > end.start():
        spans.append(end.span())
    if start is not None and inner is not None:
        spans += [token.span() for token in inner.finditer(text, low, high)]
    return spans


# A hook that reads only a text's ends first looks for its needle (a character every token it
# looks for holds) in a text up to this long: one search a few hundred nanoseconds, the regexes
# skipped when absent. A longer text goes straight to its ends (a search of all of it would
# cost more than they do).
SHORT_TEXT = 4096
