"""Never invent (issue 3, item 5): what is not a call to one of the request's tools stays
text, byte-identical, and the reason is reported."""

from __future__ import annotations

import ast
import warnings

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from proxy.toolcalls import extract

TOOLS = {
    "read": {"type": "object", "properties": {"path": {"type": "string"}}},
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def assert_text(text: str, **kwargs: object) -> list[tuple[str, str]]:
    found = extract(text, TOOLS, **kwargs)
    assert found.calls == []
    assert found.content == text
    return [(x.format, x.reason) for x in found.left_as_text]


MARKED_UNKNOWN = [
    '<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>',
    "<tool_call>\n<function=rm_rf>\n<parameter=path>\n/\n</parameter>\n</function>\n</tool_call>",
    '[TOOL_CALLS]rm_rf[ARGS]{"path": "/"}',
    "<tool_call>rm_rf<arg_key>path</arg_key><arg_value>/</arg_value></tool_call>",
    'commentary to=functions.rm_rf json{"path": "/"}',
    '<|tool_call_begin|>functions.rm_rf:0<|tool_call_argument_begin|>{"path": "/"}'
    "<|tool_call_end|>",
]
SHAPED_UNKNOWN = [
    '{"name": "rm_rf", "arguments": {}}',
    "[rm_rf(path='/')]",
    '```json\n{"name": "rm_rf", "arguments": {}}\n```',
    '{"name": "rm_rf", "parameters": {}}; {"name": "rm_rf", "parameters": {}}',
    'rm_rf\n{"path": "/"}',
    '<|python_tag|>rm_rf.call(path="/")',
    '{"name": "rm_rf", "arguments": {}}</tool_call>',
]


@pytest.mark.parametrize("text", MARKED_UNKNOWN + SHAPED_UNKNOWN)
def test_unknown_names_stay_text_when_the_operator_keeps_that_rule(text):
    reasons = assert_text(text, deliver_unknown=False)
    assert "unknown_tool" in {reason for _, reason in reasons}


@pytest.mark.parametrize("text", MARKED_UNKNOWN)
def test_a_call_made_with_markers_to_an_unknown_name_is_delivered_as_written(text):
    # Issue 26, item 6: the model plainly made a call; the agent answers "no such tool".
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments), c.repairs[-1]) for c in found.calls] == [
        ("rm_rf", {"path": "/"}, "unknown_tool")]
    assert found.content == ""


@pytest.mark.parametrize("text", SHAPED_UNKNOWN)
def test_a_frame_recognised_by_shape_alone_needs_a_known_name(text):
    # Bare JSON, pythonic lists, code fences, Llama's `;` objects, Functionary's name line,
    # a built-in tool, a call missing its opening tag: the name decides what is a call.
    assert "unknown_tool" in {reason for _, reason in assert_text(text)}


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>',
    "Earlier I called <tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call> and it "
    "failed.",
    'Emit `<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>` to delete.',
])
def test_an_unknown_name_is_never_delivered_beside_a_named_tool_choice_or_in_prose(text):
    assert_text(text, only="read")
    if not text.startswith("<"):
        assert_text(text)  # a mention stays a mention, whatever its name


@pytest.mark.parametrize("text", [
    '<tool_call>{"function": "read", "arguments": {"path": "/a"}}</tool_call>',
    '<tool_call>{"type": "function", "function": {"name": "read", "arguments": '
    '{"path": "/a"}}}</tool_call>',
    '{"function": {"name": "read", "arguments": {"path": "/a"}}}',
])
def test_the_envelope_spellings_of_issue_41_are_read(text):
    """Issue 41 (item 1): `function` as the name's key, and the OpenAI call object nested
    under `function`, are envelopes (these stayed text before; see repair/envelope.py)."""
    found = extract(text, TOOLS, deliver_unknown=False)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [("read", {"path": "/a"})]


@pytest.mark.parametrize("text", [
    '<tool_call>{"function=read","parameters":{"path":"/a"}}</tool_call>',
    '<tool_call>{"name": "read", "arguments": {"path": "/a"}, "parameters": {}}</tool_call>',
    '<tool_call>{"name": "read", "arguments": {"path": "/a"}, "extra": 1}</tool_call>',
'<tool_call>{"name": "get_weather", "arguments": null}</tool_call>',
    '<tool_call>{"name": "read", "arguments": [1, 2]}</tool_call>',
    '<tool_call>{"name": "read", "arguments": "not json"}</tool_call>',
])
def test_shapes_we_do_not_recognise_stay_text(text):
    assert assert_text(text)  # and a reason is reported


@pytest.mark.parametrize("text", [
    'To read a file, the model would answer {"name": "read", "arguments": {"path": "/a"}} '
    "and the client runs it.",
    'Here is an example call:\n{"name": "read", "arguments": {"path": "/a"}}\nThat is the shape.',
    'Example:\n```json\n{"name": "read", "arguments": {"path": "/a"}}\n```\nUse it like that.',
    "You could write [read(path='/a')] in pythonic style, or JSON.",
])
def test_examples_in_prose_stay_text(text):
    assert_text(text)


def test_a_schema_stays_text():
    schema = {"name": "read", "parameters": {"type": "object", "properties":
                                             {"path": {"type": "string"}}}}
    text = "The tool is declared as:\n" + orjson.dumps(schema).decode() + "\nwith that schema."
    assert_text(text)


def test_a_bare_schema_is_not_a_call_with_parameters():
    text = orjson.dumps({"type": "object", "properties": {"path": {"type": "string"}}}).decode()
    assert_text(text)


@pytest.mark.parametrize("text", [
    'Emit `<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>` to read.',
    "Qwen writes `<function=read>` then parameters.",
    "Use `<tool_calls>[...]</tool_calls>` for Jamba.",
    'GLM uses `<tool_call>read<arg_key>path</arg_key><arg_value>/a</arg_value></tool_call>`.',
])
def test_inline_code_mentions_stay_text(text):
    assert_text(text)


def test_named_tool_choice_only_extracts_that_function():
    text = ('<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>\n'
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>')
    found = extract(text, TOOLS, only="get_weather")
    assert [c.name for c in found.calls] == ["get_weather"]
    assert found.content == '<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>'
    assert [(x.reason, x.name) for x in found.left_as_text] == [("not_the_chosen_tool", "read")]


def test_named_tool_choice_takes_only_that_call_from_a_list():
    text = ('[TOOL_CALLS][{"name": "read", "arguments": {"path": "/a"}}, '
            '{"name": "get_weather", "arguments": {"city": "Paris"}}]')
    found = extract(text, TOOLS, only="get_weather")
    assert [(c.name, c.arguments) for c in found.calls] == [("get_weather", '{"city":"Paris"}')]
    assert [(x.reason, x.name) for x in found.left_as_text] == [("not_the_chosen_tool", "read")]
    assert_text(text, only="exec")


@pytest.mark.parametrize("bad", [
    '{"name": "rm_rf", "arguments": {"path": "/"}}', '{"function": "read", "code": 3}',
    '{"name": "read", "arguments": "not json"}', '{"name": 42, "arguments": {}}'])
def test_a_bad_sibling_in_a_list_does_not_drop_the_good_calls(bad):
    good = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    for text in (f"[TOOL_CALLS][{good}, {bad}]", f"<tool_call>[{bad}, {good}]</tool_call>",
                 f"[{good}, {bad}]"):
        found = extract(text, TOOLS, deliver_unknown=False)
        assert [c.name for c in found.calls] == ["get_weather"], text
        assert len(found.left_as_text) == 1
        assert found.content == ""
    assert_text(f"[TOOL_CALLS][{bad}, {bad}]", deliver_unknown=False)


def test_no_tools_means_nothing_is_extracted():
    text = '<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>'
    found = extract(text, {})
    assert (found.calls, found.content) == ([], text)


def test_content_is_byte_identical_with_odd_whitespace_when_nothing_is_taken():
    text = "  \r\n<tool_call>\t{\"name\": \"nope\", \"arguments\": {}}  </tool_call>\n\n  "
    assert_text(text, deliver_unknown=False)
    assert_text(text.replace('"arguments": {}', '"arguments": []'))


# --- a value is never given a character the model did not write (issue 37, item 5) -----------

_PIECES = ["\\", "\\\\", "n", "t", "u", "u00e9", "U", "d", "x41", "/", "a", " ", "é", "'"]


@settings(max_examples=300, deadline=None)
@given(st.tuples(st.lists(st.sampled_from(_PIECES), max_size=8).map("".join),
                 st.sampled_from(["\\U", "\\q", "\\d", "\\x41", "\\u12", "\\'"]),
                 st.lists(st.sampled_from(_PIECES), max_size=8).map("".join)).map("".join))
def test_a_string_with_an_escape_json_does_not_define_is_read_as_written(written):
    """Whatever the repair path (a tagged frame, arguments as a JSON string, a bare object,
    a Python literal), a string one of whose escapes JSON does not define is its characters
    as written: never a newline, tab or other character made of a backslash and a letter."""
    if (len(written) - len(written.rstrip("\\"))) % 2:
        written += "a"  # a backslash before the closing quote would escape it
    assume(_json_refuses(written))  # only the strings a repair must choose a reading of
    frames = ['<tool_call>{"name": "read", "arguments": {"path": "%s"}}</tool_call>',
              '{"name": "read", "arguments": {"path": "%s"}}']
    for frame in frames:
        found = extract(frame % written, TOOLS)
        assert [orjson.loads(c.arguments) for c in found.calls] == [{"path": written}], frame
    if "'" not in written and _python_refuses(written):
        found = extract(f"[read(path='{written}')]", TOOLS)
        assert [orjson.loads(c.arguments) for c in found.calls] == [{"path": written}]


def _python_refuses(body: str) -> bool:
    """Whether Python finds an escape of a single-quoted string body undefined or malformed
    (it warns of the one, refuses the other)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            ast.literal_eval("'" + body + "'")
        except (SyntaxError, SyntaxWarning, ValueError):
            return True
    return False


def _json_refuses(body: str) -> bool:
    """Whether an escape in a string body is not JSON's."""
    try:
        orjson.loads('"' + body + '"')
    except orjson.JSONDecodeError:
        return True
    return False
