"""Scans made with str.find where a regex search was: the same answers as the regex they
replace, which is kept here as the reference."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.toolcalls.formats import improvised

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
