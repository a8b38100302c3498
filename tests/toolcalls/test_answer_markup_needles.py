"""A format's `answer_markup` that first looks for the one character every token of its markup
holds (`_MARKUP_NEEDLE`) answers what it answers without that look, for any text, short or
long: with the character absent, the markup found is none (a property, the look switched off
by an empty needle, which every text holds)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.toolcalls.formats import command_r, glm, kimi_k3, muse, tool_calls_tag
from proxy.toolcalls.prose.answer import plain_answer
from proxy.toolcalls.prose.markup import SHORT_TEXT

MODULES = (command_r, glm, kimi_k3, muse, tool_calls_tag)
# Every token the hooks look for, whole and without its needle's characters, and prose.
TOKENS = ["<role>ASSISTANT</role>", "<|role_end|>", "<|open|>", "<|close|>", "<|sep|>",
          "response", "message", "<|start|>assistant", "to=user", "<|message|>", "<|eot|>",
          "<|eom|>", "<|end|>", "<turn|>", "[BEGIN FINAL RESPONSE]", "[END FINAL RESPONSE]",
          "<|START_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|START_RESPONSE|>",
          "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>", "<|END_OF_TURN_TOKEN|>",
          "to=self", "analysis"]
PIECES = [*TOKENS, *(t.replace("<", "") for t in TOKENS), *(t.replace("]", "") for t in TOKENS),
          "The answer is 4.", "Sure", " ", "  ", "\n", "\n\n", "\t", "<", "|", ">", "[", "]",
          "FINAL", "RESPONSE]", "]"]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
@settings(max_examples=400, deadline=None)
@given(text=TEXTS)
def test_the_needle_changes_no_answer(module, text):
    found = module.answer_markup(text)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(module, "_MARKUP_NEEDLE", "")
        assert module.answer_markup(text) == found
    if module._MARKUP_NEEDLE not in text:
        assert found == ([], [])


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
@settings(max_examples=60, deadline=None)
@given(text=TEXTS, padding=st.sampled_from([" ", "\n", "word ", "x"]))
def test_a_long_text_is_read_as_without_the_needle(module, text, padding):
    long = padding * (SHORT_TEXT // len(padding) + 1) + text + padding * 600
    found = module.answer_markup(long)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(module, "_MARKUP_NEEDLE", "")
        assert module.answer_markup(long) == found


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_a_plain_answer_is_the_same_without_the_needles(text):
    formats = ("auto",)
    found = plain_answer(text, formats)
    with pytest.MonkeyPatch.context() as patched:
        for module in MODULES:
            patched.setattr(module, "_MARKUP_NEEDLE", "")
        assert plain_answer(text, formats) == found
