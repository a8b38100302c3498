"""Only the model's words in the answer (issue 26, items 1, 2 and 7): thinking closed by a lone
end tag is the reasoning, the markup that frames a plain answer is dropped for every family,
and the streamed mode gives the same message. The texts here join the streamed mode's corpus
(tests/streamed_cases.py reads every tests/toolcalls/test_*.py)."""

from __future__ import annotations

import json

import pytest

from proxy.turn.normalize import ExtractionSettings, Repair, normalize
from proxy.turn.thinking import ThinkingRule, thinking_rule
from tests.fake_vllm import vllm_completion
from tests.streamed_cases import both_modes

TOOLS = {"read": {}, "get_weather": {}}
AUTO = ExtractionSettings(tools=TOOLS)
CALL = '<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>'


def _message(content: str, settings: ExtractionSettings = AUTO, finish: str = "stop",
             ) -> tuple[dict, list[Repair]]:
    result = normalize(
        vllm_completion(content, finish_reason=finish), settings)
    return result.first, result.outcome.repairs


def _split(message: dict) -> tuple[str | None, str | None]:
    return message.reasoning, message.content


# Item 1: text before a lone closer of each family is the reasoning.
LONE_CLOSED = [
    ("Okay, the user wants the weather in Paris.\n</think>\n\nIt is sunny.",
     ("Okay, the user wants the weather in Paris.", "It is sunny.")),
    ("Thinking it over</think>It is sunny.", ("Thinking it over", "It is sunny.")),
    ("  The user greets me. </think>  Hello!", ("The user greets me.", "Hello!")),
    ("Seed thinks here.\n</seed:think>\nHello!", ("Seed thinks here.", "Hello!")),
    ("Check the date first.[/THINK]It is Monday.", ("Check the date first.", "It is Monday.")),
    ("I plan to answer.<|END_THINKING|>It is Monday.", ("I plan to answer.", "It is Monday.")),
    ("Kimi thinks.<|close|>think<|sep|>It is Monday.", ("Kimi thinks.", "It is Monday.")),
    ("Gemma thinks.<channel|>It is Monday.", ("Gemma thinks.", "It is Monday.")),
    ("A mention first: `</think>` is the tag.\nNow I know.\n</think>\nIt is Monday.",
     ("A mention first: `</think>` is the tag.\nNow I know.", "It is Monday.")),
    ("Nothing to think.</think>", ("Nothing to think.", "")),
    ("</think>\n\nIt is Monday.", ("", "It is Monday.")),
]

# … and a closer the answer mentions stays its text.
LONE_MENTIONED = [
    "The tag `</think>` ends the thinking.",
    'Write "</think>" where the thinking ends.',
    "Models close their thinking with </think> and then answer.",
    "The closing tag is </think>.",
    "Use [/THINK] to close, then answer.",
    "```xml\n</think>\n```\nThat closes it.",
    "It is 4. <think>a tag in the answer</think> and more.",
    "Command's tags are <|START_THINKING|> and <|END_THINKING|>, in that order.",
    "No closer at all in this answer.",
    "- closing tag: </think>\n- opening tag: the other one",
]


@pytest.mark.parametrize(("content", "split"), LONE_CLOSED)
def test_text_before_a_lone_closer_is_the_reasoning(content, split):
    message, repairs = _message(content)
    assert _split(message) == split
    assert Repair("content", "reasoning_before_lone_close", None) in repairs


@pytest.mark.parametrize("content", LONE_MENTIONED)
def test_a_closer_the_answer_mentions_stays_in_it(content):
    message, repairs = _message(content)
    assert _split(message) == (None, content)
    assert not [r for r in repairs if r.format == "content"]


def test_with_the_template_known_to_open_no_block_a_lone_closer_is_text():
    never = ExtractionSettings(tools=TOOLS, thinking=thinking_rule("false", True, False))
    message, _ = _message("Thinking it over</think>It is sunny.", never)
    assert _split(message) == (None, "Thinking it over</think>It is sunny.")
    led, _ = _message("<think>a</think>b", never)  # a leading block is still the reasoning
    assert _split(led) == ("a", "b")


def test_a_call_before_the_lone_closer_is_a_call_in_the_reasoning():
    message, repairs = _message(f"I need the file.\n{CALL}\n</think>\n\n")
    calls = [(c.name, json.loads(c.arguments))
             for c in message.calls]
    assert calls == [("read", {"path": "/a"})]
    assert Repair("hermes", "from_reasoning", "read") in repairs
    assert message.reasoning == "I need the file."
    drafted, _ = _message(f"Maybe:\n{CALL}\n</think>\nThe file is empty, no need.")
    assert not drafted.calls  # the model answered in prose: a draft, not a call
    assert _split(drafted) == (f"Maybe:\n{CALL}", "The file is empty, no need.")


CUT = "The user wants the weather; I should call the tool with the city of"


def test_a_cut_output_without_closer_is_thinking_only_when_the_template_opens_it():
    unknown, _ = _message(CUT, finish="length")
    assert _split(unknown) == (None, CUT)
    seen = ExtractionSettings(tools=TOOLS, thinking=thinking_rule("auto", True, False))
    learned, repairs = _message(CUT, seen, finish="length")
    assert _split(learned) == (CUT, "")
    assert Repair("content", "reasoning_opened_by_template", None) in repairs
    finished, _ = _message("It is sunny.", seen)  # not cut: an answer without thinking
    assert _split(finished) == (None, "It is sunny.")
    never = ExtractionSettings(tools=TOOLS, thinking=thinking_rule("false", True, False))
    assert _split(_message(CUT, never, finish="length")[0]) == (None, CUT)


def test_with_the_template_opening_thinking_all_is_thinking_until_a_closer():
    opened = ExtractionSettings(tools=TOOLS, thinking=thinking_rule("true", False, False))
    assert _split(_message("Still thinking, no end", opened)[0]) == (
        "Still thinking, no end", "")
    assert _split(_message("Plan.</think>It is sunny.", opened)[0]) == ("Plan.", "It is sunny.")
    # a request that switches thinking off: the template opens no block
    off = ExtractionSettings(tools=TOOLS, thinking=thinking_rule("true", False, True))
    assert _split(_message("It is sunny.", off)[0]) == (None, "It is sunny.")
    assert thinking_rule("auto", False, True) == ThinkingRule()  # nothing learned from it


# Item 2: the markup that frames a plain answer, per family; the same tokens mentioned stay.
FRAMED = [
    ("<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>",
     (None, "It is sunny.")),
    ("<|channel|>final<|message|>It is sunny.<|end|>", (None, "It is sunny.")),
    ("<|channel|>analysis<|message|>User wants weather.<|end|><|start|>assistant<|channel|>final"
     "<|message|>It is sunny.<|return|>", ("User wants weather.", "It is sunny.")),
    ("<|start|>assistant to=user<|channel|>commentary<|message|>Checking the sky.<|end|>",
     (None, "Checking the sky.")),
    ("<|channel|>final <|constrain|>json<|message|>{\"sky\": \"clear\"}<|return|>",
     (None, '{"sky": "clear"}')),
    ('<|channel|>final<|message|>{"name": "get_weather", "arguments": {"city": "Paris"}}'
     "<|return|>", (None, '{"name": "get_weather", "arguments": {"city": "Paris"}}')),
    ("<|START_RESPONSE|>It is sunny in Paris.<|END_RESPONSE|>", (None, "It is sunny in Paris.")),
    ("<|START_THINKING|>Weather question.<|END_THINKING|><|START_RESPONSE|>It is sunny."
     "<|END_RESPONSE|><|END_OF_TURN_TOKEN|>", ("Weather question.", "It is sunny.")),
    ("<|START_TEXT|>It is sunny.<|END_TEXT|>", (None, "It is sunny.")),
    ("<|open|>response<|sep|>It is sunny.<|close|>response<|sep|><|close|>message<|sep|>",
     (None, "It is sunny.")),
    ("It is sunny.<|close|>response<|sep|><|close|>message<|sep|>", (None, "It is sunny.")),
    # the same as vLLM detokenizes it with spaces_between_special_tokens on
    ("<|open|> response <|sep|> It is sunny. <|close|> response <|sep|> <|close|> message <|sep|>",
     (None, "It is sunny.")),
    ("It is sunny. <|close|> response <|sep|> <|close|> message <|sep|>", (None, "It is sunny.")),
    ("<|open|>think<|sep|>Sky check.<|close|>think<|sep|><|open|>response<|sep|>It is sunny."
     "<|close|>response<|sep|>", ("Sky check.", "It is sunny.")),
    ("<role>ASSISTANT</role>It is sunny.<|role_end|>", (None, "It is sunny.")),
    ("<|start|>assistant<|message|>It is sunny.<|eot|>", (None, "It is sunny.")),
    ("It is sunny.<|eom|>", (None, "It is sunny.")),
    ("It is sunny.\n<|tool_calls_section_begin|>\n<|tool_calls_section_end|>",
     (None, "It is sunny.\n")),
    ("It is sunny.<|tool_calls_section_begin|><|tool_calls_section_end|> Enjoy.",
     (None, "It is sunny.\n Enjoy.")),
    ("It is sunny.<|tool_calls_section_begin|>", (None, "It is sunny.")),
    ("[THINK]Check the sky.[/THINK]It is sunny.", ("Check the sky.", "It is sunny.")),
    ("<|channel>thought\nSky check.<channel|>It is sunny.<turn|>", ("Sky check.", "It is sunny.")),
]

FRAMING_MENTIONED = [
    "The token <|end|> ends a Harmony message.",
    "Harmony answers start with <|channel|>final<|message|> and the text.",
    "Say <|START_RESPONSE|> first, then the answer.",
    "Kimi K3 opens it with <|open|>response<|sep|> and closes it later.",
    "Spaced, Kimi K3 opens it with <|open|> response <|sep|> and closes it later.",
    "Ling writes <role>ASSISTANT</role> before its answer.",
    "End the message with <|eot|> please.",
    "The section starts with `<|tool_calls_section_begin|>` in Kimi K2.",
    "Mistral thinks between [THINK] and [/THINK] tags, I said.",
    "Gemma ends a turn with <turn|> and waits.",
]


# Issue 37, items 2 and 3: the last families' framing, and Harmony written as words.
FRAMED_ROUND_FIVE = [
    # Command R: the turn's header and end tokens
    ("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Low tide is at six.<|END_OF_TURN_TOKEN|>",
     (None, "Low tide is at six.")),
    ("Low tide is at six.<|END_OF_TURN_TOKEN|>", (None, "Low tide is at six.")),
    # Apriel: the thinking before its final-response marker, the markers and end token out
    ("Here are my reasoning steps:\nTides follow the moon.\n[BEGIN FINAL RESPONSE]\n"
     "Low tide is at six.\n[END FINAL RESPONSE]\n<|end|>",
     ("Tides follow the moon.", "Low tide is at six.")),
    ("Tides follow the moon.\n[BEGIN FINAL RESPONSE]\nLow tide is at six.\n"
     "[END FINAL RESPONSE]", ("Tides follow the moon.", "Low tide is at six.")),
    # Functionary v3.2: the recipient line of a message to the user
    ("all\nLow tide is at six.", (None, "Low tide is at six.")),
    (">>>all\nLow tide is at six.", (None, "Low tide is at six.")),
    # gpt-oss: a header cut off by the length limit; Harmony written as words
    ("<|channel|>analysis<|message|>Moon phase.<|end|><|start|>assistant<|channel|>fi",
     ("Moon phase.", "")),
    ("analysisThe user wants the tide. Six.assistantfinalLow tide is at six.",
     ("The user wants the tide. Six.", "Low tide is at six.")),
    ("assistantfinalLow tide is at six.", (None, "Low tide is at six.")),
    # Kimi K2: a section holding only stray words; a call opener alone at the very end
    ("Low tide is at six.<|tool_calls_section_begin|>at noon<|tool_calls_section_end|>",
     (None, "Low tide is at six.\nat noon")),
    ("Low tide is at six.<tool_call>", (None, "Low tide is at six.")),
    ("Low tide is at six.\n[TOOL_CALLS]", (None, "Low tide is at six.")),
]
FRAMING_MENTIONED_ROUND_FIVE = [
    "Cohere ends each turn with <|END_OF_TURN_TOKEN|> and stops.",
    "Apriel writes [BEGIN FINAL RESPONSE] before its answer.",
    "all of the tides are at six.",
    "The analysis is simple: assistantfinal is a token pair.",
    "analysis shows the tide is at six.",
    "Wrap each call in <tool_call>",
    "The opener is `[TOOL_CALLS]`",
]
FRAMED += FRAMED_ROUND_FIVE
FRAMING_MENTIONED += FRAMING_MENTIONED_ROUND_FIVE


def test_harmony_as_words_gives_the_call_and_the_analysis_as_reasoning():
    content = ('analysisThe user wants the weather in Oslo.assistantcommentary '
               'to=functions.get_weather json{"city": "Oslo"}')
    message, _ = _message(content)
    assert [(c.name, json.loads(c.arguments)) for c in message.calls] == [
        ("get_weather", {"city": "Oslo"})]
    assert _split(message) == ("The user wants the weather in Oslo.", None)


def test_harmony_as_words_after_a_call_keeps_the_final_message_as_the_answer():
    content = ('analysisWeather first.assistantcommentary to=functions.get_weather json'
               '{"city": "Oslo"}assistantfinal Checking Oslo now.')
    message, _ = _message(content)
    assert [c.name for c in message.calls] == ["get_weather"]
    assert _split(message) == ("Weather first.", "Checking Oslo now.")


def test_a_call_in_apriels_final_response_is_read_after_its_thinking():
    content = ("Need the file.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{\"name\": \"read\", "
               "\"arguments\": {\"path\": \"/a\"}}]</tool_calls>\n[END FINAL RESPONSE]<|end|>")
    message, _ = _message(content)
    assert [(c.name, json.loads(c.arguments)) for c in message.calls] == [("read", {"path": "/a"})]
    assert _split(message) == ("Need the file.", None)


@pytest.mark.parametrize(("content", "split"), FRAMED)
def test_the_markup_framing_a_plain_answer_is_dropped(content, split):
    message, _ = _message(content)
    assert _split(message) == split
    assert not message.calls


@pytest.mark.parametrize(("content", "split"), [
    (content, split) for content, split in FRAMED
    if split[0] is None and split[1] and content.count(split[1]) == 1])
def test_the_markup_framing_a_long_plain_answer_is_dropped_too(content, split):
    """The closing tokens are looked for near the end of the text only (a scan of a long
    answer cost tens of milliseconds per format): a long answer loses them all the same."""
    words = "A long answer, line after line of it.\n" * 5000
    answer = split[1]
    message, _ = _message(content.replace(answer, words + answer, 1))
    assert _split(message) == (None, words + answer)


@pytest.mark.parametrize("content", FRAMING_MENTIONED)
def test_framing_tokens_the_answer_mentions_stay(content):
    message, repairs = _message(content)
    assert _split(message) == (None, content)
    assert Repair("content", "answer_markup", None) not in repairs


def test_no_markup_is_dropped_without_formats_to_read():
    structured = ExtractionSettings(tools=TOOLS, formats=())  # e.g. response_format JSON
    content = "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>"
    assert _split(_message(content, structured)[0]) == (None, content)


# Item 7: the streamed mode gives the same message, whatever the template setting.
@pytest.mark.parametrize("setting", ["auto", "true", "false"])
@pytest.mark.parametrize("content", [text for text, _ in LONE_CLOSED + FRAMED]
                         + LONE_MENTIONED + FRAMING_MENTIONED + [CUT])
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_both_modes_give_the_same_message(setting, content, finish):
    completion = vllm_completion(content, finish_reason=finish)
    buffered, streamed = both_modes(
        completion, settings={"thinking_opened_by_template": setting}, size=3)
    assert streamed == buffered
