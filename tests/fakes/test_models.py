"""The scripted model behaviours and the constraints they honour, without a server: a model
that never calls writes prose unless constrained, one that botches writes its markers around
arguments that cannot be used, and under every constraint kind both write a text that fits."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.fakes.constraints import Constraint, UnscriptedConstraint, fit_errors, fitting_text
from tests.fakes.helpers import TOOLS, USER, parameters_of
from tests.fakes.models import (
    CALL_CLOSE,
    CALL_OPEN,
    Turn,
    botches_arguments,
    botches_call,
    calls,
    never_calls_unless_constrained,
    says,
)
from tests.fakes.schema import schema_errors
from tests.fakes.vllm_rules import required_calls_schema

SEARCH = parameters_of("search")
LEGACY_TAG = {"type": "structural_tag", "triggers": ["<tool_call>"], "structures": [
    {"begin": '<tool_call>{"name": "search", "arguments": ', "schema": SEARCH,
     "end": "}</tool_call>"}]}
FORMAT_TAG = {"type": "structural_tag", "format": {
    "type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True,
    "tags": [{"type": "tag", "begin": '<tool_call>\n{"name": "search", "arguments": ',
              "content": {"type": "json_schema", "json_schema": SEARCH},
              "end": "}\n</tool_call>"}]}}
SEQUENCE_TAG = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
    {"type": "const_string", "value": "<think></think>"},
    {"type": "or", "elements": [{"type": "tag", "begin": "<call>", "end": "</call>",
                                 "content": {"type": "json_schema", "json_schema": SEARCH}}]}]}}
CONSTRAINTS = [
    Constraint("json_schema", SEARCH),
    Constraint("json_schema", required_calls_schema(TOOLS)),
    Constraint("json_object"),
    Constraint("choice", ["yes", "no"]),
    Constraint("structural_tag", LEGACY_TAG),
    Constraint("structural_tag", FORMAT_TAG),
    Constraint("structural_tag", SEQUENCE_TAG),
]
BEHAVIOURS = [never_calls_unless_constrained(), botches_arguments("broken"),
              botches_arguments("violating"), calls("read", {"path": "a"}),
              botches_call("read", {"path": "a"}, "broken")]


@pytest.mark.parametrize("constraint", CONSTRAINTS, ids=lambda c: c.kind)
@pytest.mark.parametrize("model", BEHAVIOURS)
def test_every_behaviour_writes_what_fits_a_constraint(model, constraint):
    text = model(Turn(USER, TOOLS, constraint)).text
    assert fit_errors(constraint, text) == []


def test_a_json_object_constraint_gets_a_call_shaped_object_for_the_first_tool():
    text = never_calls_unless_constrained()(Turn(USER, TOOLS, Constraint("json_object"))).text
    call = orjson.loads(text)
    assert call["name"] == "search"
    assert schema_errors(call["arguments"], SEARCH) == []


def test_the_fit_check_refuses_what_does_not_fit():
    assert fit_errors(Constraint("json_schema", SEARCH), '{"query": "ab"}')
    assert fit_errors(Constraint("json_schema", SEARCH), "not json")
    assert fit_errors(Constraint("json_object"), "[1]")
    assert fit_errors(Constraint("choice", ["yes"]), "maybe")
    assert fit_errors(Constraint("regex", r"\d+"), "12a")
    assert fit_errors(Constraint("structural_tag", FORMAT_TAG), "prose only")
    assert fit_errors(Constraint("structural_tag", SEQUENCE_TAG), "prose only")
    broken = '<tool_call>{"name": "search", "arguments": {"query": }</tool_call>'
    assert fit_errors(Constraint("structural_tag", LEGACY_TAG), broken)


def test_without_a_constraint_the_model_that_never_calls_writes_prose():
    text = never_calls_unless_constrained("Let me explain.")(Turn(USER, TOOLS)).text
    assert text == "Let me explain."


LAZY_TAG = {"type": "structural_tag", "format": {**FORMAT_TAG["format"], "at_least_one": False}}


@pytest.mark.parametrize("tag", [LEGACY_TAG, LAZY_TAG])
def test_a_constraint_armed_by_the_call_opener_leaves_prose_free_and_shapes_an_opened_call(tag):
    lazy = Constraint("structural_tag", tag)
    prose = never_calls_unless_constrained("Just words.")(Turn(USER, TOOLS, lazy)).text
    assert prose == "Just words."
    assert fit_errors(lazy, prose) == []
    opened = botches_arguments("broken")(Turn(USER, TOOLS, lazy)).text
    assert "<tool_call>" in opened
    assert fit_errors(lazy, opened) == []


def test_regex_and_grammar_constraints_are_answered_by_the_test_script():
    regex = Constraint("regex", r"call:(search|read)")
    model = never_calls_unless_constrained(script="call:read")
    assert fit_errors(regex, model(Turn(USER, TOOLS, regex)).text) == []
    grammar = Constraint("grammar", 'root ::= "ok"')
    assert never_calls_unless_constrained(script=lambda c: "ok")(Turn(USER, TOOLS, grammar)).text \
        == "ok"
    with pytest.raises(UnscriptedConstraint):
        never_calls_unless_constrained()(Turn(USER, TOOLS, regex))


def _framed(text):
    match = re.fullmatch(re.escape(CALL_OPEN) + r"\n(.*)\n" + re.escape(CALL_CLOSE), text,
                         re.S)
    assert match, text
    return match.group(1)


def test_a_broken_call_has_the_markers_and_the_tool_name_but_unreadable_arguments():
    text = botches_arguments("broken")(Turn(USER, TOOLS)).text
    inner = _framed(text)
    assert '"name":"search"' in inner
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(inner)


def test_a_violating_call_is_json_whose_arguments_break_the_schema():
    for tools in (TOOLS, list(reversed(TOOLS))):
        call = orjson.loads(_framed(botches_arguments("violating")(Turn(USER, tools)).text))
        assert call["name"] == tools[0]["function"]["name"]
        assert schema_errors(call["arguments"], tools[0]["function"]["parameters"])


def test_the_botching_model_takes_the_markers_it_is_given():
    text = botches_arguments(opener="<|tool_call_begin|>", closer="<|tool_call_end|>")(
        Turn(USER, TOOLS)).text
    assert text.startswith("<|tool_call_begin|>")
    assert text.endswith("<|tool_call_end|>")


def test_says_ignores_constraints_and_fitting_text_refuses_an_unknown_way():
    assert says("hi")(Turn(USER, TOOLS, Constraint("json_object"))).text == "hi"
    with pytest.raises(ValueError, match="broken or violating"):
        botches_arguments("sloppy")
    assert fitting_text(Constraint("json_object")) == "{}"


READ_TAG = {"type": "structural_tag", "format": {
    "type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True,
    "tags": [{"type": "tag", "begin": f'<tool_call>\n{{"name": "{name}", "arguments": ',
              "content": {"type": "json_schema", "json_schema": parameters_of(name)},
              "end": "}\n</tool_call>"} for name in ("search", "read")]}}


@pytest.mark.parametrize("how", ["broken", "violating"])
def test_a_model_botching_a_call_it_means_writes_what_it_meant_once_constrained(how):
    """Free, the call to `read` it means is botched; under a tag offering every tool, it
    writes `read` with the arguments it meant (they fit), not the first tool's."""
    model = botches_call("read", {"path": "src/parser.py"}, how)
    inner = _framed(model(Turn(USER, TOOLS)).text)
    if how == "broken":
        assert inner.startswith('{"name":"read"')
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(inner)
    else:
        assert schema_errors(orjson.loads(inner)["arguments"], parameters_of("read"))
    text = model(Turn(USER, TOOLS, Constraint("structural_tag", READ_TAG))).text
    assert text == ('<tool_call>\n{"name": "read", "arguments": {"path":"src/parser.py"}}'
                    '\n</tool_call>')
    assert model(Turn(USER, [TOOLS[0]])).text == "There is no tool for that here."


def test_what_a_model_meant_that_breaks_the_schema_is_masked_into_what_fits():
    meant = {"path": 7}  # not a string: the mask does not let it by
    text = never_calls_unless_constrained(meant=lambda f: meant if f["name"] == "read" else None)(
        Turn(USER, TOOLS, Constraint("structural_tag", READ_TAG))).text
    assert '"name": "read"' in text
    assert fit_errors(Constraint("structural_tag", READ_TAG), text) == []
    assert '"path":7' not in text
