"""Unicode in calls: surrogate-pair escapes read as JSON reads them, and arguments that cannot
be written as JSON (lone surrogates, extreme depth) leave their frame as text,
reported per frame, never a crash or a `parser_error`."""

from __future__ import annotations

import orjson
import pytest

from proxy.toolcalls import extract

TOOLS = {
    "read": {"type": "object", "properties": {"path": {"type": "string"}}},
    "count": {"type": "object", "properties": {"n": {"type": "number"},
                                               "tags": {"type": "array"}}},
}
ROCKET = "\U0001F680"


def calls_of(text: str) -> list[tuple[str, dict, str]]:
    found = extract(text, TOOLS)
    return [(c.name, orjson.loads(c.arguments), c.format) for c in found.calls]


def left_of(text: str) -> list[tuple[str, str, str | None]]:
    found = extract(text, TOOLS)
    assert found.calls == []
    assert found.content == text
    return [(x.format, x.reason, x.name) for x in found.left_as_text]


@pytest.mark.parametrize(("text", "arguments", "fmt"), [
    ('[read(path="\\ud83d\\ude80")]', {"path": ROCKET}, "pythonic"),
    ("[read(path='\\uD83D\\uDE80 and \\u00e9')]", {"path": ROCKET + " and é"}, "pythonic"),
    (f'[read(path="{ROCKET} 東京")]', {"path": f"{ROCKET} 東京"}, "pythonic"),
    ('[read(path={"\\ud83d\\ude80": ["\\ud83d\\ude80"]})]',
     {"path": {ROCKET: [ROCKET]}}, "pythonic"),
    ("<tool_call>{'name': 'read', 'arguments': {'path': '\\ud83d\\ude80'}}</tool_call>",
     {"path": ROCKET}, "hermes"),
    ('<tool_call>{"name": "read", "arguments": {"path": "\\ud83d\\ude80"}}</tool_call>',
     {"path": ROCKET}, "hermes"),
    (f"<tool_call>\n<function=read>\n<parameter=path>\n{ROCKET}\n</parameter>\n</function>\n"
     "</tool_call>", {"path": ROCKET}, "qwen_xml"),
    # XML values are raw text: an escape written there is the text the model wrote.
    ("<tool_call>\n<function=read>\n<parameter=path>\n\\ud83d\n</parameter>\n</function>\n"
     "</tool_call>", {"path": "\\ud83d"}, "qwen_xml"),
    ('<tool_call>\n<function=count>\n<parameter=tags>\n["\\ud83d\\ude80"]\n</parameter>\n'
     "</function>\n</tool_call>", {"tags": [ROCKET]}, "qwen_xml"),
    # not a finite number: stays the text written, never JSON's null
    ("<tool_call>\n<function=count>\n<parameter=n>\n1e999\n</parameter>\n</function>\n"
     "</tool_call>", {"n": "1e999"}, "qwen_xml"),
])
def test_escapes_and_emoji_are_read(text: str, arguments: dict, fmt: str) -> None:
    name = "count" if "count" in text else "read"
    assert calls_of(text) == [(name, arguments, fmt)]


@pytest.mark.parametrize(("text", "expected"), [
    ('[read(path="\\ud83d")]', ("pythonic", "invalid_unicode", "read")),
    ('[read(path="\\ude80\\ud83d")]', ("pythonic", "invalid_unicode", "read")),
    ('[read(path={"\\udc00": 1})]', ("pythonic", "invalid_unicode", "read")),
    ("<tool_call>{'name': 'read', 'arguments': {'path': '\\ud83d'}}</tool_call>",
     ("hermes", "invalid_unicode", "read")),
    ('<tool_call>{"name": "read", "arguments": {"path": "\\ud83d"}}</tool_call>',
     ("hermes", "invalid_json", None)),
    ("<tool_call>\n<function=read>\n<parameter=path>\n\ud83d\n</parameter>\n</function>\n"
     "</tool_call>", ("qwen_xml", "invalid_unicode", "read")),
    ("<tool_call>read\n<arg_key>path</arg_key>\n<arg_value>x\udfff</arg_value>\n</tool_call>",
     ("glm", "invalid_unicode", "read")),
    ('<minimax:tool_call>\n<invoke name="read">\n<parameter name="path">\ud800</parameter>\n'
     "</invoke>\n</minimax:tool_call>", ("minimax_m2", "invalid_unicode", "read")),
    ('<tool_call>{"name": "count", "arguments": {"tags": ' + "[" * 300 + "]" * 300
     + "}}</tool_call>", ("hermes", "unserialisable_arguments", "count")),
])
def test_unwritable_arguments_leave_the_frame_as_text(text: str, expected: tuple) -> None:
    assert left_of(text) == [expected]


def test_a_refused_frame_does_not_stop_the_next_one_in_its_format() -> None:
    bad = "<tool_call>\n<function=read>\n<parameter=path>\n\ud83d\n</parameter>\n</function>\n"
    good = "<function=read>\n<parameter=path>\n/a\n</parameter>\n</function>\n</tool_call>"
    found = extract(f"{bad}</tool_call>\n<tool_call>\n{good}", TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [("read", {"path": "/a"})]
    assert [(x.reason, x.name) for x in found.left_as_text] == [("invalid_unicode", "read")]
    assert found.content == f"{bad}</tool_call>"
