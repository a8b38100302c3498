"""Frames holding several calls are read call by call, not all-or-nothing.

As vLLM's llama4_pythonic parser does (tests/tool_parsers/test_llama4_pythonic_tool_parser.py::
test_bad_sibling_call_does_not_drop_good_calls), a list keeps its good calls when a sibling is
bad; the bad one is reported as left as text.
"""

from __future__ import annotations

import orjson
import pytest

from proxy.toolcalls import extract

TOOLS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}},
         "get_time": {"type": "object", "properties": {"timezone": {"type": "string"}}}}
WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
UNKNOWN = '{"name": "nope", "arguments": {}}'
TIME = '{"name": "get_time", "arguments": {"timezone": "UTC"}}'


def calls(text: str, **kwargs: object) -> list[tuple[str, dict]]:
    return [(c.name, orjson.loads(c.arguments)) for c in extract(text, TOOLS, **kwargs).calls]


def reasons(text: str, **kwargs: object) -> set[tuple[str, str | None]]:
    return {(x.reason, x.name) for x in extract(text, TOOLS, **kwargs).left_as_text}


@pytest.mark.parametrize("text", [
    f"[TOOL_CALLS][{WEATHER}, {UNKNOWN}]",                      # mistral
    f"<tool_calls>[{WEATHER}, {UNKNOWN}]</tool_calls>",          # tool_calls_tag
    f"<tool_calls>\n{WEATHER}\n{UNKNOWN}\n</tool_calls>",         # MiniMax-M1, one per line
    f"<tool_call>\n{WEATHER}\n{UNKNOWN}\n</tool_call>",           # hermes, one per line
    f'<|tool_call|>[{WEATHER}, {UNKNOWN}]',                      # granite
    f"[{WEATHER}, {UNKNOWN}]",                                   # bare JSON list
], ids=["mistral", "tool_calls_tag", "minimax_m1", "hermes", "granite", "bare_json"])
def test_an_unknown_sibling_does_not_drop_the_known_call(text):
    assert calls(text, deliver_unknown=False) == [("get_weather", {"city": "Paris"})]
    assert ("unknown_tool", "nope") in reasons(text, deliver_unknown=False)
    # By default a call plainly made (a frame with markers) to a tool not offered is
    # delivered as written; in a bare JSON list the name still decides what is a call.
    marked = not text.startswith("[{")
    assert calls(text) == [("get_weather", {"city": "Paris"}), *[("nope", {})] * marked]


def test_a_named_tool_choice_takes_its_call_out_of_a_parallel_list():
    text = f"[TOOL_CALLS][{WEATHER}, {TIME}]"
    assert calls(text, only="get_time") == [("get_time", {"timezone": "UTC"})]
    assert ("not_the_chosen_tool", "get_weather") in reasons(text, only="get_time")


def test_a_sibling_with_unreadable_arguments_does_not_drop_the_others():
    text = f'[TOOL_CALLS][{WEATHER}, {{"name": "get_time", "arguments": 3}}]'
    assert calls(text) == [("get_weather", {"city": "Paris"})]
    assert ("arguments_not_object", "get_time") in reasons(text)


def test_a_list_of_known_calls_is_read_whole():
    """What holds today and must keep holding: every call of a good list, in order."""
    text = f"[TOOL_CALLS][{WEATHER}, {TIME}]"
    assert calls(text) == [("get_weather", {"city": "Paris"}), ("get_time", {"timezone": "UTC"})]
