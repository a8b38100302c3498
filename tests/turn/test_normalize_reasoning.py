"""The reasoning channel (issue 3, item 4): a call written only in the reasoning is recovered,
once, when nothing is visible; a call drafted in reasoning never joins a real one."""

from __future__ import annotations

import json

import pytest

from proxy.turn.normalize import ExtractionSettings, Repair, normalize
from tests.fake_vllm import vllm_completion, vllm_tool_call

SETTINGS = ExtractionSettings(tools={"read": {}, "get_weather": {}})
CALL = '<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>'
OTHER = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def _choice(upstream: dict, settings: ExtractionSettings = SETTINGS) -> tuple[dict, object]:
    result = normalize(upstream, settings)
    return result.first, result.outcome


def _calls(choice: dict) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments))
            for c in choice.calls]


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_call_in_reasoning_field_is_recovered_when_nothing_is_visible(content):
    upstream = vllm_completion(content, reasoning=f"I should read the file.\n{CALL}")
    choice, outcome = _choice(upstream)
    assert _calls(choice) == [("read", {"path": "/a"})]
    assert choice.finish == "tool_calls"
    assert Repair("hermes", "from_reasoning", "read") in outcome.repairs
    assert outcome.call_formats == ["hermes"]
    assert choice.reasoning == "I should read the file."


def test_call_in_reasoning_content_field_is_recovered():
    upstream = vllm_completion(None)
    upstream["choices"][0]["message"]["reasoning"] = None
    upstream["choices"][0]["message"]["reasoning_content"] = CALL
    choice, _ = _choice(upstream)
    assert _calls(choice) == [("read", {"path": "/a"})]


def test_call_drafted_twice_in_reasoning_is_emitted_once():
    upstream = vllm_completion(None, reasoning=f"Draft:\n{CALL}\nYes, that one:\n{CALL}")
    choice, outcome = _choice(upstream)
    assert _calls(choice) == [("read", {"path": "/a"})]
    assert outcome.tool_calls == 1


KEEP_THINKING = ExtractionSettings(tools={"read": {}, "get_weather": {}},
                                   reasoning_from_content=False)


@pytest.mark.parametrize("settings", [SETTINGS, KEEP_THINKING])
def test_call_in_think_block_is_recovered_when_nothing_follows_it(settings):
    content = f"<think>\nI need the file.\n{CALL}\n</think>\n\n"
    choice, outcome = _choice(vllm_completion(content), settings)
    assert _calls(choice) == [("read", {"path": "/a"})]
    assert "<tool_call>" not in (choice.content or "")
    assert Repair("hermes", "from_reasoning", "read") in outcome.repairs
    if settings.reasoning_from_content:  # the thinking is the reasoning, without the call
        assert choice.reasoning == "I need the file."
        assert choice.content is None


def test_a_leading_think_block_is_the_reasoning_and_the_rest_the_answer():
    choice, outcome = _choice(vllm_completion("<think>\nTwo and two.\n</think>\n\nIt is 4."))
    assert choice.reasoning == "Two and two."
    assert choice.content == "It is 4."
    assert Repair("content", "reasoning_from_content", None) in outcome.repairs
    kept, _ = _choice(vllm_completion("<think>\nTwo and two.\n</think>\n\nIt is 4."),
                      KEEP_THINKING)
    assert kept.content == "<think>\nTwo and two.\n</think>\n\nIt is 4."
    assert kept.reasoning is None


@pytest.mark.parametrize("content", [
    "It is 4. <think>a tag in the answer</think>",  # not at the start: the answer's own text
    "The tag </think> ends it, I said.",  # a lone close mentioned in a sentence: text
    "`<think>` is a tag.",
])
def test_thinking_that_does_not_open_the_content_stays_in_it(content):
    choice, _ = _choice(vllm_completion(content))
    assert choice.content == content
    assert choice.reasoning is None


def test_thinking_cut_by_length_is_all_reasoning_and_upstream_reasoning_wins():
    choice, _ = _choice(vllm_completion("<think>still going", finish_reason="length"))
    assert (choice.reasoning, choice.content) == (
        "still going", "")
    both, _ = _choice(vllm_completion("<think>in content</think>answer", reasoning="own"))
    assert both.reasoning == "own"  # a server's own reasoning: as is
    assert both.content == "<think>in content</think>answer"


def test_call_before_a_lone_think_close_is_recovered():
    content = f"I need the file.\n{CALL}\n</think>"
    choice, _ = _choice(vllm_completion(content))
    assert _calls(choice) == [("read", {"path": "/a"})]


def test_reasoning_draft_never_joins_a_real_call_in_content():
    upstream = vllm_completion(OTHER, reasoning=f"Maybe:\n{CALL}")
    choice, outcome = _choice(upstream)
    assert _calls(choice) == [("get_weather", {"city": "Paris"})]
    assert all(r.repair != "from_reasoning" for r in outcome.repairs)
    assert "<tool_call>" in choice.reasoning


@pytest.mark.parametrize("settings", [SETTINGS, KEEP_THINKING])
def test_think_block_draft_never_joins_a_real_call_after_it(settings):
    content = f"<think>Maybe:\n{CALL}</think>\n{OTHER}"
    choice, _ = _choice(vllm_completion(content), settings)
    assert _calls(choice) == [("get_weather", {"city": "Paris"})]
    if settings.reasoning_from_content:
        assert choice.reasoning == f"Maybe:\n{CALL}"
    else:
        assert choice.content.startswith(f"<think>Maybe:\n{CALL}</think>")


def test_reasoning_draft_never_joins_a_native_call():
    upstream = vllm_completion(None, reasoning=CALL,
                               tool_calls=[vllm_tool_call("get_weather", '{"city": "Rome"}')])
    choice, _ = _choice(upstream)
    assert _calls(choice) == [("get_weather", {"city": "Rome"})]


def test_no_recovery_when_the_content_holds_an_answer():
    upstream = vllm_completion("The file says hello.", reasoning=CALL)
    choice, outcome = _choice(upstream)
    assert not choice.calls
    assert choice.content == "The file says hello."
    assert choice.reasoning == CALL
    assert choice.finish == "stop"
    assert outcome.tool_calls == 0


@pytest.mark.parametrize("settings", [SETTINGS, KEEP_THINKING])
def test_no_recovery_after_a_think_block_followed_by_an_answer(settings):
    content = f"<think>{CALL}</think>\nThe answer is 4."
    choice, _ = _choice(vllm_completion(content), settings)
    assert not choice.calls
    if settings.reasoning_from_content:
        assert choice.content == "The answer is 4."
        assert choice.reasoning == CALL
    else:
        assert choice.content == content


def test_no_recovery_when_the_output_was_cut_by_length():
    upstream = vllm_completion(None, reasoning=f"Let me think... {CALL} and then",
                               finish_reason="length")
    choice, _ = _choice(upstream)
    assert not choice.calls
    assert choice.finish == "length"


def test_reasoning_call_to_unknown_tool_stays_in_reasoning():
    reasoning = '<tool_call>{"name": "rm", "arguments": {}}</tool_call>'
    choice, outcome = _choice(vllm_completion(None, reasoning=reasoning))
    assert not choice.calls
    assert choice.reasoning == reasoning
    assert [(x.reason, x.tool) for x in outcome.left_as_text] == [("unknown_tool", "rm")]


def test_reasoning_recovery_respects_named_tool_choice():
    settings = ExtractionSettings(tools={"read": {}, "get_weather": {}}, only="get_weather")
    choice, _ = _choice(vllm_completion(None, reasoning=CALL), settings)
    assert not choice.calls
