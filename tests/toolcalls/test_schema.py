"""Arguments written as text are coerced by the tool's JSON schema (issue 3, item 6); a value
that does not fit its type stays the string the model wrote."""

from __future__ import annotations

import json

import orjson
import pytest

from proxy.toolcalls import extract
from proxy.toolcalls import schema as schema_module

PROPERTIES = {
    "count": {"type": "integer"},
    "ratio": {"type": "number"},
    "flag": {"type": "boolean"},
    "options": {"type": "object"},
    "items": {"type": "array"},
    "nothing": {"type": "null"},
    "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    "one": {"oneOf": [{"type": "boolean"}, {"type": "array"}]},
    "nullable": {"type": ["integer", "null"]},
    "mode": {"enum": ["fast", "slow"]},
    "level": {"enum": [1, 2, 3]},
    "text": {"type": "string"},
    "nested": {"type": "object", "properties": {"depth": {"type": "integer"}}},
}
TOOLS = {"tool": {"type": "object", "properties": PROPERTIES}}


def qwen(key: str, value: str) -> dict:
    text = (f"<tool_call>\n<function=tool>\n<parameter={key}>\n{value}\n</parameter>\n"
            "</function>\n</tool_call>")
    found = extract(text, TOOLS)
    assert len(found.calls) == 1
    return orjson.loads(found.calls[0].arguments)


def glm(key: str, value: str) -> dict:
    text = f"<tool_call>tool<arg_key>{key}</arg_key><arg_value>{value}</arg_value></tool_call>"
    found = extract(text, TOOLS)
    assert len(found.calls) == 1
    return orjson.loads(found.calls[0].arguments)


@pytest.mark.parametrize("read", [qwen, glm])
@pytest.mark.parametrize(("key", "written", "value"), [
    ("count", "42", 42),
    ("count", "-7", -7),
    ("count", "3.0", 3),
    ("ratio", "0.5", 0.5),
    ("ratio", "2", 2),
    ("ratio", "1e3", 1000.0),
    ("flag", "true", True),
    ("flag", "False", False),
    ("options", '{"a": 1}', {"a": 1}),
    ("items", "[1, \"two\"]", [1, "two"]),
    ("nothing", "null", None),
    ("either", "12", 12),
    ("either", "twelve", "twelve"),
    ("one", "true", True),
    ("one", "[1]", [1]),
    ("nullable", "5", 5),
    ("nullable", "null", None),
    ("mode", "fast", "fast"),
    ("level", "2", 2),
    ("text", "42", "42"),
    ("text", "  spaced  ", "  spaced  "),
    ("nested", '{"depth": 3}', {"depth": 3}),
    ("items", r'[{\"id\": \"1\", \"done\": false}]', [{"id": "1", "done": False}]),
    ("options", r'{\"path\": \"C:\\\\tmp\"}', {"path": "C:\\tmp"}),
    ("text", r'[{\"id\": 1}]', r'[{\"id\": 1}]'),
    ("undeclared", "42", "42"),
])
def test_text_values_take_the_schema_type(read, key, written, value):
    assert read(key, written) == {key: value}


@pytest.mark.parametrize(("key", "written"), [
    ("count", "forty-two"),
    ("count", "3.5"),
    ("count", "0x10"),
    ("ratio", "NaN"),
    ("ratio", "1,5"),
    ("flag", "yes"),
    ("options", "[1, 2]"),
    ("options", "{broken"),
    ("items", '{"a": 1}'),
    ("items", r'[\"a\", "b"]'),
    ("items", r'[\"a\"'),
    ("options", r'[\"a\"]'),
    ("nothing", "nil"),
    ("one", "maybe"),
    ("nullable", "five"),
    ("level", "7"),
])
def test_a_value_that_does_not_fit_stays_a_string(key, written):
    assert qwen(key, written) == {key: written}


def test_multiline_string_value_keeps_its_inner_newlines():
    assert qwen("text", "line 1\nline 2") == {"text": "line 1\nline 2"}


def test_json_formats_are_coerced_only_where_that_is_without_doubt():
    # Issue 37, item 6: "42" is exactly an integer; 1 is no boolean (a guess): it stays, and
    # the call says it does not fit its schema.
    text = '<tool_call>{"name": "tool", "arguments": {"count": "42", "flag": 1}}</tool_call>'
    found = extract(text, TOOLS)
    assert orjson.loads(found.calls[0].arguments) == {"count": 42, "flag": 1}
    assert "schema_coerced" in found.calls[0].repairs
    assert found.calls[0].schema_problems == ("/flag: not boolean",)


# --- schemas as clients write them: $ref, allOf, Python type names, const, literals ---------

DEFS = {"Box": {"type": "object", "properties": {"w": {"type": "integer"}}},
        "Count": {"type": "integer"}, "Alias": {"$ref": "#/$defs/Count"},
        "Loop": {"$ref": "#/$defs/Loop2"}, "Loop2": {"$ref": "#/$defs/Loop"},
        "Mode": {"enum": ["fast", "slow"]}}
REF_TOOL = {"type": "object", "$defs": DEFS,
            "definitions": {"Ratio": {"type": "number"}},
            "properties": {"box": {"$ref": "#/$defs/Box"},
                           "maybe_box": {"anyOf": [{"$ref": "#/$defs/Box"}, {"type": "null"}]},
                           "alias": {"$ref": "#/$defs/Alias"},
                           "ratio": {"$ref": "#/definitions/Ratio"},
                           "loop": {"$ref": "#/$defs/Loop"},
                           "remote": {"$ref": "https://example.com/schema#/Count"},
                           "missing": {"$ref": "#/$defs/Nope"},
                           "mode": {"$ref": "#/$defs/Mode"},
                           "with_sibling": {"$ref": "#/$defs/Count", "description": "n"}}}


@pytest.mark.parametrize(("key", "written", "value"), [
    ("box", '{"w": 3}', {"w": 3}),
    ("maybe_box", '{"w": 3}', {"w": 3}),
    ("maybe_box", "null", None),
    ("alias", "7", 7),  # a reference to a reference
    ("ratio", "0.25", 0.25),  # into `definitions`
    ("mode", "slow", "slow"),
    ("with_sibling", "9", 9),
    ("loop", "5", "5"),  # a cycle: no type to read, the text stays
    ("remote", "5", "5"),  # only local references are followed
    ("missing", "5", "5"),
    ("alias", "five", "five"),
])
def test_refs_into_defs_are_followed(key, written, value):
    text = (f"<tool_call>\n<function=tool>\n<parameter={key}>\n{written}\n</parameter>\n"
            "</function>\n</tool_call>")
    found = extract(text, {"tool": REF_TOOL})
    assert orjson.loads(found.calls[0].arguments) == {key: value}


@pytest.mark.parametrize(("schema", "written", "value"), [
    ({"allOf": [{"type": "integer"}, {"minimum": 0}]}, "5", 5),
    ({"allOf": [{"$ref": "#/$defs/Count"}], "$defs": DEFS}, "5", 5),
    ({"allOf": [{"type": ["integer", "string"]}, {"type": "integer"}]}, "5", 5),
    ({"allOf": [{"type": "integer"}, {"type": "string"}]}, "5", "5"),  # nothing fits both
    ({"allOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]}, "2", 2),
    ({"allOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]}, "1", "1"),
    ({"type": "float"}, "3.14", 3.14),
    ({"type": "int"}, "3", 3),
    ({"type": "int"}, "3.5", "3.5"),
    ({"type": "integer"}, "1e30", 10**30),  # exactly, not a float's neighbour
    ({"type": "bool"}, "true", True),
    ({"type": "str"}, "42", "42"),
    ({"type": "dict"}, '{"k": 1}', {"k": 1}),
    ({"type": "list"}, "[1, 2]", [1, 2]),
    ({"type": ["int", "null"]}, "null", None),
    ({"type": "object"}, "{'x': 1, 'y': [True, None]}", {"x": 1, "y": [True, None]}),
    ({"type": "array"}, "[1, 'a', (2, 3)]", [1, "a", [2, 3]]),
    ({"type": "object"}, '{"x": 1,}', {"x": 1}),
    ({"type": "object"}, "{'x': __import__('os')}", "{'x': __import__('os')}"),
    ({"type": "object"}, "{'x': y}", "{'x': y}"),
    ({"type": "array"}, "{'x': 1}", "{'x': 1}"),
    ({"const": 5}, "5", 5),
    ({"const": "a"}, "b", "b"),
    ({"const": 5, "type": "integer"}, "6", "6"),
    ({"enum": [1.0, 2.5]}, "1", 1),  # JSON equality: 1 is 1.0
    ({"enum": [True]}, "1", "1"),  # but true is not 1
    ({"enum": ["fast", "slow"]}, "slow ", "slow"),
    ({"type": "integer", "enum": [1, 2]}, "5", "5"),
])
def test_schema_forms_coerce_or_leave_the_text(schema, written, value):
    # as the call carries it: written as JSON (an integer past 64 bits exactly)
    assert json.loads(orjson.dumps(schema_module.coerce(written, schema))) == value
