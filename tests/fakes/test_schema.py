"""The fakes' JSON Schema instance generator and checker: every generated instance fits its
schema, and the checker finds each keyword's breach."""

from __future__ import annotations

import pytest

from tests.fakes.helpers import TOOLS
from tests.fakes.schema import instance_of, schema_errors
from tests.fakes.vllm_rules import required_calls_schema

SCHEMAS = [
    {"type": "string"},
    {"type": "string", "minLength": 5, "maxLength": 9},
    {"type": "integer", "minimum": 3, "maximum": 7},
    {"type": "number", "exclusiveMinimum": 0},
    {"type": ["null", "boolean"]},
    {"enum": ["a", "b"]},
    {"const": 42},
    {"type": "array", "minItems": 3, "items": {"type": "integer"}},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {
        "b": {"type": "array", "items": {"enum": [1, 2]}}}, "required": ["b"]}},
     "required": ["a"], "additionalProperties": False},
    {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "integer"}}},
    {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    {"oneOf": [{"type": "string", "enum": ["only"]}, {"type": "integer"}]},
    {"allOf": [{"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]},
               {"properties": {"q": {"type": "integer"}}, "required": ["q"]}]},
    {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}},
                         "required": ["x"]}},
     "type": "array", "items": {"$ref": "#/$defs/point"}},
    {"type": "string", "default": "keep"},
    *[tool["function"]["parameters"] for tool in TOOLS],
    required_calls_schema(TOOLS),
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_each_generated_instance_fits_its_schema(schema):
    assert schema_errors(instance_of(schema), schema) == []


def test_the_generator_fills_required_keys_enums_and_nested_arrays():
    arguments = instance_of(TOOLS[0]["function"]["parameters"])
    assert set(arguments) == {"query", "scope", "limit", "filters"}
    assert arguments["scope"] == "repo"
    assert len(arguments["query"]) >= 3
    assert 1 <= arguments["limit"] <= 50
    assert len(arguments["filters"]["paths"]) == 2


BREACHES = [
    ({"type": "string"}, 3, "is not string"),
    ({"type": "integer"}, True, "is not integer"),
    ({"type": "integer"}, 1.5, "is not integer"),
    ({"type": "number"}, "1", "is not number"),
    ({"enum": ["a"]}, "b", "not in enum"),
    ({"const": 1}, 2, "not the const"),
    ({"type": "object", "required": ["a"]}, {}, "missing required 'a'"),
    ({"type": "object", "properties": {}, "additionalProperties": False}, {"z": 1},
     "unexpected property 'z'"),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, {"z": "s"},
     "$.z: str is not integer"),
    ({"type": "object", "properties": {"a": {"type": "integer"}}}, {"a": "1"},
     "$.a: str is not integer"),
    ({"type": "array", "minItems": 2}, [1], "fewer than minItems"),
    ({"type": "array", "maxItems": 1}, [1, 2], "more than maxItems"),
    ({"type": "array", "uniqueItems": True}, [1, 1], "not unique"),
    ({"type": "array", "items": {"type": "string"}}, ["a", 1], "$[1]: int is not string"),
    ({"type": "string", "minLength": 2}, "a", "shorter than minLength"),
    ({"type": "string", "maxLength": 1}, "ab", "longer than maxLength"),
    ({"type": "string", "pattern": "^[a-z]+$"}, "A1", "does not match pattern"),
    ({"type": "integer", "minimum": 2}, 1, "out of [minimum, maximum]"),
    ({"type": "integer", "maximum": 2}, 3, "out of [minimum, maximum]"),
    ({"type": "number", "exclusiveMinimum": 0}, 0, "not above exclusiveMinimum"),
    ({"type": "number", "exclusiveMaximum": 1}, 1, "not below exclusiveMaximum"),
    ({"type": "integer", "multipleOf": 3}, 4, "not a multiple of 3"),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1.5, "fits no anyOf branch"),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1, "not exactly one oneOf"),
    ({"allOf": [{"required": ["a"]}, {"required": ["b"]}]}, {"a": 1}, "missing required 'b'"),
    ({"not": {"type": "string"}}, "s", "fits the `not` schema"),
    ({"$defs": {"n": {"type": "integer"}}, "items": {"$ref": "#/$defs/n"}}, ["x"],
     "$[0]: str is not integer"),
    ({"type": "object", "minProperties": 1}, {}, "fewer than minProperties"),
]


@pytest.mark.parametrize(("schema", "value", "breach"), BREACHES)
def test_the_checker_names_each_breach(schema, value, breach):
    errors = schema_errors(value, schema)
    assert any(breach in error for error in errors), errors


def test_the_checker_accepts_what_fits():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 0.5}},
              "required": ["n"], "additionalProperties": False}
    assert schema_errors({"n": 2}, schema) == []
    assert schema_errors(2.0, {"type": "integer"}) == []
