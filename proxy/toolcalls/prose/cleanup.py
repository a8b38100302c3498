"""The markup a taken call leaves behind, which is not the model's prose either.

Once its frames are taken, a model's output may still show the markup around them: a wrapper
written twice (`<tool_call>\\n<tool_call>{…}</tool_call>\\n</tool_call>`), a `<response>` or an
empty `<tool_call></tool_call>` beside the call, a closing tag repeated, the fence of a code
block that held only calls, and, when the output was cut by `length`, the unfinished start of
one more call. Such markup goes with the frames it touches. It is recognised narrowly, so that
prose is never touched: only the tags of tool-call wrappers, only where nothing but space
stands between them and a frame, and only when they stand on their own (a line or the rest
of one) or wrap the frame as a pair (`<response>` right before it, `</response>` right after).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..registry import WRAPPER_TAGS
from ..types import LeftAsText

# Tags of tool-call wrappers, as models write them around (or beside) a call (the formats'
# `wrapper_tags`), the longest first.
_NAMES = "(?:" + "|".join(re.escape(tag) for tag in sorted(WRAPPER_TAGS, key=len, reverse=True)
                          ) + ")"
_CLOSE = re.compile(r"</(" + _NAMES + r")>")
_EMPTY_PAIR = re.compile(r"<(" + _NAMES + r")>\s*+</\1>")
_OPEN_AT_END = re.compile(r"<(" + _NAMES + r")>\Z")
_BEFORE = re.compile(r"(?:<(" + _NAMES + r")>|<(" + _NAMES + r")>\s*+</\2>)\s*+\Z")
_LOOK_BACK = 256  # how far back one piece of markup before a frame is looked for
_SPACE = " \t\r\n"
_FENCE_OPEN = re.compile(r"(?:^|\n)[ \t]{0,3}(```|~~~)[\w+.-]*[ \t]*\n\s*\Z")
_FENCE_AT = re.compile(r"(```|~~~)[ \t]*+(?:\n|\Z)")
_NOT_SPACE = re.compile(r"[^ \t\r\n]")
_REST_OF_LINE = re.compile(r"[ \t\r]*+(?:\n|\Z)")
_FENCE_LINE = re.compile(r"(?m)^[ \t]{0,3}(?:```|~~~)")
# What an unfinished call cut by `length` starts with: a tag of a call format, or a special
# token; then only more tags, a tag cut in the middle, or an opening bracket.
_CUT_MARKUP = re.compile(r"(?:<[^<>\n]{1,200}>\s*)*(?:<[^<>\n]{0,200}|[{\[])?\s*\Z")
_CUT_START = re.compile(r"<(?:[|｜]|/?" + _NAMES + r"|/?\w{1,32}[:=]|invoke|parameter|arg_)"
                        r"|\[TOOL_CALLS")
_CUT_REASONS = ("cut_by_length", "incomplete_frame")

Span = tuple[int, int]


def _skip(text: str, pos: int, limit: int) -> int:
    """The first position from `pos` (up to `limit`) that is not space."""
    found = _NOT_SPACE.search(text, pos, limit)
    return limit if found is None else found.start()


def _back_over(text: str, pos: int, floor: int, chars: str) -> int:
    """The position after the last character before `pos` (down to `floor`) not in `chars`:
    read back in windows, so that a long run of space costs C speed, not a step each."""
    while pos > floor:
        low = max(floor, pos - 4096)
        kept = text[low:pos].rstrip(chars)
        if kept:
            return low + len(kept)
        pos = low
    return floor


def _search_from(pattern: re.Pattern[str], text: str, lead: str, pos: int,
                 endpos: int) -> re.Match[str] | None:
    """`pattern.search(text, pos, endpos)` for a pattern whose every match starts with
    `lead`: from the first `lead` on (str.find, memchr speed; a regex search costs about a
    hundred instructions per character of prose passed over), none when there is none."""
    first = text.find(lead, pos, endpos)
    return None if first < 0 else pattern.search(text, first, endpos)


def _back(text: str, pos: int, floor: int) -> int:
    return _back_over(text, pos, floor, _SPACE)


def _line_ends(text: str, pos: int, limit: int) -> bool:
    """Only spaces or tabs between `pos` and the end of its line (or `limit`)."""
    return _REST_OF_LINE.match(text, pos, limit) is not None


def _line_starts(text: str, pos: int, floor: int) -> bool:
    """Only spaces or tabs between the start of its line (or `floor`) and `pos`."""
    pos = _back_over(text, pos, floor, " \t")
    return pos <= floor or text[pos - 1] == "\n"


def _wrapper_pair(text: str, start: int, end: int, floor: int, limit: int) -> Span | None:
    """The span with the wrapper around [start, end) (`<X>` right before, `</X>` right
    after), or None."""
    before = _back(text, start, floor)
    opening = _search_from(_OPEN_AT_END, text, "<", max(floor, before - 40), before)
    if opening is None:
        return None
    closing = _CLOSE.match(text, _skip(text, end, limit))
    if closing is None or closing[1] != opening[1] or closing.end() > limit:
        return None
    return opening.start(), closing.end()


def _debris_after(text: str, end: int, limit: int) -> int:
    """Where the closing tags and empty pairs right after a frame end, when they fill the
    rest of their line; else `end`."""
    cursor = found = end
    while True:
        piece = _CLOSE.match(text, _skip(text, cursor, limit)) or _EMPTY_PAIR.match(
            text, _skip(text, cursor, limit))
        if piece is None or piece.end() > limit:
            return found
        cursor = piece.end()
        if _line_ends(text, cursor, limit):
            found = cursor


def _debris_before(text: str, start: int, floor: int) -> int:
    """Where the opening tags and empty pairs right before a frame start, when they stand
    at the start of their line; else `start`."""
    cursor = found = start
    while True:
        stop = _back(text, cursor, floor)
        piece = _search_from(_BEFORE, text, "<", max(floor, stop - _LOOK_BACK), stop)
        if piece is None:
            return found
        cursor = piece.start()
        if _line_starts(text, cursor, floor):
            found = cursor


def _grown(text: str, span: Span, floor: int, limit: int) -> Span:
    """A frame's span with the wrapper markup it touches."""
    start, end = span
    while (pair := _wrapper_pair(text, start, end, floor, limit)) is not None:
        start, end = pair
    return _debris_before(text, start, floor), _debris_after(text, end, limit)


def _fenced(text: str, start: int, end: int) -> Span | None:
    """The fenced code block that holds nothing but [start, end), when there is one: its
    opening fence is an opening one (an even number of fence lines stand before it)."""
    low = max(0, start - 64)
    if text.find("```", low, start) < 0 and text.find("~~~", low, start) < 0:
        return None  # (its fence is looked for first by str.find: see _search_from)
    opening = _FENCE_OPEN.search(text, low, start)
    if opening is None:
        return None
    at = _skip(text, end, len(text))  # the closing fence: after a line break, indented ≤ 3
    closing = _FENCE_AT.match(text, at)
    line = text.rfind("\n", end, at)
    if (closing is None or line < 0 or at - line - 1 > 3 or "\r" in text[line:at]
            or opening[1] != closing[1]):
        return None
    fence = opening.start(1)
    if len(_FENCE_LINE.findall(text, 0, fence)) % 2:
        return None  # the fence before closes an earlier block
    return fence, closing.end()


def _groups(text: str, spans: list[Span]) -> list[Span]:
    """Spans merged where only space stands between them."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and _skip(text, merged[-1][1], start) >= start:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _cut_call(text: str, after: int, left: Sequence[LeftAsText]) -> int | None:
    """Where the unfinished call that an output cut by `length` ends with starts, after
    `after`: a frame found cut, or nothing but the start of one's markup."""
    cut = [item.start for item in left if item.reason in _CUT_REASONS and item.start >= after
           and _skip(text, item.end, len(text)) >= len(text)]
    if cut:
        return min(cut)
    rest = _skip(text, after, len(text))
    if rest < len(text) and _CUT_START.match(text, rest) and _CUT_MARKUP.match(text, rest):
        return rest
    return None


def around_calls(text: str, frames: Sequence[Span], left: Sequence[LeftAsText],
                 truncated: bool) -> list[Span]:
    """The spans of markup around the taken `frames` (sorted, disjoint) that are not prose
    either: wrappers and stray closes they touch, the fences of a block that holds nothing
    else, and, in an output cut by `length`, the unfinished call it ends with."""
    grown = []
    for i, span in enumerate(frames):
        floor = frames[i - 1][1] if i else 0
        limit = frames[i + 1][0] if i + 1 < len(frames) else len(text)
        grown.append(_grown(text, span, floor, limit))
    markup = []
    for start, end in _groups(text, grown):
        fence = _fenced(text, start, end)
        markup.append(fence or (start, end))
    if truncated and markup:
        cut = _cut_call(text, markup[-1][1], left)
        if cut is not None:
            markup.append((cut, len(text)))
    return markup
