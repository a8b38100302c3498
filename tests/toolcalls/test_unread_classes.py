"""The calls no rule read before issue 37 (item 4), each beside its negative twin: the same
syntax mentioned in prose, in code or in quotes stays text, byte for byte."""

from __future__ import annotations

import orjson
import pytest

from proxy.toolcalls import extract

STRING = {"type": "string"}
TOOLS = {
    "shell": {"type": "object", "properties": {"cmd": STRING}},
    "lookup-word": {"type": "object", "properties": {"word": STRING}},
    "fs.stat": {"type": "object", "properties": {"path": STRING}},
    "now": {"type": "object", "properties": {}},
    "forecast": {"type": "object", "properties": {"town": STRING, "days": {"type": "integer"}}},
    "search": {"type": "object", "properties": {"q": STRING}},
}
G = '<|"|>'  # Gemma 4's string delimiter


def calls(text: str, **kwargs: object) -> list[tuple[str, dict]]:
    return [(c.name, orjson.loads(c.arguments)) for c in extract(text, TOOLS, **kwargs).calls]


def stays_text(text: str) -> None:
    found = extract(text, TOOLS, deliver_unknown=False)
    assert found.calls == []
    assert found.content == text


# --- Gemma 4 without its opening token ------------------------------------------------------

@pytest.mark.parametrize(("text", "content"), [
    (f"I will list it first.\ncall:shell{{cmd:{G}ls -1 /srv{G}}}", "I will list it first."),
    (f"<|tool_call>:call:shell{{cmd:{G}ls -1 /srv{G}}}", ""),
    (f"<call>shell{{cmd:{G}ls -1 /srv{G}}}", ""),
    (f"<|tool_call>call:shell{{cmd:{G}ls -1 /srv{G}}}<turn|>", ""),
    (f"Checking.<channel|>call:shell{{cmd:{G}ls -1 /srv{G}}}", "Checking.<channel|>"),
])
def test_a_gemma4_call_without_its_token_is_read(text, content):
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("shell", {"cmd": "ls -1 /srv"})]
    assert found.content == content


def test_gemma4_bare_calls_keep_names_with_dots_and_dashes_and_follow_one_another():
    text = (f"call:lookup-word{{word:{G}quay{G}}}\n"
            f"call:fs.stat{{path:{G}/etc/hosts{G}}}")
    assert calls(text) == [("lookup-word", {"word": "quay"}), ("fs.stat", {"path": "/etc/hosts"})]


@pytest.mark.parametrize("text", [
    f"In Gemma's syntax you write call:shell{{cmd:{G}ls{G}}} and the runtime runs it.",
    f"The syntax is `call:shell{{cmd:{G}ls{G}}}`.",
    f'He typed "call:shell{{cmd:{G}ls{G}}}" by mistake.',
    f"call:shell{{cmd:{G}ls{G}}} is how a call looks.",
    f"call:format_disk{{drive:{G}C{G}}}",  # bare: only an offered tool's name is a call
    f"call:shell{{cmd:{G}ls",  # cut before its end
])
def test_a_bare_gemma4_call_in_prose_code_or_quotes_stays_text(text):
    stays_text(text)


# --- a call frame followed by text on its line ----------------------------------------------

_NOW_GLM = "<tool_call>now</tool_call>"
_FORECAST = {
    "hermes": '<tool_call>{"name": "forecast", "arguments": {"town": "Oslo"}}</tool_call>',
    "glm": "<tool_call>forecast<arg_key>town</arg_key><arg_value>Oslo</arg_value></tool_call>",
    "qwen_xml": "<tool_call>\n<function=forecast>\n<parameter=town>\nOslo\n</parameter>\n"
                "</function>\n</tool_call>",
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.forecast:0"
               '<|tool_call_argument_begin|>{"town": "Oslo"}<|tool_call_end|>'
               "<|tool_calls_section_end|>",
    "llama3": '<function=forecast>{"town": "Oslo"}</function>',
}


@pytest.mark.parametrize("fmt", sorted(_FORECAST))
@pytest.mark.parametrize("after", [" and then I will summarise it", "let me know if you need more",
                                   " once it answers, I report back."])
def test_a_marked_frame_starting_its_line_with_words_after_it_is_a_call(fmt, after):
    """Where vLLM's parsers read a call and keep the words after it as content."""
    found = extract(_FORECAST[fmt] + after, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("forecast", {"town": "Oslo"})]
    # (Kimi K2's parsers keep the text around its calls as written; the others trim it)
    assert found.content == (after if fmt == "kimi_k2" else after.strip())


@pytest.mark.parametrize("fmt", sorted(_FORECAST))
@pytest.mark.parametrize("after", [" is how a call looks.", " returned 4°C yesterday.",
                                   " shows the shape", " then I would answer",
                                   " should be written on one line"])
def test_a_marked_frame_that_a_sentence_is_about_stays_text(fmt, after):
    """The words after it make the frame the subject of a sentence: a mention."""
    stays_text(_FORECAST[fmt] + after)


def test_a_call_with_no_arguments_followed_by_text_is_read():
    assert calls(_NOW_GLM + "and the clock will tell.") == [("now", {})]
    assert calls(_NOW_GLM + "\nThe clock will tell.") == [("now", {})]
    stays_text(f"Call {_NOW_GLM} to read the clock.")
    stays_text(f"{_NOW_GLM} takes no arguments.")


def test_kimi_k2_text_around_a_section_is_joined_as_written_as_its_parsers_join_it():
    section = _FORECAST["kimi_k2"]
    found = extract(f"Checking Oslo. {section} Back soon.", TOOLS)
    assert [c.name for c in found.calls] == ["forecast"]
    assert found.content == "Checking Oslo.  Back soon."
    assert extract(f"Checking Oslo. {section}", TOOLS).content == "Checking Oslo. "
    assert extract(f"\n{section}\n", TOOLS).content == ""  # space alone is no content
    hermes = extract(f"Checking Oslo. {_FORECAST['hermes']} Back soon.", TOOLS)
    assert hermes.content == "Checking Oslo.\nBack soon."  # the others: a line apart


# --- Qwen3-Coder parameters without their close ----------------------------------------------

def test_a_qwen_parameter_missing_its_close_is_read_as_vllm_reads_it():
    text = ("<tool_call>\n<function=forecast>\n<parameter=town>\nOslo\n<parameter=days>\n3\n"
            "</parameter>\n</function>\n</tool_call>")
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("forecast", {"town": "Oslo", "days": 3})]
    assert "missing_parameter_close" in found.calls[0].repairs


# --- Command R's `Action:` block -------------------------------------------------------------

_ACTION = '[{"tool_name": "search", "parameters": {"q": "tide tables"}}]'


@pytest.mark.parametrize("text", [
    f"Action: ```json\n{_ACTION}\n```",
    f"Action:```json\n{_ACTION}\n```",
    f"Action:\n```json\n{_ACTION}\n```",
    f"Action: ```json {_ACTION} ```",
    f"Plan: search first.\nAction: ```json\n{_ACTION}\n```<|END_OF_TURN_TOKEN|>",
])
def test_command_r_action_blocks_are_read(text):
    assert calls(text) == [("search", {"q": "tide tables"})]


@pytest.mark.parametrize("text", [
    f"Write the block as\nAction: ```json\n{_ACTION}\n```\nwhenever a search is needed.",
    f"The reply starts with Action: ```json\n{_ACTION}\n```",
    f"Action: ```json\n{_ACTION}",  # the fence never closes
])
def test_command_r_action_blocks_shown_in_prose_stay_text(text):
    stays_text(text)
