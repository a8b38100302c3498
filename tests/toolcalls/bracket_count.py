"""A plain bracket count: the slow, obvious reference for where a JSON or Python value ends."""

from __future__ import annotations


def plain_end(text: str, quotes: str) -> int | None:
    """Where the value opening `text` ends, by a plain count of its brackets outside strings
    quoted with any of `quotes` (None: it does not end, or its brackets do not match): the
    reference the span scanner and the decoders are checked against."""
    stack, i = [], 0
    while i < len(text):
        char = text[i]
        if char in quotes:
            j = i + 1
            while j < len(text) and text[j] != char:
                j += 2 if text[j] == "\\" else 1
            if j >= len(text):
                return None
            i = j + 1
            continue
        if char in "{[":
            stack.append(char)
        elif char in "}]":
            if (stack.pop() == "{") != (char == "}"):
                return None
            if not stack:
                return i + 1
        i += 1
    return None
