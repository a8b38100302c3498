"""Where a frame sits decides call or mention (proxy.toolcalls.context), for every format."""

from __future__ import annotations

import pytest

from proxy.toolcalls import extract
from proxy.turn.normalize import ExtractionSettings, normalize
from tests.fake_vllm import vllm_completion

TOOLS = {
    "read": {"type": "object", "properties": {"path": {"type": "string"}}},
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}}},
}
HERMES = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
QWEN = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n" \
       "</tool_call>"
GLM = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
HARMONY = ('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
           '{"city": "Paris"}<|call|>')
KIMI = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>'
        "<|tool_calls_section_end|>")
LLAMA = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}'
MISTRAL = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]'
BARE = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
PYTHONIC = "[get_weather(city='Paris')]"
FRAMES = {"hermes": HERMES, "qwen_xml": QWEN, "glm": GLM, "harmony": HARMONY, "kimi_k2": KIMI,
          "llama3": LLAMA, "mistral": MISTRAL}


def calls(text: str) -> list[tuple[str, str]]:
    return [(c.name, c.arguments) for c in extract(text, TOOLS).calls]


def refused(text: str) -> set[str]:
    """The reasons the frames stayed text (none when the parser itself passed them over)."""
    found = extract(text, TOOLS)
    assert found.calls == []
    assert found.content == text
    return {left.reason for left in found.left_as_text}


PARIS = [("get_weather", '{"city":"Paris"}')]


@pytest.mark.parametrize("fmt", sorted(FRAMES))
def test_a_frame_after_prose_or_alone_is_a_call(fmt):
    frame = FRAMES[fmt]
    assert calls(frame) == PARIS
    assert calls(f"I'll check the weather in Paris.\n{frame}") == PARIS
    assert calls(f"Let me check: {frame}") == PARIS
    if fmt != "mistral":  # [TOOL_CALLS] must end the output (mistral's own rule)
        assert calls(f"{frame}\nI will report back.") == PARIS


@pytest.mark.parametrize("fmt", sorted(FRAMES))
def test_a_frame_in_a_fenced_example_is_text(fmt):
    text = (f"I call tools with this format:\n\n```xml\n{FRAMES[fmt]}\n```\n\n"
            "The runtime then executes it and sends back the result.")
    assert refused(text) <= {"example_in_code_fence"}


@pytest.mark.parametrize("fmt", sorted(FRAMES))
def test_a_fenced_frame_that_ends_the_answer_is_a_call_unless_introduced_as_an_example(fmt):
    if fmt != "mistral":  # [TOOL_CALLS] must end the output (mistral's own rule)
        assert calls(f"Checking now.\n```\n{FRAMES[fmt]}\n```") == PARIS
    assert refused(f"Here is an example:\n```\n{FRAMES[fmt]}\n```") <= {"example_in_prose"}


@pytest.mark.parametrize("fmt", sorted(FRAMES))
@pytest.mark.parametrize("quote", ["`{}`", "` {} `", "``{}``", "Use `x {} y` here."])
def test_a_frame_in_inline_code_is_text(fmt, quote):
    assert refused(quote.format(FRAMES[fmt])) <= {"inline_code", "inline_mention"}


@pytest.mark.parametrize("fmt", sorted(FRAMES))
def test_a_frame_mid_sentence_is_a_mention(fmt):
    text = f"Earlier I called {FRAMES[fmt]} and it returned 21°C, so take a coat."
    assert refused(text) <= {"inline_mention"}


@pytest.mark.parametrize("fmt", sorted(FRAMES))
@pytest.mark.parametrize("layout", ["Checking Paris. {} Then I will report back.",
                                    "Checking Paris.{}Then I will report back.",
                                    "Je vérifie ! {} Ensuite je réponds.",
                                    "我来查一下天气。{}然后告诉你。"])
def test_a_marked_frame_between_two_sentences_is_a_call(fmt, layout):
    if fmt == "mistral":  # [TOOL_CALLS] must end the output (mistral's own rule)
        return
    assert calls(layout.format(FRAMES[fmt])) == PARIS


@pytest.mark.parametrize("fmt", sorted(FRAMES))
@pytest.mark.parametrize("layout", ["I called the tool. {} returned 21°C, so take a coat.",
                                    "The model writes {} Then vLLM parses it.",
                                    "Recall that {}. It is parsed upstream."])
def test_a_marked_frame_inside_a_sentence_stays_a_mention(fmt, layout):
    assert refused(layout.format(FRAMES[fmt])) <= {"inline_mention"}


@pytest.mark.parametrize("frame", [BARE, PYTHONIC])
def test_a_call_by_shape_between_two_sentences_stays_text(frame):
    assert refused(f"I ran it. {frame} It said 21°C.") <= {"inline_mention"}


def test_special_tokens_around_a_frame_end_and_start_sentences():
    harmony = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
               + HARMONY + "<|start|>assistant<|channel|>final<|message|>It is sunny.")
    assert calls(harmony) == PARIS
    llama4 = ("User wants the weather in Paris. <|python_start|>[get_weather(city='Paris')]"
              "<|python_end|> In this way we get it.")
    assert calls(llama4) == PARIS
    assert refused("Earlier I sent <|python_start|>[get_weather(city='Paris')]<|python_end|>"
                   " and it worked.") <= {"inline_mention"}


@pytest.mark.parametrize("text", [
    f"Here is an example of a request you could send:\n{BARE}",
    f"For instance, a weather lookup would be written as:\n\n{BARE}",
    f"Output:\n{BARE}",
    f"The call would be:\n{PYTHONIC}",
    f"In Python you would write:\n{PYTHONIC}",
    f"You invoke it like so:\n```json\n{BARE}\n```",
    f"Sample request:\n```json\n{BARE}\n```",
    f"Here is an example of the format:\n{HERMES}",
    f"The syntax looks like this:\n\n{QWEN}",
    f"The GLM-4.5 format is:\n\n{GLM}\n\nEach argument gets a key and a value tag.",
    f"Their call formats are:\n{HERMES}",
])
def test_a_frame_introduced_as_an_example_is_text(text):
    assert refused(text) == {"example_in_prose"}


@pytest.mark.parametrize("text", [
    f"{BARE}", f"Sure, checking the weather.\n{BARE}", f"{PYTHONIC}",
    f"Let me look that up.\n{PYTHONIC}", f"Checking.\n```json\n{BARE}\n```",
])
def test_a_call_by_shape_after_a_plain_lead_in_is_a_call(text):
    assert calls(text) == PARIS


def test_frames_side_by_side_on_one_line_are_not_each_others_prose():
    two = HERMES + " " + HERMES.replace("Paris", "Rome")
    assert [args for _, args in calls(two)] == ['{"city":"Paris"}', '{"city":"Rome"}']
    three = "; ".join([BARE, BARE.replace("Paris", "Rome"), BARE.replace("Paris", "Oslo")])
    assert len(extract(three, TOOLS).calls) == 3


def test_only_the_mention_stays_when_a_real_call_follows():
    text = (f"The model outputs {HERMES} tags, which vLLM parses.\nNow for real:\n"
            + HERMES.replace("Paris", "Rome"))
    found = extract(text, TOOLS)
    assert [(c.name, c.arguments) for c in found.calls] == [("get_weather", '{"city":"Rome"}')]
    assert found.content == f"The model outputs {HERMES} tags, which vLLM parses.\nNow for real:"
    assert [left.reason for left in found.left_as_text] == ["inline_mention"]


def test_a_schema_is_not_arguments():
    schema = ('{"name": "get_weather", "parameters": {"type": "object", "properties": '
              '{"city": {"type": "string"}}, "required": ["city"]}}')
    assert refused(schema) == {"schema_not_arguments"}
    assert refused(f"<tools>{schema}</tools>") == {"schema_not_arguments"}
    takes_a_schema = {"define": {"type": "object", "properties": {
        "type": {"type": "string"}, "properties": {"type": "object"}}}}
    text = ('{"name": "define", "arguments": {"type": "object", "properties": {"a": 1}}}')
    assert [c.name for c in extract(text, takes_a_schema).calls] == ["define"]


def _normalized(content: str | None, reasoning: str | None = None,
                thinking_as_reasoning: bool = True) -> dict:
    result = normalize(vllm_completion(content, reasoning=reasoning),
                                         ExtractionSettings(
                                             tools=TOOLS,
                                             reasoning_from_content=thinking_as_reasoning))
    return result.first


def test_a_revised_draft_in_the_reasoning_yields_only_the_final_call():
    reasoning = (f"First {HERMES}\nhmm no, Rome is where the user is:\n"
                 + HERMES.replace("Paris", "Rome"))
    message = _normalized(None, reasoning)
    assert [c.arguments for c in message.calls] == ['{"city":"Rome"}']
    two = HERMES + "\n" + HERMES.replace("Paris", "Rome")  # one block: both are meant
    assert len(_normalized(None, "Calling both:\n" + two).calls) == 2


def test_a_call_mentioned_in_the_reasoning_is_not_recovered():
    message = _normalized(None, f"Last turn I called {HERMES} and got 21C. Nothing to do.")
    assert not message.calls


def test_seed_oss_thinking_is_split_off_like_think():
    thinking = (f"<seed:think>\nThe format is {QWEN.replace('tool_call', 'seed:tool_call')}. "
                "Wait, fine.</seed:think>")
    call = QWEN.replace("tool_call", "seed:tool_call")
    message = _normalized(thinking + call, thinking_as_reasoning=False)
    assert [c.name for c in message.calls] == ["get_weather"]
    assert message.content == thinking
    message = _normalized(thinking + call)  # the default: the thinking is the reasoning
    assert [c.name for c in message.calls] == ["get_weather"]
    assert message.reasoning == thinking.removeprefix("<seed:think>\n").removesuffix(
        "</seed:think>")
    assert message.content is None


def test_backticks_inside_frames_are_payload_not_inline_code():
    tick = HERMES.replace("Paris", "`")
    text = f"{tick}\nthen\n{HERMES}\nand\n{tick}"
    assert [args for _, args in calls(text)] == ['{"city":"`"}', '{"city":"Paris"}',
                                                  '{"city":"`"}']
    assert refused(f"`{tick}`") <= {"inline_code"}


@pytest.mark.parametrize("lead_in", [
    "I checked the schema, for example the config file, and it would help to look closer.",
    "Such as the weather in Paris; let me look it up.",
    "For example, the user asked about Paris.\n\nNow:",
])
@pytest.mark.parametrize("frame", [HERMES, QWEN, BARE, PYTHONIC])
def test_example_words_in_prose_that_does_not_introduce_the_frame_change_nothing(lead_in, frame):
    assert calls(f"{lead_in}\n{frame}") == PARIS


# Issue 21, item 5: calls beside prose on one line, and what stays a mention. The rule is
# docs/formats.md's "What is and is not a call"; every format with markers of its own obeys it.
BESIDE = {**FRAMES,
          "gemma4": '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>',
          "deepseek": ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                       '{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
          "minimax_m2": ('<minimax:tool_call><invoke name="get_weather"><parameter name="city">'
                         "Paris</parameter></invoke></minimax:tool_call>")}


@pytest.mark.parametrize("fmt", sorted(BESIDE))
@pytest.mark.parametrize("layout", [
    "Checking now.{}", "Checking now. {}", "Let me check the weather{}", "Sure!{}\n",
    "{}Then I report.", "{} Then I report.", "Checking now.{}Then I report.",
    "{}\nthen I report.", "Checking now.\n{}\nand then I report.",
])
def test_a_frame_directly_beside_prose_is_a_call(fmt, layout):
    assert calls(layout.format(BESIDE[fmt])) == PARIS


@pytest.mark.parametrize("fmt", sorted(BESIDE))
@pytest.mark.parametrize(("layout", "reason"), [
    ('He wrote "{}" before.', "quoted"),
    ("The call was “{}”", "quoted"),
    ("'{}'", "quoted"),
    ("Earlier I called {}.", "inline_mention"),
    ("Last time {}, it returned 21°C.", "inline_mention"),
    ("{} is how a call looks.", "inline_mention"),
    ("{} returned 21°C yesterday", "inline_mention"),
    ("As before (`{}`) I wait.", "inline_code"),
    ("For example:\n```\n{}\n```", "example_in_prose"),
])
def test_a_frame_quoted_or_inside_a_sentence_stays_text(fmt, layout, reason):
    assert refused(layout.format(BESIDE[fmt])) <= {reason}  # (or its parser passed it over)


def test_a_marker_that_is_a_plain_word_must_stand_apart():
    phi = 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    assert calls(f"Checking now. {phi}") == PARIS
    assert refused(f"import os.{phi}") == set()  # `x.functools[` is Python, not a call


def test_each_rule_names_its_reason():
    assert refused(f'He wrote "{HERMES}" before.') == {"quoted"}
    assert refused(f"The call was “{QWEN}”") == {"quoted"}
    assert refused(f"Earlier I called {KIMI}.") == {"inline_mention"}
    assert refused(f"{HARMONY} is how a call looks.") == {"inline_mention"}
    assert calls(f"“Sure.” {HERMES}") == PARIS  # quotes that do not enclose the frame
