"""A tool's schema as the constrained re-ask hands it to a grammar engine: OpenAPI 3.0's
`nullable` said as a type, the assertions engines compile unevenly left out, everything
else (names, data, structure) as the client wrote it."""

from __future__ import annotations

import copy

import pytest

from proxy.turn.constrained.grammar_schema import UNEVEN, for_grammar
from tests.home_assistant import TODO_PARAMETERS_30, TODO_PARAMETERS_31


@pytest.mark.parametrize("schema", [TODO_PARAMETERS_30, TODO_PARAMETERS_31],
                         ids=["openapi30", "openapi31"])
def test_home_assistants_schemas_lose_only_what_engines_refuse(schema):
    before = copy.deepcopy(schema)
    out = for_grammar(schema)
    assert schema == before  # a new value
    props = out["properties"]
    assert props["due_date"] == {"type": "string"}
    assert props["labels"] == {"type": "array", "items": {"type": "string"}}
    assert props["brightness"] == {"type": "integer", "minimum": 0, "maximum": 100}
    assert props["domain"] == schema["properties"]["domain"]
    assert (out["required"], out["additionalProperties"]) == (["item"], False)
    color = props["color"]
    assert color in ({"type": ["string", "null"]},
                     {"anyOf": [{"type": "null"}, {"type": "string"}]})


@pytest.mark.parametrize(("schema", "nullable"), [
    ({"type": "string", "nullable": True}, {"type": ["string", "null"]}),
    ({"type": ["integer", "string"], "nullable": True},
     {"type": ["integer", "string", "null"]}),
    ({"enum": ["a", "b"], "nullable": True}, {"enum": ["a", "b", None]}),
    ({"anyOf": [{"type": "integer"}], "nullable": True},
     {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    ({"type": "string", "nullable": False}, {"type": "string"}),
])
def test_nullable_is_null_among_the_types(schema, nullable):
    assert for_grammar(schema) == nullable


def test_property_names_and_data_are_never_taken_for_keywords():
    schema = {"type": "object", "properties": {
        "format": {"type": "string", "format": "email"},
        "nullable": {"type": "boolean"},
        "uniqueItems": {"enum": [{"format": "x"}], "default": {"nullable": True}}},
        "$defs": {"When": {"type": "string", "format": "date"}},
        "items": [{"format": "kept: not a schema position of an object"}]}
    out = for_grammar(schema)
    assert list(out["properties"]) == ["format", "nullable", "uniqueItems"]
    assert out["properties"]["format"] == {"type": "string"}
    assert out["properties"]["uniqueItems"] == schema["properties"]["uniqueItems"]
    assert out["$defs"]["When"] == {"type": "string"}


def test_every_uneven_assertion_is_left_out_wherever_it_nests():
    deep = {"type": "array", "items": {"anyOf": [
        {"type": "object", "additionalProperties": {key: 1 for key in UNEVEN}}]}}
    out = for_grammar(deep)
    assert out["items"]["anyOf"][0]["additionalProperties"] == {}


def test_a_schema_nested_past_the_bound_is_kept_as_written_below_it():
    schema: dict = {"type": "string", "format": "date"}
    for _ in range(100):
        schema = {"type": "array", "items": schema}
    out = for_grammar(schema)
    inner = out
    for _ in range(100):
        inner = inner["items"]
    assert inner == {"type": "string", "format": "date"}  # past the bound: as written
    assert "format" not in str(for_grammar({"type": "array", "items": {"format": "x"}}))
