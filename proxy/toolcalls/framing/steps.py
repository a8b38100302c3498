"""Frame-building steps every grammar shares, so that each format stays one small module and
adding one touches no other: the loop over a format's opening markers (`OpenerMatches`), where
an unbalanced or unclosed frame reaches, where a call's section begins and ends, and the frame
of a call whose value has no sure end (`unsure_frame`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..scan import Document
from ..scan.spans import outermost as outermost  # (the formats' shared step, read here)
from ..types import Frame


class OpenerMatches:
    """A format's opening markers in order, for its frame loop (every format loops this way):
    one that starts inside the frame taken last (before `taken_to`, which the loop moves) is
    skipped, and so is one right after a backtick (an inline-code mention), unless
    `keep_backticked` (the context check then reports it as inline code)."""

    def __init__(self, doc: Document, pattern: re.Pattern[str], markers: str | tuple[str, ...],
                 offset: int = 0, *, keep_backticked: bool = False) -> None:
        self._doc = doc
        self._pattern = pattern
        self._markers = markers
        self._offset = offset  # how far into a match its marker stands (Document.finditer)
        self._keep_backticked = keep_backticked
        self.taken_to = 0

    def __iter__(self) -> Iterator[re.Match[str]]:
        text = self._doc.text
        keep = self._keep_backticked
        for match in self._doc.finditer(self._pattern, self._markers, offset=self._offset):
            start = match.start()
            if start >= self.taken_to and (keep or start == 0 or text[start - 1] != "`"):
                yield match


def next_or_end(text: str, marker: str, pos: int) -> int:
    """Where the next `marker` at or after `pos` starts, or the end of the text: how far an
    unbalanced frame reaches."""
    found = text.find(marker, pos)
    return len(text) if found < 0 else found


def ends_or_opens(doc: Document, pos: int, opener: str) -> bool:
    """Whether only space stands between `pos` and the end of the text or the next
    `opener`: where a frame whose close is missing may end."""
    after = doc.skip_space(pos)
    return after >= len(doc.text) or doc.text.startswith(opener, after)


def section_call_end(doc: Document, pos: int, call_end: re.Pattern[str],
                     section_end: re.Pattern[str], next_call: re.Pattern[str],
                     ) -> tuple[int, bool, tuple[str, ...]] | None:
    """(end, closed, repairs) of a call in a section of calls whose arguments end at `pos`:
    after its call-end token and the section's end token if that follows; without its
    call-end token (a repair) when only space, the next call or the section's end follows;
    None when anything else follows (not a call we read)."""
    text = doc.text
    closing = call_end.match(text, pos)
    repairs: tuple[str, ...]
    if closing is not None:
        pos, closed, repairs = closing.end(), True, ()
    elif (doc.skip_space(pos) >= len(text) or next_call.match(text, doc.skip_space(pos))
          or section_end.match(text, pos)):
        closed, repairs = False, ("missing_close_tag",)
    else:
        return None
    section = section_end.match(text, pos)
    return (pos if section is None else section.end()), closed, repairs


def at_line_start(text: str, pos: int) -> bool:
    """Whether only space (at most 64 characters) stands between the start of the line (or
    text) and `pos`."""
    line = text.rfind("\n", 0, pos) + 1
    return pos - line <= 64 and not text[line:pos].strip()


def section_start(doc: Document, section_open: re.Pattern[str], start: int, taken_to: int,
                  in_section: bool) -> int | None:
    """Where the frame of a call opening at `start` begins: at its section's opening tag (a
    pattern ending in `\\Z`, searched just before `start`), or at `start` when it follows the
    previous call of a section still open; None when the call stands outside any section (a
    mention, not a call)."""
    section = section_open.search(doc.text, max(taken_to, start - 200), start)
    if section is not None:
        return section.start()
    return start if in_section and doc.skip_space(taken_to) == start else None


def template_value(value: str) -> str:
    """A text value without the one newline a template puts on each side of it."""
    if value.startswith("\n"):
        value = value[1:]
    return value[:-1] if value.endswith("\n") else value


def unsure_frame(doc: Document, fmt: str, start: int, name: str | None,
                 complete: bool) -> Frame:
    """The frame from `start` of a call whose text value never ended (cut, or not a value we
    read: incomplete) or has no sure end (`ambiguous_value`): it takes the rest of the text,
    which may all be that value and may quote other frames, and stays text."""
    if not complete:
        return Frame(fmt, start, len(doc.text), closed=False, complete=False, name=name)
    return Frame(fmt, start, len(doc.text), name=name, refused="ambiguous_value")
