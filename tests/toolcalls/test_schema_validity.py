"""Every delivered call checked against its tool's schema (issue 37, item 6): what can be
coerced without doubt is coerced, the rest delivered as written and named, so the turn can
count it `schema_invalid`; and the share of schema-valid calls over the test corpus."""

from __future__ import annotations

import orjson
import pytest

from proxy.toolcalls import extract
from proxy.toolcalls.validity import Validity, check
from proxy.turn.normalize import ExtractionSettings, normalize
from proxy.turn.result import SchemaInvalid, first_calls_only
from tests.fake_vllm import vllm_completion, vllm_tool_call
from tests.home_assistant import TODO_PARAMETERS_30, TODO_PARAMETERS_31
from tests.streamed_cases import corpus

FORECAST = {
    "type": "object",
    "properties": {
        "town": {"type": "string"},
        "days": {"type": "integer"},
        "metric": {"type": "boolean"},
        "unit": {"enum": ["c", "f"]},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}},
                  "required": ["lat"], "additionalProperties": False},
        "tags": {"type": "array", "items": {"type": "string"}},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
    },
    "required": ["town"],
}


@pytest.mark.parametrize(("written", "delivered"), [
    ({"town": "Oslo", "days": "3"}, {"town": "Oslo", "days": 3}),
    ({"town": "Oslo", "metric": "true"}, {"town": "Oslo", "metric": True}),
    ({"town": "Oslo", "where": '{"lat": 59.9}'}, {"town": "Oslo", "where": {"lat": 59.9}}),
    ({"town": "Oslo", "tags": '["coast"]'}, {"town": "Oslo", "tags": ["coast"]}),
    ({"town": 1066}, {"town": "1066"}),  # an integer's JSON text is exactly what was written
    ({"town": "Oslo", "tags": [True]}, {"town": "Oslo", "tags": ["true"]}),
])
def test_a_value_that_is_exactly_its_schema_type_written_as_a_string_is_coerced(
        written, delivered):
    assert check(written, FORECAST) == Validity(delivered, coerced=1)


@pytest.mark.parametrize(("written", "problem"), [
    ({"days": 3}, "/town: required"),
    ({"town": 7.5}, "/town: not string"),  # a float's text as written is lost: not coerced
    ({"town": None}, "/town: not string"),
    ({"town": "Oslo", "days": "three"}, "/days: not integer"),
    ({"town": "Oslo", "days": "3.5"}, "/days: not integer"),
    ({"town": "Oslo", "metric": 1}, "/metric: not boolean"),  # 1 as true: a guess
    ({"town": "Oslo", "unit": "k"}, "/unit: not one of its enum"),
    ({"town": "Oslo", "where": {}}, "/where/lat: required"),
    ({"town": "Oslo", "where": {"lat": 1, "alt": 2}}, "/where/alt: not a property"),
    ({"town": "Oslo", "tags": ["a", {"b": 2}]}, "/tags/1: not string"),
    ({"town": "Oslo", "either": "5"}, "/either: fits none of its alternatives"),
    ({"town": ""}, "/town: required, empty"),  # names nothing to act on (issue 41, item 2)
])
def test_what_does_not_fit_is_delivered_as_written_and_named(written, problem):
    validity = check(written, FORECAST)
    assert validity.arguments == written
    assert validity.coerced == 0
    assert validity.problems == (problem,)


@pytest.mark.parametrize("written", [{"town": " "}, {"town": "Oslo", "days": ""}])
def test_an_empty_string_is_named_only_where_the_key_is_required_and_empty(written):
    # A blank is not empty (it may be meant), and an optional key may be left empty; "days"
    # is an integer and "" none, as before.
    problems = check(written, FORECAST).problems
    assert not any(problem.endswith("required, empty") for problem in problems)


@pytest.mark.parametrize("parameters", [{}, {"type": "object"}, None,
                                        {"type": "object", "properties": {}}])
def test_a_tool_that_declares_nothing_takes_any_arguments(parameters):
    assert check({"anything": [1, "x"]}, parameters).problems == ()


def test_text_calls_carry_their_problems_and_coercions():
    tools = {"forecast": FORECAST}
    good = extract('<tool_call>{"name": "forecast", "arguments": {"town": "Oslo", '
                   '"days": "2"}}</tool_call>', tools)
    assert [(orjson.loads(c.arguments), c.schema_problems) for c in good.calls] == [
        ({"town": "Oslo", "days": 2}, ())]
    assert "schema_coerced" in good.calls[0].repairs
    bad = extract("<tool_call>\n<function=forecast>\n<parameter=days>\nsoon\n</parameter>\n"
                  "</function>\n</tool_call>", tools)
    assert [(orjson.loads(c.arguments), c.schema_problems) for c in bad.calls] == [
        ({"days": "soon"}, ("/town: required", "/days: not integer"))]


def test_the_outcome_counts_invalid_calls_from_text_and_from_the_upstreams_parser():
    settings = ExtractionSettings(tools={"forecast": FORECAST})
    text = normalize(vllm_completion('<tool_call>{"name": "forecast", "arguments": '
                                     '{"days": 2}}</tool_call>'), settings)
    assert text.outcome.schema_invalid == [
        SchemaInvalid("hermes", "forecast", ("/town: required",), text.first.calls[0].id)]
    native = normalize(vllm_completion(None, tool_calls=[vllm_tool_call(
        "forecast", '{"town": "Oslo", "days": "4", "unit": "k"}')]), settings)
    [call] = native.first.calls
    assert orjson.loads(call.arguments) == {"town": "Oslo", "days": 4, "unit": "k"}
    assert native.outcome.schema_invalid == [
        SchemaInvalid("native", "forecast", ("/unit: not one of its enum",), call.id)]
    valid = normalize(vllm_completion(None, tool_calls=[vllm_tool_call(
        "forecast", '{"town": "Oslo"}')]), settings)
    assert valid.outcome.schema_invalid == []
    assert valid.first.calls[0].arguments == '{"town": "Oslo"}'  # untouched, byte for byte


def test_a_call_left_out_by_parallel_tool_calls_false_is_not_counted():
    settings = ExtractionSettings(tools={"forecast": FORECAST})
    both = normalize(vllm_completion(None, tool_calls=[
        vllm_tool_call("forecast", '{"town": "Oslo"}'),
        vllm_tool_call("forecast", '{"days": 1}')]), settings)
    assert [s.problems for s in both.outcome.schema_invalid] == [("/town: required",)]
    first, dropped = first_calls_only(both)
    assert (dropped, first.outcome.schema_invalid) == (1, [])


# --- the report over the project's own corpus ----------------------------------------------

TYPED = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]},
    "read": {"type": "object", "properties": {"path": {"type": "string"}},
             "required": ["path"]},
    "write": {"type": "object", "properties": {"path": {"type": "string"},
                                               "content": {"type": "string"}}},
    "exec": {"type": "object", "properties": {"command": {"type": "string"}}},
    "count": {"type": "object", "properties": {"n": {"type": "integer"}}},
}


def test_the_share_of_schema_valid_calls_over_the_corpus_is_reported(capsys):
    """Every call the corpus's texts hold, read against typed tools: the share that fits is
    printed (pytest -s shows it), and each verdict is stable: the arguments delivered,
    checked again, need no coercion and give the same problems."""
    calls = valid = 0
    for text in corpus():
        for call in extract(text, TYPED).calls:
            calls += 1
            valid += not call.schema_problems
            again = check(orjson.loads(call.arguments), TYPED.get(call.name, {}))
            assert (again.coerced, again.problems) == (0, call.schema_problems), text
    assert calls > 300  # not vacuous: the corpus holds hundreds of calls
    with capsys.disabled():
        print(f"\nschema-valid calls over the test corpus: {valid}/{calls} "
              f"({100 * valid / calls:.1f}%)")


@pytest.mark.parametrize("color", [None, "red"])
def test_openapi_nullable_takes_null_and_its_type(color):
    for schema in (TODO_PARAMETERS_30, TODO_PARAMETERS_31):
        arguments = {"item": "milk", "color": color, "labels": ["a", "a"],
                     "due_date": "not a date", "brightness": 400}
        # format, uniqueItems and ranges are the client's to judge: not checked here
        assert check(arguments, schema) == Validity(arguments)


@pytest.mark.parametrize("color", [["red"], {"r": 1}, 2.5])
def test_openapi_nullable_still_refuses_other_types(color):
    assert check({"item": "milk", "color": color}, TODO_PARAMETERS_30).problems == (
        "/color: not string",)
