"""The streamed mode's hold-back rule (`turn.holdback`), pure: what of a text written so far may
go out. Prose flows; from anything that could open a frame, the text waits for the end."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.extraction import openers as bench_openers
from proxy.toolcalls.registry import FORMATS, OPENERS
from proxy.turn.holdback import (
    Held,
    HoldRule,
    hold_point,
    hold_point_everywhere,
    hold_rule,
    releasable,
)
from proxy.turn.normalize import ExtractionSettings, normalize
from tests.streamed_cases import TOOL_NAMES, corpus, fuzzed

ALL = hold_rule(("auto",))
HERMES = hold_rule(("hermes",))


def sent(text: str, rule=ALL) -> str:
    return text[:releasable(text, rule)]


@pytest.mark.parametrize("text", [
    "The weather in Paris is mild today.",
    "Compare a < b and b > c, then return.",
    "In Python a set is written {1, 2} and a dict {'a': 1} mid-sentence.",
    'A JSON object such as {"a": 1} can sit inside a sentence.',
    "Use list[int] or [1, 2, 3] in the middle of a line.",
    "Markdown links stay: see\n[the docs](https://example.com) and [here](x).",
    "A Python fence flows:\n```python\nx = 1\nprint(x)\n```\nDone.",
    "Generics like Map<String, List<Integer>> are prose.",
    "The function returns true; the caller checks it; done.",
    "HTML like <b>bold</b> and <div class='x'> flows.",
    "As an assistant I wrote the commentary and the analysis to share.",
])
def test_prose_flows_whole(text):
    assert sent(text) == text


@pytest.mark.parametrize(("text", "flows"), [
    ("Let me check.\n<tool_call>", "Let me check."),
    ('Sure. <tool_call>{"name"', "Sure."),
    ("Here:\n<function=get_weather>", "Here:"),
    ("Calling [TOOL_CALLS]", "Calling"),
    ("Now <|python_tag|>", "Now"),
    ("Go <｜tool▁calls▁begin｜>", "Go"),
    ("Go <|tool_call_begin|>", "Go"),
    ("Ok <minimax:tool_call>", "Ok"),
    ("Ok <|action_start|>", "Ok"),
    ("Done functools[", "Done"),
    ("Well <|start|>assistant<|channel|>commentary to=functions.read", "Well"),
    ("Thinking commentary to=functions.read", "Thinking"),
    ("Ok<|channel|>commentary  \n to=functions.read", "Ok"),  # the header goes with the call
    ("Text\n>>>read\n{", "Text"),
    ("I will read it.\n\n{\"name\": \"read\"", "I will read it."),
    ("Calls:\n[{\"name\"", "Calls:"),
    ("Calls:\n[get_weather(city='Paris')", "Calls:"),
    ("Result:\n```json\n{", "Result:"),
    ("Result:\n```\n[", "Result:"),
    ("</think>{\"name\"", "</think>"),
])
def test_a_frame_start_is_held_with_the_space_before_it(text, flows):
    assert sent(text) == flows


@pytest.mark.parametrize(("text", "flows"), [
    ("Let me check <tool_c", "Let me check"),  # could still become an opening tag
    ("Answer: <", "Answer:"),
    ("Let me start\n{", "Let me start"),
    ("Start\n{", ""),  # a one-word first line, then an object: Functionary's first call
    ("Start\n  [", "Start"),
    ("Result:\n```js", "Result:"),
    ("See the analy", "See the"),  # the start of harmony's `analysis to=functions.`
])
def test_what_could_still_open_a_frame_waits_for_the_next_characters(text, flows):
    assert sent(text) == flows


def test_an_unfinished_opener_that_turns_into_prose_is_released():
    held = Held(ALL)
    out = held.push("Let me check <tool_c")
    assert out == "Let me check"
    assert held.push("hain> of thought.") == " <tool_chain> of thought."


def test_trailing_space_waits_until_text_follows_it():
    held = Held(ALL)
    assert held.push("Hello world.\n\n") == "Hello world."
    assert held.push("Next line.") == "\n\nNext line."


def test_after_a_whole_opener_nothing_more_flows():
    held = Held(HERMES)
    assert held.push("Checking.\n<tool_call>{") == "Checking."
    assert held.push('"name": "read"}</tool_call> and then prose') == ""


def test_the_formats_configured_decide_what_is_held():
    text = "Answer: [TOOL_CALLS] and <function=x> are mentioned."
    assert sent(text, HERMES) == text  # neither opens a frame of Hermes
    assert sent(text, hold_rule(("mistral",))) == "Answer:"
    assert sent(text, hold_rule(("qwen_xml",))) == "Answer: [TOOL_CALLS] and"
    assert hold_rule(()) is None
    assert releasable("<tool_call>", None) == len("<tool_call>")


def test_a_think_block_closed_without_one_blank_line_holds_what_follows():
    assert sent("<think>hmm</think>\n\nThe answer") == "<think>hmm</think>\n\nThe answer"
    assert sent("<think>hmm</think>The answer") == "<think>hmm</think>"
    assert sent("<think>hmm</think>\nThe answer") == "<think>hmm</think>"
    assert sent("<think>hmm</think>\n\n\nThe answer") == "<think>hmm</think>"


def test_a_call_object_right_after_a_think_tag_is_held():
    assert sent('<think>{"name": "read"') == "<think>"


def test_every_format_says_where_its_frames_begin():
    assert set(OPENERS) == set(FORMATS)


def _final_content(text: str) -> str:
    tools = {name: {} for name in TOOL_NAMES}
    upstream = {"choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}]}
    try:
        # The content as it reaches the hold-back (a leading think block is routed away
        # before it: tests/turn/test_thinking.py).
        result = normalize(upstream, ExtractionSettings(
            tools=tools, reasoning_from_content=False))
    except ValueError:  # nothing usable: the turn fails in both modes
        return text
    return result.first.content or ""


def test_the_answer_starts_with_whatever_was_released_at_every_character():
    """Over the test corpus and fuzzed outputs, streamed one character at a time: what was
    released (which only grows) is where the finished content begins, and the running Held
    agrees with the rule applied to the whole text so far (looked at every few characters)."""
    for text in [*corpus(), *fuzzed(400)]:
        final = _final_content(text)
        held = Held(ALL)
        out = ""
        for end in range(1, len(text) + 1):
            out += held.push(text[end - 1])
            if end % 7 == 0 or end == len(text):
                assert out == sent(text[:end]), (text, end)
        assert final.startswith(out), (text, out, final)


def _searched_at_every_first_character(rule: HoldRule) -> HoldRule:
    """`rule` as it was before its searches passed over first characters by the one after
    them (`holdback._starts`): every first character of an opener tried."""
    def every(chars: Iterable[str]) -> re.Pattern[str] | None:
        listed = "".join(re.escape(char) for char in sorted(chars))
        return re.compile(f"[{listed}]") if listed else None
    return dataclasses.replace(rule, first=every(rule.anywhere),
                               unfinished_first=every(rule.unfinished))


def test_the_three_character_filter_finds_what_trying_every_first_character_finds():
    """The searches that skip a first character by the characters after it (`_starts`) find
    the same hold points as trying every first character: over every opener cut at each
    character (after prose; for all formats also followed by more text), for each format
    alone and for all, and over the corpus's texts (every fifth prefix, for all)."""
    prose = "Then a function to fetch the facts: at first, "
    cut = [prose + opener[:end] for opener in bench_openers() for end in range(len(opener) + 1)]
    for name in FORMATS:
        rule = hold_rule((name,))
        assert rule is not None
        old = _searched_at_every_first_character(rule)
        for text in cut:
            assert hold_point(text, rule) == hold_point(text, old), (name, text)
    old = _searched_at_every_first_character(ALL)
    for text in [*cut, *(text + " after" for text in cut)]:
        for start in (0, len(prose)):
            assert hold_point(text, ALL, start) == hold_point(text, old, start), text
    for text in [*corpus(500), *fuzzed(200)]:
        for end in range(1, len(text) + 1, 5):
            assert hold_point(text[:end], ALL) == hold_point(text[:end], old), text[:end]


def test_the_mid_line_fast_path_finds_what_looking_everywhere_finds():
    """`hold_point` from a place with no newline or `>` at or after the character before it
    (openers found anywhere only) gives what looking for every kind of candidate gives: over
    the corpus's and fuzzed texts, every seventh prefix from every eleventh start."""
    for text in [*corpus(300), *fuzzed(200)]:
        for end in range(1, len(text) + 1, 7):
            for start in range(0, end + 1, 11):
                assert (hold_point(text[:end], ALL, start)
                        == hold_point_everywhere(text[:end], ALL, start)), (text[:end], start)


_PIECES = (*bench_openers(), "to", "to=", "as", "ass", "an", "ana", "co", "com", "fu", "fun",
           " ", "\n", "\n\n", "\t", ": ", "<", ">", "[", "]", "é", "→", "\u3000", "the ",
           "assistant", "functions.", "<|", "|>", "\n{", "\n[", "\n```", '{"name": "read", ',
           "</think>", "</think>\n\n", "Sure, ", "read(", "\n\n[{")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=3)), max_size=12),
       st.integers(min_value=0, max_value=40), st.sampled_from(["auto", *FORMATS]))
def test_the_three_character_filter_finds_what_every_first_character_finds_anywhere(
        pieces, start, name):
    """Any text of openers (cut anywhere), the pairs and triples of letters that begin
    them, space, non-ASCII characters and anything else: the same hold point with the
    filter as with every first character tried, from any start, for each format and all."""
    text = "".join(pieces)
    rule = hold_rule((name,))
    assert rule is not None
    old = _searched_at_every_first_character(rule)
    for cut in {len(text), len(text) // 2, len(text) - 1}:
        begin = min(start, max(0, cut))
        assert (hold_point(text[:cut], rule, begin)
                == hold_point(text[:cut], old, begin)), (text[:cut], begin)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=8)), max_size=16),
       st.sampled_from(["auto", *FORMATS]))
def test_a_push_with_nothing_to_look_at_says_what_the_whole_look_says(pieces, name):
    """`Held`'s one search for a token with nothing in it (`HoldRule.quiet`) lets out what
    the rule's every look lets out, piece by piece, for each format and all."""
    rule = hold_rule((name,))
    assert rule is not None
    assert rule.quiet is not None
    fast, slow = Held(rule), Held(dataclasses.replace(rule, quiet=None))
    for piece in pieces:
        assert fast.push(piece) == slow.push(piece), (pieces, piece)
        assert fast.unsent_space() == slow.unsent_space()
    assert fast.sent == slow.sent
