"""Whether a call's arguments fit its tool's schema (`toolcalls.conform.misfit`)."""

from __future__ import annotations

import pytest

from proxy.toolcalls.conform import misfit

SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 3},
        "scope": {"type": "string", "enum": ["repo", "file"]},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "filters": {"type": "object",
                    "properties": {"lang": {"type": "string"},
                                   "paths": {"type": "array", "minItems": 2,
                                             "items": {"type": "string"}}},
                    "required": ["lang", "paths"], "additionalProperties": False},
    },
    "required": ["query", "scope"],
    "additionalProperties": False,
}
GOOD = {"query": "parser", "scope": "repo", "limit": 5,
        "filters": {"lang": "py", "paths": ["a", "b"]}}


@pytest.mark.parametrize("arguments", [
    GOOD, {"query": "parser", "scope": "file"}, {"query": "abc", "scope": "repo", "limit": 5.0},
])
def test_arguments_that_fit(arguments):
    assert misfit(arguments, SEARCH) is None


@pytest.mark.parametrize(("arguments", "why"), [
    ({"scope": "repo"}, "arguments: 'query' missing"),
    ({**GOOD, "extra": 1}, "arguments: 'extra' not allowed"),
    ({**GOOD, "query": 12345}, "query: not string"),
    ({**GOOD, "query": "ab"}, "query: below minLength 3"),
    ({**GOOD, "scope": "world"}, "scope: not one of the enum"),
    ({**GOOD, "limit": 0}, "limit: below minimum 1"),
    ({**GOOD, "limit": True}, "limit: not integer"),
    ({**GOOD, "limit": 2.5}, "limit: not integer"),
    ({**GOOD, "filters": {"lang": "py", "paths": ["a"]}}, "filters.paths: below minItems 2"),
    ({**GOOD, "filters": {"lang": "py", "paths": ["a", 2]}}, "filters.paths[1]: not string"),
    ({**GOOD, "filters": {"lang": "py"}}, "filters: 'paths' missing"),
])
def test_arguments_that_break_the_schema_say_where(arguments, why):
    assert misfit(arguments, SEARCH) == why


@pytest.mark.parametrize("schema", [
    {}, {"type": "object"}, {"anyOf": [{"type": "string"}]}, {"$ref": "#/defs/x"},
    {"type": "object", "properties": {"a": {"type": "strange"}}}, None,
])
def test_a_schema_it_does_not_read_is_never_a_misfit(schema):
    assert misfit({"a": 1}, schema) is None
