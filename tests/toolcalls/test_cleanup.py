"""Nothing but the model's prose stays in `content` once a call is taken (issue 21, item 3):
the markup around the frames goes with them; text that is not part of a frame is never
touched."""

from __future__ import annotations

import orjson
import pytest

from proxy.toolcalls import extract
from proxy.turn.normalize import ExtractionSettings, normalize
from tests.fake_vllm import vllm_completion

TOOLS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}},
         "read": {"type": "object", "properties": {"path": {"type": "string"}}}}
HERMES = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
JSON = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
QWEN = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "</function>\n</tool_call>")
GEMMA = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'
HARMONY = ('<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
           '<|message|>{"city": "Paris"}<|call|>')
ANALYSIS = "<|channel|>analysis<|message|>The user wants the weather.<|end|>"


def cleaned(text: str, truncated: bool = False) -> str:
    found = extract(text, TOOLS, truncated=truncated)
    assert [c.name for c in found.calls] == ["get_weather"] * len(found.calls) != []
    return found.content


@pytest.mark.parametrize(("text", "content"), [
    # wrappers written twice, or around the frame
    (f"<tool_call>\n{HERMES}\n</tool_call>", ""),
    (f"<tool_call>\n<tool_call>\n{JSON}\n</tool_call>\n</tool_call>", ""),
    (f"<response>\n{HERMES}\n</response>", ""),
    (f"Sure.\n<response>{HERMES}</response>", "Sure."),
    (f"Checking.<tools>{QWEN}</tools> Then I report.", "Checking.\nThen I report."),
    # empty wrappers beside the call
    (f"<tool_call>\n</tool_call>\n{HERMES}", ""),
    (f"{HERMES}\n<tool_call></tool_call>", ""),
    # stray or repeated closing tags
    (f"{HERMES}</tool_call>", ""),
    (f"{HERMES}\n</tool_call>\nDone.", "Done."),
    (f"{QWEN}\n</function>\n</tool_call>", ""),
    # a fenced block that held nothing but calls
    (f"Sure.\n```json\n{HERMES}\n```", "Sure."),
    (f"Sure.\n```\n{QWEN}\n```", "Sure."),
    (f"Both:\n```xml\n{HERMES}\n{QWEN}\n```", "Both:"),
    (f"```\ncode\n```\nChecking.\n```\n{HERMES}\n```", "```\ncode\n```\nChecking."),
    (f"Sure.\n~~~\n{HERMES}\n\n\n   ~~~", "Sure."),  # indented ≤ 3, after blank lines
    (f"Sure.\n```python\n{HERMES}\n```", "Sure."),  # whatever its language
    # Gemma 4 hands over to the tool with a token of its own
    (f"Let me check.{GEMMA}<|tool_response>", "Let me check."),
])
def test_markup_around_a_taken_call_goes_with_it(text, content):
    assert cleaned(text) == content


@pytest.mark.parametrize(("text", "content"), [
    (f"{HERMES}\n<tool_call>\n" + '{"name": "read", "argu', ""),  # a frame found cut
    (f"{HERMES}\n<tool_call>\n{{", ""),  # an opener and a bracket
    (f"{HERMES}\n<tool_", ""),  # a marker cut in the middle
    (f"{HERMES}\n<tool_call>\n<function=read>\n<parameter=pa", ""),
    (f"{QWEN}\n<tool_call>\n<function=read>\n<parameter=path>\n/tmp/a", ""),
    (f"Checking.\n{HERMES}\nAnd also: <tool_call>" + '{"name": "read", "arguments": {"pa',
     "Checking.\nAnd also:"),  # the prose before the cut call stays
])
def test_the_unfinished_call_an_output_cut_by_length_ends_with_is_left_out(text, content):
    found = extract(text, TOOLS, truncated=True)
    assert [c.name for c in found.calls] == ["get_weather"]
    assert found.content == content


@pytest.mark.parametrize("text", [
    f"{HERMES}\nThe rest of the answer was cut off here by the len",
    f"{HERMES}\n<b>bold</b> and mo",
    f"{HERMES}\n```python\ndef f(",
])
def test_prose_an_output_cut_by_length_ends_with_stays(text):
    found = extract(text, TOOLS, truncated=True)
    assert found.content == text[len(HERMES) + 1:]


def test_an_unfinished_call_stays_when_no_call_was_taken_or_the_output_was_not_cut():
    text = '<tool_call>\n{"name": "read", "argu'
    assert extract(text, TOOLS, truncated=True).content == text
    assert extract(f"{HERMES}\n<tool_call>\n{{", TOOLS).content == "<tool_call>\n{"


@pytest.mark.parametrize("text", [
    "Close a call with </tool_call>, then wait.",
    "```json\n{\"a\": 1}\n```\nThat is the config.",
    "<tool_call>\n</tool_call>",
    "<response>\nhello\n</response>",
    "Here:\n```\n```",
    ANALYSIS + "<|start|>assistant<|channel|>final<|message|>Sunny.<|return|>",
])
def test_text_is_byte_identical_when_no_call_is_taken(text):
    found = extract(text, TOOLS)
    assert found.calls == []
    assert found.content == text
    assert found.left_out == []


@pytest.mark.parametrize(("text", "content"), [
    (f"{HERMES}\n</tool_call> closes a call.", "</tool_call> closes a call."),
    (f"Close it with </tool_call>.\n{HERMES}", "Close it with </tool_call>."),
    (f"<response> is a tag.\n{HERMES}", "<response> is a tag."),
    (f"```\ncode\n```\n{HERMES}", "```\ncode\n```"),
    (f"```\nx = 1\n{HERMES}\n```", "```\nx = 1\n```"),
    (f"{HERMES}\n<b>not a call tag</b>", "<b>not a call tag</b>"),
    (f"I use <json> often.\n{HERMES}", "I use <json> often."),
    (f"{ANALYSIS}\n{HERMES}", ANALYSIS),  # Harmony's messages are read around its own calls
    (f"Sure.\n```\n{HERMES}\n    ```", "Sure.\n```\n```"),  # indented 4: not a close
    (f"Sure.\n```\n{HERMES} ```", "Sure.\n```\n```"),  # not on a line of its own
])
def test_text_beside_a_call_that_is_not_its_markup_is_untouched(text, content):
    assert cleaned(text) == content


def test_harmony_messages_around_a_call_are_split_into_reasoning_and_answer():
    final = "<|start|>assistant<|channel|>final<|message|>It is sunny in Paris.<|return|>"
    found = extract(ANALYSIS + HARMONY + final, TOOLS)
    assert [c.name for c in found.calls] == ["get_weather"]
    assert found.content == "It is sunny in Paris."
    assert found.reasoning == "The user wants the weather."
    preamble = "<|start|>assistant<|channel|>commentary<|message|>Checking the weather.<|end|>"
    found = extract(ANALYSIS + preamble + HARMONY, TOOLS)
    assert found.content == "Checking the weather."
    assert found.reasoning == "The user wants the weather."
    found = extract(HARMONY, TOOLS)  # nothing else: nothing else is found
    assert (found.content, found.reasoning) == ("", "")


def test_the_reasoning_found_beside_a_call_reaches_the_reasoning_field():
    content = ANALYSIS + HARMONY
    result = normalize(vllm_completion(content),
                                         ExtractionSettings(tools=TOOLS))
    message = result.first
    assert message.content is None
    assert message.reasoning == "The user wants the weather."
    assert [c.name for c in message.calls] == ["get_weather"]
    result = normalize(vllm_completion(content, reasoning="Upstream's."),
                                         ExtractionSettings(tools=TOOLS))
    message = result.first
    assert message.reasoning == "Upstream's.\nThe user wants the weather."


def test_left_out_says_what_left_the_content():
    text = f"Sure.\n<response>\n{HERMES}\n</response>"
    found = extract(text, TOOLS)
    assert found.content == "Sure."
    assert [(text[a:b], kind) for a, b, kind in found.left_out] == [
        (f"<response>\n{HERMES}\n</response>", "markup")]


def test_harmony_tokens_inside_a_calls_arguments_are_its_text():
    value = "<|channel|>analysis<|message|>quoted<|end|> and <|start|>assistant"
    found = extract(HARMONY.replace('"Paris"', orjson.dumps(value).decode())
                    + "\n<|start|>assistant<|channel|>final<|message|>Done.<|return|>", TOOLS)
    assert [orjson.loads(c.arguments) for c in found.calls] == [{"city": value}]
    assert found.content == "Done."
    assert found.reasoning in ("", None)
