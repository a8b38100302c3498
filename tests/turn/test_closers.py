"""closers_from finds the closers the regex finds, in order, wherever their first characters
stand (past _STEPS of them the regex reads on); lone_close reads the same with either."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.turn import closers

PIECES = [*closers.CLOSERS, *closers.OPENERS, "<", "[", "◁", "</", "</thin", "[/THI", "<|",
          "<|close|>", "think", " ", "\n", "```\n", "x", "is `", "`.", "<" * 70, "[" * 70]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=500, deadline=None)
@given(TEXTS, st.integers(0, 30))
def test_closers_are_found_where_the_regex_finds_them(text: str, start: int) -> None:
    assert list(closers.closers_from(text, start)) == [
        (found.start(), found.group()) for found in closers._CLOSER.finditer(text, start)]


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.integers(0, 30), st.booleans())
def test_a_lone_close_reads_as_with_the_regex(text: str, start: int, whole: bool) -> None:
    found = closers.lone_close(text, start, whole)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(closers, "closers_from", lambda text, start: (
            (match.start(), match.group()) for match in closers._CLOSER.finditer(text, start)))
        assert closers.lone_close(text, start, whole) == found


def test_a_megabyte_without_a_closer_is_read_by_one_character_searches() -> None:
    text = "the answer, in words. " * 50_000 + "</think>"
    assert list(closers.closers_from(text, 0)) == [(len(text) - 8, "</think>")]
