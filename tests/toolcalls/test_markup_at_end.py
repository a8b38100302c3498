"""`at_end` finds a closing token exactly where a search of the text's last 512 characters
does, however little of them it tries: a match runs to the end, so it starts after the last
character the closing pattern cannot hold."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.base import text_search
from proxy.toolcalls.formats import (
    command_r,
    functionary,
    gemma4,
    glm,
    harmony,
    kimi_k2,
    kimi_k3,
    muse,
    tool_calls_tag,
)
from proxy.toolcalls.prose.markup import TAIL, at_end, holds

CLOSERS = [kimi_k3._RESPONSE_CLOSE, glm._ROLE_END, command_r._ANSWER_CLOSE,
           tool_calls_tag._FINAL_CLOSE, muse._ANSWER_END,
           re.compile(r"(?:</?x>|\.)\s*\Z"), re.compile(r"[^a]b\Z")]  # a class it cannot read
PIECES = ["<|close|>response<|sep|>", "<|close|>message<|sep|>", "<|role_end|>",
          "<|END_RESPONSE|>", "<|END_OF_TURN_TOKEN|>", "[END FINAL RESPONSE]", "<|end|>",
          "<|eot|>", "</x>", ".", "b", " ", "\n", "\u2003", "word", "<", "|", ">"]


def _searched(closing: re.Pattern[str], text: str, low: int) -> re.Match[str] | None:
    return closing.search(text, max(low, len(text.rstrip()) - TAIL))


@given(st.lists(st.sampled_from(PIECES), max_size=30), st.integers(0, 40),
       st.sampled_from(CLOSERS))
def test_at_end_matches_a_search_of_the_tail(pieces, low, closing):
    text = "".join(pieces)
    found, expected = at_end(closing, text, low), _searched(closing, text, low)
    assert (found and found.span()) == (expected and expected.span())


def test_a_closing_token_is_found_and_prose_ends_are_not_taken_for_one():
    answer = "The file holds the parser. <|END_RESPONSE|>\n<|END_OF_TURN_TOKEN|>  "
    found = at_end(command_r._ANSWER_CLOSE, answer)
    assert found is not None
    assert answer[found.start():].startswith("<|END_RESPONSE|>")
    prose = "It ends the turn with <|END_RESPONSE|> and then writes more."
    assert at_end(command_r._ANSWER_CLOSE, prose).start() == len(prose)  # only the empty end
    assert at_end(glm._ROLE_END, "no token here.") is None


NEEDLES = ["to=functions.", "<|", "<|channel|>", ">>>all", "_section_begin|>", "<|message|>",
           "<turn|>", "all", " a"]


@given(st.lists(st.sampled_from([*NEEDLES, *PIECES, "=", "_", "a", "functions."]),
                max_size=12).map("".join), st.sampled_from(NEEDLES))
def test_holds_is_a_substring_search(text, needle):
    """`holds` looks for one character first; its answer is `in`'s (short texts are searched
    by `in` itself: here as if long)."""
    assert holds(text, needle) == (needle in text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_search, "SHORT", 0)
        assert holds(text, needle) == (needle in text)


@given(st.lists(st.sampled_from([*PIECES, "<|start|>assistant<|channel|>final<|message|>",
                                 "assistantanalysis ", ">>>all\n", "all\n", "<turn|>",
                                 "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                 "to=functions.read", "<|message|>", "text "]),
                max_size=12).map("".join))
def test_answer_hooks_read_as_with_substring_searches(text):
    """Each answer hook that guards its search with `holds` gives what it gave with `in`."""
    hooks = [harmony.answer_markup, functionary.answer_markup, kimi_k2.answer_markup,
             muse.answer_markup, gemma4.answer_markup]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_search, "SHORT", 0)  # the search from a rare character
        found = [hook(text) for hook in hooks]
    with pytest.MonkeyPatch.context() as patch:
        for module in (harmony, functionary, kimi_k2, muse, gemma4):
            patch.setattr(module, "holds", lambda text, needle: needle in text)
        assert [hook(text) for hook in hooks] == found
