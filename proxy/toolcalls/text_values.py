"""Where a text value written between tags ends, decided by the frame's structure.

A value written as text (a file, a doc string) may hold the very tags that frame it: a file
that says `</parameter>`, a test fixture that quotes a whole call. The first closing tag is
then not the value's end. Its end is the first closing tag that
- is not taken by an opening tag of the same element written inside the value (a call
  quoted whole in a file closes its own parameters);
- is followed by what the grammar allows after a value (the next parameter, or the end of
  the call and of its wrapper), not by more of the value;
- and, when it ends the frame, leaves no closing tag of the format standing after the frame
  before the next frame opens (else the value went on past a close it quoted).
A close that only the last rule rejects is still the end when no later one passes it (prose
after a call may name a closing tag). A value whose only consistent end leaves an opening tag
in it unclosed is ambiguous: it forgot its own close, or it names the tag; the caller keeps
such a frame as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..base.frozen import quick_init
from .scan import Document


@dataclass(frozen=True)
class ValueTags:
    """The tags around one format's text values.

    `tokens` finds, from a value's start, an opening tag of the value's element (group 1) or
    its closing tag (written `<(?:(open)|/close>)`: a pattern that starts with its literal
    `<` is searched at C speed, an alternation of two is twenty times slower); `next_item`
    matches what may follow a close inside the call (the next parameter, leading space
    allowed); `stray` finds the format's tags after a frame: a closing one (group 1) or the
    opener of the next frame."""

    tokens: re.Pattern[str]
    next_item: re.Pattern[str]
    stray: re.Pattern[str]


@quick_init
@dataclass(frozen=True)
class ValueEnd:
    """Where a value's closing tag starts and ends, and whether every opening tag of the
    value's element written inside the value is closed inside it."""

    at: int
    balanced: bool
    end: int


Tail = Callable[[int], "int | None"]
"""After a value's closing tag: where the frame ends when the call ends there, else None."""


def stray_tags(closers: tuple[str, ...], openers: tuple[str, ...]) -> re.Pattern[str]:
    """`ValueTags.stray` for a format whose closing tags and frame openers (all starting
    with `<`) are these: one pattern, searched from its literal `<` at C speed."""
    def alternatives(tags: tuple[str, ...]) -> str:
        return "|".join(re.escape(tag[1:]) for tag in tags)
    return re.compile(f"<(?:({alternatives(closers)})|{alternatives(openers)})")


def _stray_close_after(text: str, pos: int, stray: re.Pattern[str]) -> bool:
    """Whether a closing tag of the format stands after `pos` before any frame opens."""
    hit = stray.search(text, pos)
    return hit is not None and hit.group(1) is not None


def value_end(doc: Document, pos: int, tags: ValueTags, tail: Tail) -> ValueEnd | None:
    """The end of the text value starting at `pos` (see the module's rules), or None when no
    closing tag is followed by the frame's structure (or the budget ran out: then
    `doc.budget.exhausted` says so). Each tag passed over costs a failed attempt."""
    text = doc.text
    depth = 0
    first: ValueEnd | None = None
    for token in tags.tokens.finditer(text, pos):
        if token.group(1) is None:
            after = token.end()
            clean = True
            if tags.next_item.match(text, after) is None:
                frame_end = tail(after)
                clean = frame_end is not None and not _stray_close_after(text, frame_end,
                                                                         tags.stray)
                ends = frame_end is not None
            else:
                ends = True
            if ends:
                if depth == 0 and clean:
                    return ValueEnd(token.start(), True, after)
                first = first or ValueEnd(token.start(), depth == 0, after)
            depth = max(0, depth - 1)
        else:
            depth += 1
        if not doc.budget.fail_attempt():
            return None
    return first
