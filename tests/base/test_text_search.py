"""text_search.find is str.find, whatever the anchor and however often the anchor character
stands where no needle starts (past STEPS of them, str.find takes over)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.base import text_search

NEEDLES = ["</think>", '"name"', "<|message|>", "to=functions.", ">>>all", "<", "ab", "aa"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([*NEEDLES, '"', "<", "|", "a", "b", " ", "\n", '"' * 40,
                                 "<" * 40, "é"]), max_size=60).map("".join),
       st.sampled_from(NEEDLES), st.integers(0, 20), st.data())
def test_find_is_the_substring_search(text: str, needle: str, start: int,
                                      data: st.DataObject) -> None:
    anchor = data.draw(st.integers(0, len(needle) - 1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_search, "SHORT", 0)  # the steps, however short the text
        assert text_search.find(text, needle, start, anchor) == text.find(needle, start)
    assert text_search.find(text, needle, start, anchor) == text.find(needle, start)


def test_a_text_full_of_the_anchor_is_searched_to_its_end() -> None:
    text = "<" * 10_000 + "</think>"
    assert text_search.find(text, "</think>") == 10_000
    assert text_search.find(text, "</think>", 10_001) == -1
