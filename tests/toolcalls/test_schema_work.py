"""Schema coercion costs bounded work per value (issue 22, item 1): a schema that branches a
few ways on each of several levels, or refers to itself, costs its size, never the number of
its paths; a schema that asks for more than a value may cost leaves the value as written and
says so. Work is counted by `schema.Coerced.steps` (documented there), never timed."""

from __future__ import annotations

import sys

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.toolcalls import extract
from proxy.toolcalls import schema as schema_module
from proxy.toolcalls.schema import BUDGET_EXHAUSTED, MAX_STEPS, coerce_counted


def chain(ways: int, levels: int, combinators: list[str], leaf: dict) -> dict:
    """Level i branches `ways` ways, every branch a `$ref` to level i + 1; the last is `leaf`."""
    defs = {f"L{i}": {combinators[i % len(combinators)]:
                      [{"$ref": f"#/$defs/L{i + 1}"} for _ in range(ways)]}
            for i in range(levels)}
    defs[f"L{levels}"] = leaf
    return {"type": "object", "$defs": defs, "properties": {"p": {"$ref": "#/$defs/L0"}}}


def qwen_call(parameters: dict, value: str) -> tuple[dict, tuple[str, ...]]:
    text = (f"<tool_call>\n<function=tool>\n<parameter=p>\n{value}\n</parameter>\n"
            "</function>\n</tool_call>")
    found = extract(text, {"tool": parameters})
    assert len(found.calls) == 1
    return orjson.loads(found.calls[0].arguments), found.calls[0].repairs


# --- the issue's request: 6 ways on each of 10 levels (151 s of one worker before) --------

@pytest.mark.parametrize("combinators", [["anyOf"], ["oneOf"], ["allOf"],
                                         ["anyOf", "allOf", "oneOf"]])
@pytest.mark.parametrize(("written", "value"), [("5", 5), ("five", "five")])
def test_six_ways_on_ten_levels_cost_their_size(combinators, written, value):
    parameters = chain(6, 10, combinators, {"type": "integer"})
    assert len(orjson.dumps(parameters)) < 2_500  # the 2 KB request of the issue
    coerced = coerce_counted(written, parameters["properties"]["p"] | {
        "$defs": parameters["$defs"]})
    assert (coerced.value, coerced.exhausted) == (value, False)
    assert coerced.steps < 1_000  # 6 ** 10 paths; 66 subschemas
    assert qwen_call(parameters, written) == ({"p": value}, ())


@pytest.mark.parametrize(("defs", "written", "value"), [
    ({"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}, {"type": "integer"}]}},
     "5", 5),
    ({"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}, {"type": "integer"}]}},
     "five", "five"),
    ({"A": {"oneOf": [{"$ref": "#/$defs/B"}, {"type": "boolean"}]},
      "B": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "integer"}]}}, "7", 7),
    ({"A": {"allOf": [{"$ref": "#/$defs/A"}, {"type": "integer"}]}}, "7", 7),
    ({"A": {"allOf": [{"$ref": "#/$defs/B"}]}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}},
     "7", "7"),  # a cycle with no type in it: the text stays
])
def test_a_cyclic_ref_costs_its_size(defs, written, value):
    parameters = {"type": "object", "$defs": defs, "properties": {"p": {"$ref": "#/$defs/A"}}}
    coerced = schema_module.ToolSchema(parameters).coerce("p", written)
    assert (coerced.value, coerced.exhausted) == (value, False)
    assert coerced.steps < 200
    assert qwen_call(parameters, written) == ({"p": value}, ())


# --- past the budget: kept as written, and named --------------------------------------------

OVER_BUDGET = [
    {"enum": [*range(MAX_STEPS * 2), "x"]},  # more members than a value may compare
    {"anyOf": [{"type": "integer", "minimum": i} for i in range(MAX_STEPS)]},
    {"allOf": [{"enum": list(range(400))}, {"enum": list(range(400))}]},
    chain(2, 40, ["allOf"], {"type": "integer"})["properties"]["p"]
    | {"$defs": chain(2, 40, ["allOf"], {"type": "integer"})["$defs"]},  # allOf 40 deep
]


@pytest.mark.parametrize("schema", OVER_BUDGET)
def test_a_schema_past_the_budget_keeps_the_value_as_written(schema):
    coerced = coerce_counted("5", schema)
    assert (coerced.value, coerced.exhausted) == ("5", True)
    assert coerced.steps <= MAX_STEPS
    parameters = {"type": "object", "properties": {"p": schema, "q": {"type": "integer"}},
                  "$defs": schema.get("$defs", {})}
    text = ("<tool_call>\n<function=tool>\n<parameter=p>\n5\n</parameter>\n"
            "<parameter=q>\n6\n</parameter>\n</function>\n</tool_call>")
    found = extract(text, {"tool": parameters})
    assert orjson.loads(found.calls[0].arguments) == {"p": "5", "q": 6}  # q has its own budget
    assert found.calls[0].repairs == (BUDGET_EXHAUSTED,)


def test_a_budget_a_few_steps_short_is_exhausted_and_one_enough_is_not():
    schema = chain(6, 10, ["anyOf"], {"type": "integer"})
    whole = schema["properties"]["p"] | {"$defs": schema["$defs"]}
    needed = coerce_counted("5", whole).steps
    assert coerce_counted("5", whole, max_steps=needed) == schema_module.Coerced(5, needed)
    assert coerce_counted("5", whole, max_steps=needed - 1).exhausted


# --- generated schemas: deep, branching, recursive --------------------------------------------

DEFS = 6
LEAVES = st.sampled_from([
    {"type": "integer"}, {"type": "number"}, {"type": "string"}, {"type": "boolean"},
    {"type": "null"}, {"type": "object"}, {"type": "array"}, {"type": "int"},
    {"type": ["integer", "null"]}, {"enum": ["a", 1, 2.5, True]}, {"const": 5},
    {"type": "integer", "enum": [1, 5]}, {"properties": {"a": {"type": "integer"}}},
    {"minimum": 0}, {}, {"anyOf": []}, {"type": ["integer", "string"], "anyOf": []},
])
REFS = st.integers(0, DEFS - 1).map(lambda i: {"$ref": f"#/$defs/D{i}"})


def _combined(pair: tuple[str, list[dict]]) -> dict:
    return {pair[0]: pair[1]}


NODES = st.recursive(
    LEAVES | REFS,
    lambda inner: st.tuples(st.sampled_from(["anyOf", "oneOf", "allOf"]),
                            st.lists(inner, min_size=1, max_size=6)).map(_combined)
    | st.tuples(inner, LEAVES).map(lambda pair: pair[0] | pair[1]),
    max_leaves=30)
SCHEMAS = st.builds(lambda defs, p: {"type": "object", "properties": {"p": p},
                                      "$defs": {f"D{i}": d for i, d in enumerate(defs)}},
                    st.lists(NODES, min_size=DEFS, max_size=DEFS), NODES)
TEXTS = st.sampled_from(["5", "2.5", "-1", "1e3", "true", "null", "a", "five", "",
                         '{"a": 1}', "[1, 2]", "{'a': True}", " 5 "])
BOUNDED = settings(max_examples=300, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])


def _python_calls(run: object) -> tuple[object, int]:
    """`run()` and the Python function calls it made in the schema module: the work done,
    counted apart from the module's own count of steps."""
    calls = 0
    here = schema_module.__file__

    def count(frame: object, event: str, _arg: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_filename == here:  # type: ignore[attr-defined]
            calls += 1

    sys.setprofile(count)
    try:
        result = run()  # type: ignore[operator]
    finally:
        sys.setprofile(None)
    return result, calls


@BOUNDED
@given(SCHEMAS, TEXTS)
def test_generated_schemas_take_bounded_work(parameters, written):
    tool = schema_module.ToolSchema(parameters)
    coerced, calls = _python_calls(lambda: tool.coerce("p", written))
    assert coerced.steps <= MAX_STEPS
    assert calls <= 8 * coerced.steps + 40  # the steps count all the work there is
    if coerced.exhausted:
        assert coerced.value == written
    else:  # the value is a JSON value the call can carry: the text, or the schema's type
        assert coerced.value is written or not isinstance(coerced.value, str) \
            or coerced.value == written.strip()


@BOUNDED
@given(st.integers(3, 8), st.integers(1, 12),
       st.lists(st.sampled_from(["anyOf", "oneOf", "allOf"]), min_size=1, max_size=4),
       st.sampled_from([{"type": "integer"}, {"type": "boolean"}, {"enum": ["a", 5]},
                        {"type": ["null", "number"]}, {"type": "object"}]),
       TEXTS)
def test_branching_levels_cost_their_size_not_their_paths(ways, levels, combinators, leaf,
                                                          written):
    coerced = schema_module.ToolSchema(chain(ways, levels, combinators, leaf)).coerce(
        "p", written)
    assert not coerced.exhausted
    assert coerced.steps <= 12 * (ways + 1) * (levels + 1)  # linear in the schema's size
    # More branches to the same subschemas change nothing but the size.
    fewer = schema_module.ToolSchema(chain(2, levels, combinators, leaf)).coerce("p", written)
    assert repr(coerced.value) == repr(fewer.value)
