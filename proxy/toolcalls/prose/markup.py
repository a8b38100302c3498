"""Helpers for the markup that frames a plain answer in a format's own tokens (see
`answer`): what a format's `answer_markup` hook is made of."""

from __future__ import annotations

import re

Span = tuple[int, int]

# How far before the end of a text (its trailing space aside) a closing token may start: the
# tokens that close an answer are short.
TAIL = 512


def at_end(closing: re.Pattern[str], text: str, low: int = 0) -> re.Match[str] | None:
    """`closing`, a pattern anchored with `\\Z`, searched near the end of `text` only: a
    search from `low` would try it at every position of a long answer (a megabyte of text
    took tens of milliseconds per format)."""
    return closing.search(text, max(low, len(text.rstrip()) - TAIL))


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
