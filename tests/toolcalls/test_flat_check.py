"""validity.check's flat-schema path gives exactly what the walk gives (hypothesis): on any
schema, flat or not, and on what JSON does not write as it reads (integers past 64 bits,
Fragments, NaN, tuples), which the flat path leaves to the walk. FLAT_CHECK_EXAMPLES=20000
runs it longer."""

from __future__ import annotations

import enum
import math
import os
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.toolcalls.exact_json import exact_int
from proxy.toolcalls.validity import Validity, check, walked

EXAMPLES = int(os.environ.get("FLAT_CHECK_EXAMPLES", "800"))
BIG = 1 << 70  # past 64 bits: orjson writes none (a Fragment carries its literal)
HUGE = 10 ** 400  # a literal orjson reads as infinity, and refuses

# Keys the schema and the arguments share often, and any text (odd characters, "/", "~").


def _mostly(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], odds: int = 4,
            ) -> st.SearchStrategy[Any]:
    """`common` `odds` times in `odds + 1`, else `rare` (one_of weighs its branches evenly,
    and counts a branch given twice once)."""
    return st.integers(0, odds).flatmap(lambda i: common if i else rare)


_NAMES = st.sampled_from(["path", "limit", "flag", "x", "", "a/b", "~0", "é"])
_KEYS = _mostly(_NAMES, st.text(max_size=3), 3)
_NUMBERS = st.one_of(st.integers(), st.sampled_from([BIG, -BIG, 1 << 63, -(1 << 63) - 1, HUGE]),
                     st.floats(), st.sampled_from([-0.0, 0.0, 3.0, 1e300, math.inf]))
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, st.text(max_size=4),
                     st.sampled_from(["", "3", "-0", "3.0", "3.5", "true", "False", " 7 ", "1e3",
                                      "018", "1e400", "null", "[1]", '{"a": 1}', str(BIG)]))
# What JSON reads (integers past 64 bits as Fragments, as exact_json reads them), and values
# it does not hold as they are (a raw integer past 64 bits, a tuple).
_JSON = st.recursive(_SCALARS.map(lambda v: exact_int(v) if type(v) is int else v),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_KEYS, inner, max_size=3), max_leaves=6)


class _Kind(enum.Enum):  # written as its value, read as no type name
    STRING = "string"


_ODD = st.sampled_from([BIG, (1, 2), ("path",), math.nan, orjson.Fragment(b'"string"'),
                        orjson.Fragment(b"{"), _Kind.STRING])
_VALUES = st.one_of(_JSON, _ODD)
_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null",
                          "int", "str", "float", ["string", "null"], None, 1])
_PROPERTY = st.one_of(
    st.sampled_from([{}, None, [], ["string"], "string", 1, True]), _ODD,
    st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(["string", "integer", "number", "boolean"]),
                           _TYPES, _ODD)},
        optional={"description": st.text(max_size=3), "title": st.just("t"),
                  "default": _VALUES, "examples": st.lists(_VALUES, max_size=2),
                  "enum": st.lists(_SCALARS, max_size=2), "nullable": st.booleans(),
                  "items": st.just({"type": "integer"})}),
    st.dictionaries(st.sampled_from(["description", "default", "title"]), _VALUES, max_size=2))
_EXTRA = st.one_of(st.sampled_from([True, False, None, 0, 1, 0.0, "", [], {}, {"type": "string"},
                                    {"type": "integer"}]), _ODD)
_REQUIRED = st.one_of(st.lists(st.one_of(_KEYS, st.integers(), st.none()), max_size=5),
                      st.just("path"), st.just(("path",)), st.none())
_PROPERTIES = st.one_of(st.dictionaries(_KEYS, _PROPERTY, max_size=5), st.just([]),
                        st.none(), st.just({}))
# A flat schema as tools send them (the flat path's), now and then holding what it leaves
# to the walk; and any schema.
_FLAT_TYPE = st.sampled_from(["string", "integer", "number", "boolean"])
# What JSON writes as a flat type but is none (the walk reads no type in it).
_ALIKE = st.sampled_from([orjson.Fragment(b'"integer"'), orjson.Fragment(b'"string"'),
                          _Kind.STRING])
_FLAT_ONE = st.one_of(
    st.sampled_from([{}, None, [], "string"]),
    st.fixed_dictionaries(
        {"type": _mostly(_FLAT_TYPE, _ALIKE, 6)},
        optional={"description": st.text(max_size=3), "title": st.just("t"),
                  "default": _JSON, "examples": st.lists(_JSON, max_size=2)}))
_NEAR = st.fixed_dictionaries(  # typed as no flat property is
    {"type": st.sampled_from(["object", "array", "null", "int", "str", None, 1, ["string"],
                              ["integer", "null"], ("string",), {"type": "string"}])},
    optional={"description": st.just("d"), "default": _JSON})
_FLAT_PROPERTY = _mostly(_FLAT_ONE, _mostly(_NEAR, _PROPERTY, 1), 3)
_FLAT = st.fixed_dictionaries(
    {"type": _mostly(st.just("object"), st.one_of(_TYPES, _ODD), 6)},
    optional={"properties": st.dictionaries(_KEYS, _FLAT_PROPERTY, max_size=5),
              "required": _mostly(st.lists(_mostly(_NAMES, st.integers()), max_size=5),
                                  st.sampled_from([("path",), ("x", "x")])),
              "additionalProperties": st.sampled_from([True, False, None, 0, 1, "", []]),
              "description": st.text(max_size=3), "$schema": st.just("x")})
_ANY_SCHEMA = st.fixed_dictionaries(
    {"type": st.one_of(st.just("object"), _TYPES, _ODD)},
    optional={"properties": _PROPERTIES, "required": _REQUIRED, "additionalProperties": _EXTRA,
              "description": st.text(max_size=3), "title": _VALUES, "$schema": st.just("x"),
              "$defs": st.just({})})
_SCHEMA = _mostly(_FLAT, _ANY_SCHEMA, 3)
_OBJECT = st.dictionaries(_KEYS, st.one_of(_JSON, st.just(BIG)), max_size=6)
_ARGUMENTS = _mostly(_OBJECT, st.text(max_size=3), 6)


def _plain(value: Any) -> Any:
    """`value` with each Fragment as the text it writes (a Fragment equals only itself)."""
    if isinstance(value, orjson.Fragment):
        return "Fragment", orjson.dumps(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return [_plain(item) for item in value] if isinstance(value, list) else value


def _outcome(checked: Any, arguments: Any, parameters: Any) -> tuple[str, Any]:
    """What a check gives: its Validity, or the error it raises (both paths raise the same)."""
    try:
        validity = checked(arguments, parameters)
    except orjson.JSONEncodeError as error:  # a raw integer past 64 bits, as a string
        return "raises", (type(error), str(error))
    return "gives", (_plain(validity.arguments), validity.coerced, validity.problems)


@settings(max_examples=EXAMPLES, deadline=None)
@given(_SCHEMA, _ARGUMENTS)
@example({"type": "object", "properties": {"x": {"type": "string", "default": BIG}}},
         {"x": 5})
@example({"type": "object", "properties": {"x": {"type": "integer",
                                                 "default": exact_int(HUGE)}}}, {"x": "3"})
@example({"type": "object", "properties": {"x": {"type": "string"}}}, {"x": BIG})
@example({"type": "object", "properties": {"x": {"type": orjson.Fragment(b'"integer"')}}},
         {"x": "3"})
@example({"type": "object", "properties": {"x": {"type": "string"}},
          "required": ("x",)}, {})
@example({"type": "object", "properties": {"x": {"type": "integer", "default": math.nan}}},
         {"x": "3"})
@example({"type": "object", "properties": {"x": {"type": "integer"}}},
         {"x": -0.0, "y": True})
@example({"type": "object", "properties": {"x": {"type": ["number", "null"]}}}, {"x": "5"})
@example({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x", "x", 1],
          "additionalProperties": False}, {"x": True, "y": ""})
def test_flat_check_is_the_walk(parameters: dict[str, Any], arguments: Any) -> None:
    assert _outcome(check, arguments, parameters) == _outcome(walked, arguments, parameters)


def test_a_schema_is_never_read_as_another_with_the_same_json() -> None:
    # A Fragment writes the text of a type name: the schema it is in is not the plain one.
    plain = {"type": "object", "properties": {"x": {"type": "integer"}}}
    fragment = {"type": "object", "properties": {"x": {"type": orjson.Fragment(b'"integer"')}}}
    assert check({"x": "3"}, plain) == Validity({"x": 3}, 1)
    assert check({"x": "3"}, fragment) == Validity({"x": "3"}) == walked({"x": "3"}, fragment)


@pytest.mark.parametrize("count", [1248, 1249])  # the last flat schema in budget, the first not
def test_a_flat_schema_past_the_budget_is_not_judged_either(count: int) -> None:
    keys = [f"k{i}" for i in range(count)]
    parameters = {"type": "object", "properties": {key: {"type": "string"} for key in keys}}
    arguments = dict.fromkeys(keys, 5)
    checked = check(arguments, parameters)
    assert checked == walked(arguments, parameters)
    assert checked.coerced == (count if count == 1248 else 0)
