"""Narrow, named repairs (issue 3, item 3): each one applied is recorded on the call."""

from __future__ import annotations

import json
import warnings

import orjson
import pytest

from proxy.toolcalls import extract
from proxy.toolcalls import repair as repair_module
from proxy.toolcalls.repair import loads_repaired

TOOLS = {
    "read": {"type": "object", "properties": {"path": {"type": "string"}}},
    "write": {"type": "object", "properties": {"path": {"type": "string"},
                                               "text": {"type": "string"}}},
}


def one_call(text: str, **kwargs: object) -> tuple[str, dict, tuple[str, ...]]:
    found = extract(text, TOOLS, **kwargs)
    assert len(found.calls) == 1, found
    call = found.calls[0]
    return call.name, orjson.loads(call.arguments), call.repairs


@pytest.mark.parametrize(("text", "arguments", "repair"), [
    ('<tool_call>{"name": "read", "arguments": {"path": "/a",}}</tool_call>',
     {"path": "/a"}, "trailing_comma"),
    ('<tool_call>{"name": "read", "arguments": {"path": "/a", "x": True, "y": None}}'
     "</tool_call>", {"path": "/a", "x": True, "y": None}, "python_literals"),
    ('<tool_call>{"name": "write", "arguments": {"path": "/a", "text": "line 1\nline 2\tx"}}'
     "</tool_call>", {"path": "/a", "text": "line 1\nline 2\tx"}, "raw_control_chars_in_string"),
    ('<tool_call>{"name": "read", "arguments": "{\\"path\\": \\"/a\\"}"}</tool_call>',
     {"path": "/a"}, "arguments_json_string"),
    ('<tool_call>{"name": "read", "parameters": {"path": "/a"}}</tool_call>',
     {"path": "/a"}, "parameters_as_arguments"),
    ('<tool_call>{"function=read","arguments":{"path":"/a"}}</tool_call>',
     {"path": "/a"}, "qwen_hybrid_function_key"),
    ("<tool_call>{'name': 'read', 'arguments': {'path': 'None of it', 'x': True}}</tool_call>",
     {"path": "None of it", "x": True}, "python_dict_literal"),
    ('<tool_call>{"name": "read", "arguments": {"path": "/a"}}', {"path": "/a"},
     "missing_close_tag"),
    ("[read(path='/a', recursive=true)]", {"path": "/a", "recursive": True},
     "json_literals_in_python"),
])
def test_repair_is_applied_and_named(text, arguments, repair):
    _, args, repairs = one_call(text)
    assert args == arguments
    assert repair in repairs


def test_valid_json_gets_no_repair():
    _, args, repairs = one_call('<tool_call>{"name": "read", "arguments": {"path": "/a"}}'
                                "</tool_call>")
    assert (args, repairs) == ({"path": "/a"}, ())


def test_strings_are_never_touched_by_repairs():
    text = ('<tool_call>{"name": "write", "arguments": {"path": "/a", '
            '"text": "True, None, [1,] stays"},}</tool_call>')
    _, args, repairs = one_call(text)
    assert args["text"] == "True, None, [1,] stays"
    assert repairs == ("trailing_comma",)


def test_close_tag_inside_a_json_string_does_not_end_the_frame():
    text = ('<tool_call>{"name": "write", "arguments": {"path": "/a", '
            '"text": "a </tool_call> b"}}</tool_call>')
    _, args, _ = one_call(text)
    assert args["text"] == "a </tool_call> b"


def test_several_calls_in_one_frame():
    text = ('<tool_call>[{"name": "read", "arguments": {"path": "/a"}}, '
            '{"name": "read", "arguments": {"path": "/b"}}]</tool_call>')
    found = extract(text, TOOLS)
    assert [orjson.loads(c.arguments)["path"] for c in found.calls] == ["/a", "/b"]
    assert all("several_calls_in_frame" in c.repairs for c in found.calls)


def test_native_list_format_records_no_repair_for_several_calls():
    text = ('<tool_calls>[{"name": "read", "arguments": {"path": "/a"}}, '
            '{"name": "read", "arguments": {"path": "/b"}}]</tool_calls>')
    found = extract(text, TOOLS)
    assert [c.repairs for c in found.calls] == [(), ()]


def test_native_parameters_key_is_not_a_repair_for_llama3():
    _, args, repairs = one_call('<|python_tag|>{"name": "read", "parameters": {"path": "/a"}}')
    assert (args, repairs) == ({"path": "/a"}, ())


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "read", "arguments": {"path": "/a"',  # JSON never closes
    '<tool_call>{"name": "read", "arguments": {"path": "/a"}} trailing prose',
    "<tool_call>\n<function=read>\n<parameter=path>\n/a",  # value never closes
    '<|tool_calls_section_begin|><|tool_call_begin|>functions.read:0'
    '<|tool_call_argument_begin|>{"path": "/a"',
    "<tool_call>read<arg_key>path</arg_key><arg_value>/a",
])
def test_frame_with_incomplete_payload_is_never_recovered(text):
    found = extract(text, TOOLS)
    assert found.calls == []
    assert found.content == text


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "read", "arguments": {"path": "/a"}}',
    "<tool_call>\n<function=read>\n<parameter=path>\n/a\n</parameter>\n</function>",
    "<tool_call>read<arg_key>path</arg_key><arg_value>/a</arg_value>",
    '<|tool_call_begin|>functions.read:0<|tool_call_argument_begin|>{"path": "/a"}',
    '<｜tool▁call▁begin｜>read<｜tool▁sep｜>{"path": "/a"}',
    '<tool_calls>[{"name": "read", "arguments": {"path": "/a"}}]',
])
def test_missing_close_tag_is_recovered_when_payload_is_complete(text):
    name, args, repairs = one_call(text)
    assert (name, args) == ("read", {"path": "/a"})
    assert any(r.startswith("missing_") for r in repairs)


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "read", "arguments": {"path": "/a"}}',  # close tag never came
    '<tool_call>{"name": "read", "arguments": {"path": "/a',  # value cut
    "<tool_call>\n<function=read>\n<parameter=path>\n/a",
    "<tool_call>read<arg_key>path</arg_key><arg_value>/a</arg_value>",
])
def test_call_cut_by_length_is_never_emitted(text):
    found = extract(text, TOOLS, truncated=True)
    assert found.calls == []
    assert found.content == text
    assert [x.reason for x in found.left_as_text] == ["cut_by_length"]


def test_closed_frame_is_taken_even_when_the_output_was_cut_later():
    text = ('<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>\n'
            '<tool_call>{"name": "read", "arguments": {"path": "/b')
    found = extract(text, TOOLS, truncated=True)
    assert [orjson.loads(c.arguments) for c in found.calls] == [{"path": "/a"}]
    assert found.content == ""  # the unfinished call is markup, not prose
    assert [x.reason for x in found.left_as_text] == ["cut_by_length"]


@pytest.mark.parametrize(("text", "path"), [
    ("[read(path='C:\\/tmp\\d')]", "C:\\/tmp\\d"),
    ("<tool_call>{'name': 'read', 'arguments': {'path': 'a\\/b\\q'}}</tool_call>", "a\\/b\\q"),
])
def test_python_literals_with_odd_escapes_raise_no_warning(text, path):
    # Python warns about invalid escapes in source it parses (a SyntaxWarning printed to
    # stderr from 3.12): model text is read as literals, so nothing may reach the log.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert one_call(text)[:2] == ("read", {"path": path})
    assert caught == []


# --- invalid escapes ------------------------------------------------------------------------

@pytest.mark.parametrize(("written", "value"), [
    # A string holding an escape JSON does not define (`\U`, `\m`) was written with literal
    # backslashes, every one of them: its `\n` is a backslash and an n, never a newline.
    ('"C:\\Users\\me\\notes.txt"', "C:\\Users\\me\\notes.txt"),
    ('"D:\\tmp\\new\\x.log"', "D:\\tmp\\new\\x.log"),  # `\t`, `\n` kept beside `\x`
    ('"\\d+\\.\\d+"', "\\d+\\.\\d+"),
    ('"\\u12 and \\uZZZZ"', "\\u12 and \\uZZZZ"),
    ('"ends with \\\\\\q"', "ends with \\\\\\q"),  # all three backslashes as written
    ('"say \\"hi\\" in \\w"', 'say "hi" in \\w'),  # the quote's escape keeps it inside
    ('"\\\\d"', "\\d"),  # an escaped backslash, all escapes JSON's: read as JSON
])
def test_invalid_escape_is_a_literal_backslash(written, value):
    text = '<tool_call>{"name": "read", "arguments": {"path": ' + written + "}}</tool_call>"
    _, args, repairs = one_call(text)
    assert args == {"path": value}
    assert ("invalid_escape" in repairs) == (written != '"\\\\d"')


def test_a_string_with_only_json_escapes_keeps_them_beside_one_without():
    # The choice is per string: the path's `\x` makes its backslashes literal; the text's
    # escapes are all JSON's, so it holds a tab, quotes, a backslash, é and a rocket.
    text = ('<tool_call>{"name": "write", "arguments": {"path": "C:\\notes\\x", '
            '"text": "tab\\there \\"q\\" \\\\ \\/ \\u00e9 \\ud83d\\ude80"}}</tool_call>')
    _, args, repairs = one_call(text)
    assert args == {"path": "C:\\notes\\x", "text": 'tab\there "q" \\ / é \U0001F680'}
    assert repairs == ("invalid_escape",)


def test_invalid_escape_with_other_repairs_in_one_frame():
    text = ('<tool_call>{"name": "write", "arguments": {"path": "C:\\dir\\new", "text": "a\nb",'
            ' "x": True,}}</tool_call>')
    _, args, repairs = one_call(text)
    assert args == {"path": "C:\\dir\\new", "text": "a\nb", "x": True}
    assert set(repairs) == {"python_literals", "trailing_comma", "invalid_escape",
                            "raw_control_chars_in_string"}


def test_invalid_escapes_through_loads_repaired_and_the_plain_chain_agree(monkeypatch):
    text = '{"a": "\\q\\\\\\w\\n", "b": ["\\u00zz", "\\n"],}'
    fast = loads_repaired(text)
    monkeypatch.setattr(repair_module, "_repaired_at_once", lambda text: None)
    assert loads_repaired(text) == fast == ({"a": "\\q\\\\\\w\\n", "b": ["\\u00zz", "\n"]},
                                           ("trailing_comma", "invalid_escape"))


@pytest.mark.parametrize("frame", [
    '<tool_call>{"name": "read", "arguments": {"path": %s}}</tool_call>',
    '<tool_call>{"name": "read", "arguments": "{\\"path\\": %s}"}</tool_call>',
    '{"name": "read", "arguments": {"path": %s}}',
    '[TOOL_CALLS]read{"path": %s}',
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.read:0<|tool_call_argument_begin|>"
    '{"path": %s}<|tool_call_end|><|tool_calls_section_end|>',
    "<tool_call>{'name': 'read', 'arguments': {'path': %s}}</tool_call>",
    "[read(path=%s)]",
])
def test_a_windows_path_gains_no_newline_in_any_frame(frame):
    # The same path in every frame that reads a quoted string: its characters as written.
    quote = "'" if "'name'" in frame or frame.startswith("[read") else '"'
    path = quote + "C:\\Users\\ana\\notes.txt" + quote
    if "\\\"path" in frame:  # inside a JSON string: its quotes escaped
        path = path.replace('"', '\\"')
    _, args, _ = one_call(frame % path)
    assert args == {"path": "C:\\Users\\ana\\notes.txt"}


@pytest.mark.parametrize(("written", "value"), [
    ("'C:\\dir\\notes.txt'", "C:\\dir\\notes.txt"),  # `\d` is no Python escape either
    ("'C:\\tmp\\new'", "C:\tmp\new"),  # `\t`, `\n` only: Python's own escapes, read so
    ("'it\\'s \\q'", "it's \\q"),  # the quote's escape keeps it inside
    ("'\\x41\\n'", "A\n"),  # escapes Python defines, all of them: read as Python
])
def test_python_strings_with_an_undefined_escape_keep_every_backslash(written, value):
    for text in (f"[read(path={written})]",
                 "<tool_call>{'name': 'read', 'arguments': {'path': " + written + "}}</tool_call>"):
        _, args, _ = one_call(text)
        assert args == {"path": value}, text


# --- numbers keep their value ---------------------------------------------------------------

BIG = "123456789012345678901234567890"
BIG_TOOLS = {"count": {"type": "object", "properties": {"n": {"type": "integer"},
                                                        "x": {"type": "number"},
                                                        "a": {"type": "array"}}}}


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "count", "arguments": {"n": ' + BIG + "}}</tool_call>",
    '<tool_call>{"name": "count", "arguments": {"n": ' + BIG + ",}}</tool_call>",  # repaired
    '<tool_call>{"name": "count", "arguments": "{\\"n\\": ' + BIG + '}"}</tool_call>',
    "<tool_call>{'name': 'count', 'arguments': {'n': " + BIG + "}}</tool_call>",
    "[count(n=" + BIG + ")]",
    "<tool_call>\n<function=count>\n<parameter=n>\n" + BIG + "\n</parameter>\n</function>\n"
    "</tool_call>",
    "<tool_call>count<arg_key>n</arg_key><arg_value>" + BIG + "</arg_value></tool_call>",
    "<tool_call>\n<function=count>\n<parameter=a>\n[" + BIG + ", 1]\n</parameter>\n</function>"
    "\n</tool_call>",
])
def test_integers_past_64_bits_keep_their_exact_value_on_every_path(text):
    found = extract(text, BIG_TOOLS)
    assert len(found.calls) == 1, found.left_as_text
    arguments = found.calls[0].arguments
    assert BIG in arguments
    assert "e+" not in arguments
    assert json.loads(arguments) in ({"n": int(BIG)}, {"a": [int(BIG), 1]})


@pytest.mark.parametrize("literal", [
    "-" + BIG, "18446744073709551615", "18446744073709551616", "-9223372036854775808",
    "-9223372036854775809", "9" * 400,
])
def test_integers_at_and_past_the_64_bit_edges(literal):
    value, repairs = loads_repaired('{"n": ' + literal + ", }")
    assert orjson.dumps(value) == ('{"n":' + literal + "}").encode()
    assert repairs == ("trailing_comma",)


def test_long_digit_runs_in_strings_do_not_change_other_numbers():
    value, _ = loads_repaired('{"s": "' + "7" * 40 + '", "f": 1.5, "n": 12, "t": True}')
    assert value == {"s": "7" * 40, "f": 1.5, "n": 12, "t": True}
