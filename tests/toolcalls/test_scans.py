"""Scans made with str.find where a regex search was: the same answers as the regex they
replace, which is kept here as the reference."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.toolcalls import context
from proxy.toolcalls.formats import improvised
from proxy.toolcalls.prose import cleanup
from proxy.toolcalls.registry import resolved_markers
from proxy.toolcalls.scan import markers as markers_module

# --- improvised: the first structure of an answer ---------------------------------------------

_OPENING = re.compile(r"<tool_code>|```|~~~|[{\[(]")


def _first_structure_by_regex(text: str, body: int, end: int) -> int | None:
    pos = body
    while (opening := _OPENING.search(text, pos, end)) is not None:
        at = opening.start()
        if text[at] in "({" and at > body and improvised._WORD_CHAR.match(text, at - 1):
            name = improvised._NAME_BEFORE.search(text, max(body, at - improvised._NAME_MAX),
                                                  at + 1)
            if name is not None:
                return name.start()
        if text[at] != "(":
            return at
        pos = at + 1
    return None


_PIECES = st.sampled_from(["<tool_code>", "<tool_code", "```", "``", "~~~", "~", "{", "[",
                           "(", "f(", "get_weather(", "a.b(", " ", "\n", "x", "-", "$", "é"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=3)), max_size=40).map("".join),
       st.integers(0, 20), st.integers(0, 200))
@example("see (this) and f(x)", 0, 19)
@example("a ``` b", 0, 4)
def test_first_structure_is_the_regex_search(text, body, end):
    body, end = min(body, len(text)), min(end, len(text))
    assert improvised._first_structure(text, body, end) == \
        _first_structure_by_regex(text, body, end)


# --- cleanup: markup before a frame, looked for from its first `<` or fence -------------------

_MARKUP = st.sampled_from(["<tool_call>", "</tool_call>", "<response>", "</response>", "<tools>",
                           "<", ">", "/", " ", "\n", "\t", "```", "~~~", "```json", "x", "{}"])
_MARKUP_TEXT = st.lists(st.one_of(_MARKUP, st.text(max_size=2)), max_size=30).map("".join)


def _same_match(a: re.Match[str] | None, b: re.Match[str] | None) -> bool:
    return (a is None) == (b is None) and (a is None or b is None or (
        a.span() == b.span() and a.groups() == b.groups()))


@settings(max_examples=500, deadline=None)
@given(_MARKUP_TEXT, st.integers(0, 80), st.integers(0, 120))
@example("x <tool_call> \n", 0, 15)
@example("<response><tool_call>", 3, 21)
def test_markup_search_from_its_lead_is_the_search(text, low, high):
    for pattern in (cleanup._BEFORE, cleanup._OPEN_AT_END):
        assert _same_match(cleanup._search_from(pattern, text, "<", low, high),
                           pattern.search(text, low, high))


def _fenced_by_regex(text: str, start: int, end: int) -> tuple[int, int] | None:
    opening = cleanup._FENCE_OPEN.search(text, max(0, start - 64), start)
    if opening is None:
        return None
    at = cleanup._skip(text, end, len(text))
    closing = cleanup._FENCE_AT.match(text, at)
    line = text.rfind("\n", end, at)
    if (closing is None or line < 0 or at - line - 1 > 3 or "\r" in text[line:at]
            or opening[1] != closing[1]):
        return None
    fence = opening.start(1)
    if len(cleanup._FENCE_LINE.findall(text, 0, fence)) % 2:
        return None
    return fence, closing.end()


@settings(max_examples=500, deadline=None)
@given(_MARKUP_TEXT, _MARKUP_TEXT, _MARKUP_TEXT)
@example("intro\n```json\n", "{}", "\n```")
@example("~~~\n", "{}", "\n~~~\n")
def test_fenced_block_is_the_regex_search(before, frame, after):
    text = before + frame + after
    start, end = len(before), len(before) + len(frame)
    assert cleanup._fenced(text, start, end) == _fenced_by_regex(text, start, end)


# --- markers: a short text's markers, looked for in the windows around their anchors ----------

_MARKER_SETS = [resolved_markers(("auto",)),
                frozenset({"<a", "<ab", "x<yz", "xx<", "<", "q|r", "|s", "|t", "|u"}),
                frozenset({"<a", "<ab", "x<yz", "xx<", "<\x00b"})]  # a separator: no windows


def _present_by_search(text: str, markers: frozenset[str]) -> frozenset[str]:
    return frozenset(m for char, group in markers_module._anchor_groups(markers)
                     if char in text for m in group if m in text)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_MARKER_SETS), st.data())
def test_short_text_markers_as_searched(markers: frozenset[str], data: st.DataObject) -> None:
    pieces = st.sampled_from(sorted(markers)) | st.text("<|_:ax\x00 \nby", max_size=4)
    # more anchors than windows are listed, sometimes (then the whole text is searched)
    text = "".join(data.draw(st.lists(pieces, max_size=24)))
    assert markers_module._present_short(text, markers) == _present_by_search(text, markers)
    assert markers_module._present_short(text, markers) == frozenset(
        m for m in markers if m in text)


# --- context: a frame alone on its line, told without a regex ---------------------------------


def _is_prose_by_regex(piece: str) -> bool:
    return any(char.isalnum() for char in context._TOKEN.sub("", piece))


def _continues_sentence_by_regex(after: str) -> bool:
    if context._HEADER_AFTER.match(after):
        return False
    words = context._TOKEN.sub("", after[:160]).lstrip()
    first = next((char for char in words[:4] if char.isalnum()), "")
    return first.isalpha() and first.islower()


_SPACE = " \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000"


@settings(max_examples=300, deadline=None)
@given(st.text(_SPACE, max_size=6) | st.text(_SPACE + "a<|>.B", max_size=8))
def test_frame_line_sides_as_by_regex(piece: str) -> None:
    assert context._is_prose(piece) == _is_prose_by_regex(piece)
    assert context._continues_sentence(piece) == _continues_sentence_by_regex(piece)
