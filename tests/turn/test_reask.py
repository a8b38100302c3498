"""Constrained re-asks as data: the dialect table, the bodies each server is asked, and the
policy (`turn.constrained.policy.step`) over the core's real decisions. No server."""

from __future__ import annotations

import orjson
import pytest

from proxy.base.config import Config
from proxy.turn.constrained import policy as reask
from proxy.turn.constrained.dialects import (
    DIALECTS,
    Constraint,
    constrained_body,
    constraint_for,
    dialects_of,
    pick,
    refused_field,
    wrapper_of,
)
from proxy.turn.constrained.profile import UpstreamProfile
from proxy.turn.core import Answer, Failure, UpstreamReply, decide
from proxy.turn.plan import TurnPlan, plan_chat
from tests.conftest import TOOLS
from tests.fake_vllm import vllm_completion

VLLM = UpstreamProfile(kind="vllm", version="0.33.0")
TOOL_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def _plan(config=None, **body) -> TurnPlan:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            **body}
    plan = plan_chat(orjson.dumps(body), config or Config())
    assert isinstance(plan, TurnPlan)
    return plan


def _reply(payload, status=200) -> UpstreamReply:
    return UpstreamReply(status, {}, orjson.dumps(payload))


def _chooser(profile=VLLM, formats=("auto",)):
    dialects = dialects_of(profile)
    wrapper = wrapper_of(formats, profile)

    def choose(reason, tool):
        return pick(dialects, constraint_for(TOOL_SCHEMAS, None, True, reason, tool), wrapper)
    return choose


def _step(state, decision, choose=None):
    return reask.step(state, decision, choose or _chooser(), TOOL_SCHEMAS)


def _demanded(**fields) -> reask.Asking:
    """The state of a turn whose `tool_choice` demands a call."""
    return reask.Asking(demanded=True, **fields)


# -- the dialect table ------------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "version", "best"), [
    ("vllm", "0.33.0", ["structural_tag", "structured_outputs", "response_format"]),
    ("vllm", "0.11.1", ["structural_tag_legacy", "structured_outputs", "guided_json",
                        "response_format"]),
    ("vllm", "0.9.2", ["structural_tag_legacy", "guided_json", "response_format"]),
    ("vllm", "", ["structural_tag", "structured_outputs", "response_format"]),
    ("sglang", "0.5.4", ["structural_tag", "structural_tag_legacy", "response_format"]),
    ("llama.cpp", "b6812", ["json_schema", "response_format"]),
    ("ollama", "0.12.3", ["response_format"]),
    ("openai-compatible", "", ["response_format"]),
])
def test_each_server_and_version_takes_its_own_dialects(kind, version, best):
    profile = UpstreamProfile(kind=kind, version=version)
    assert [d.name for d in dialects_of(profile)] == best


def test_a_refused_field_retires_every_dialect_it_carries():
    profile = VLLM.refusing("response_format", until=600.0)
    assert [d.name for d in dialects_of(profile)] == ["structured_outputs"]


def test_a_demanded_call_without_a_known_wrapper_is_asked_as_a_json_array():
    dialect = pick(dialects_of(VLLM), Constraint(TOOL_SCHEMAS), wrapper_of(("auto",), VLLM))
    assert dialect is DIALECTS["structured_outputs"]
    body = orjson.loads(constrained_body(_plan(tool_choice="required").upstream_body,
                                         dialect, Constraint(TOOL_SCHEMAS), None, "vllm"))
    schema = body["structured_outputs"]["json"]
    assert schema["type"] == "array"
    assert schema["minItems"] == 1
    names = [item["properties"]["name"]["enum"] for item in schema["items"]["anyOf"]]
    assert names == [["get_weather"], ["read"]]
    assert body["tool_choice"] == "none"  # vLLM refuses a constraint beside a named choice
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_a_wrapper_known_from_the_template_is_asked_as_a_forcing_structural_tag():
    profile = UpstreamProfile(kind="vllm", version="0.33.0", call_wrapper="hermes")
    wrapper = wrapper_of(("auto",), profile)
    assert wrapper is not None
    constraint = Constraint({"read": TOOL_SCHEMAS["read"]}, parallel=False)
    dialect = pick(dialects_of(profile), constraint, wrapper)
    assert dialect is DIALECTS["structural_tag"]
    body = orjson.loads(constrained_body(_plan().upstream_body, dialect, constraint, wrapper,
                                         "vllm"))
    fmt = body["response_format"]["format"]
    assert fmt["type"] == "triggered_tags"
    assert fmt["at_least_one"] is True
    assert fmt["stop_after_first"] is True
    assert fmt["triggers"] == ["<tool_call>"]
    [tag] = fmt["tags"]
    assert tag["begin"].startswith("<tool_call>")
    assert '"read"' in tag["begin"]
    assert tag["content"]["json_schema"] == TOOL_SCHEMAS["read"]
    assert body["skip_special_tokens"] is False  # the wrapper's markers stay in the text


def test_a_legacy_tag_is_never_used_where_a_call_must_come():
    profile = UpstreamProfile(kind="vllm", version="0.11.0", call_wrapper="hermes")
    wrapper = wrapper_of(("auto",), profile)
    forced = pick(dialects_of(profile), Constraint(TOOL_SCHEMAS), wrapper)
    assert forced is DIALECTS["structured_outputs"]
    free = pick(dialects_of(profile), Constraint(TOOL_SCHEMAS, forced=False), wrapper)
    assert free is DIALECTS["structural_tag_legacy"]


def test_what_the_constraint_allows_is_read_back_as_the_call():
    """The text an engine writes under either constraint is a call the proxy reads."""
    plan = _plan(tool_choice="required")
    as_json = '[{"name": "read", "arguments": {"path": "/a"}}]'
    profile = UpstreamProfile(kind="vllm", version="0.33.0", call_wrapper="hermes")
    tag = wrapper_of(("auto",), profile).structural_tag
    as_tag = tag.begin_for("read") + '{"path": "/a"}' + tag.end
    for text in (as_json, as_tag):
        decision = decide(plan, _reply(vllm_completion(text)))
        assert isinstance(decision, Answer), text
        [call] = decision.result.first.calls
        assert (call.name, call.arguments) == ("read", '{"path":"/a"}')


@pytest.mark.parametrize(("status", "error", "refused"), [
    (400, {"error": {"message": "Invalid response_format structural_tag specification.",
                     "param": "response_format"}}, True),
    (400, {"error": {"message": "response_format type must be text, json_object, or "
                                "json_schema", "code": 400}}, True),
    (400, {"error": {"message": "messages must be a list"}}, False),
    (429, {"error": {"message": "response_format: too many requests"}}, False),
    (500, {"error": {"message": "structured output backend crashed"}}, False),
])
def test_a_refusal_is_told_from_another_error(status, error, refused):
    assert refused_field(status, error, DIALECTS["structural_tag"]) is refused


# -- the policy ---------------------------------------------------------------------------------

PROSE = vllm_completion("I would rather explain.")
CONSTRAINED_CALL = vllm_completion('[{"name": "read", "arguments": {"path": "/a"}}]')
REFUSED = {"error": {"message": "You can only either use constraints for structured outputs "
                                "or tools, not both.", "param": "structured_outputs"}}


def test_a_demanded_call_that_did_not_come_is_asked_again_constrained_and_comes():
    plan = _plan(tool_choice="required")
    state, then = _step(_demanded(), decide(plan, _reply(PROSE)))
    assert isinstance(then.decision, Failure)
    assert then.decision.ask_again
    assert then.ask.label == "demanded:structured_outputs"
    state, then = _step(state, decide(plan, _reply(CONSTRAINED_CALL)))
    assert then.ask is None
    assert isinstance(then.decision, Answer)
    repairs = [(r.repair, r.tool) for r in then.decision.outcome.repairs]
    assert ("constrained", "read") in repairs


def test_a_constrained_re_ask_still_without_the_call_is_today_s_502_and_no_storm():
    plan = _plan(tool_choice="required")
    state, _ = _step(_demanded(retries=3), decide(plan, _reply(PROSE)))
    state, then = _step(state, decide(plan, _reply(PROSE)))
    assert then.ask is None
    assert isinstance(then.decision, Failure)
    assert not then.decision.ask_again
    assert then.decision.error.code == "tool_call_required_unmet"
    assert "asked 2 times" in then.decision.error.message


def test_a_refused_constraint_is_remembered_and_today_s_retry_follows():
    plan = _plan(tool_choice="required")
    state, _ = _step(reask.Asking(), decide(plan, _reply(PROSE)))
    state, then = _step(state, decide(plan, _reply(REFUSED, 400)))
    assert then.refused == "structured_outputs"
    assert then.ask == reask.ReAsk("demanded")
    assert then.decision.ask_again
    state, then = _step(state, decide(plan, _reply(PROSE)))
    assert isinstance(then.decision, Failure)
    assert then.decision.error.code == "tool_call_required_unmet"
    assert then.ask is None


def test_without_a_dialect_or_with_the_setting_off_the_retries_are_today_s():
    plan = _plan(tool_choice="required")
    for state, choose in ((reask.Asking(retries=2), lambda reason, tool: None),
                          (reask.Asking(setting="off", retries=2), None)):
        asks = []
        decision = decide(plan, _reply(PROSE))
        while True:
            state, then = _step(state, decision, choose)
            if then.ask is None:
                break
            asks.append(then.ask)
            decision = decide(plan, _reply(PROSE))
        assert asks == [reask.ReAsk("demanded")] * 2
        assert then.decision.error.code == "tool_call_required_unmet"


UNREADABLE = vllm_completion('<tool_call>{"name": "read", "arguments": "{path: /a"}'
                             '</tool_call>')


def test_a_frame_whose_arguments_cannot_be_read_is_asked_again_constrained_to_its_tool():
    plan = _plan()
    first = decide(plan, _reply(UNREADABLE))
    assert isinstance(first, Answer)
    assert not first.result.first.calls
    state, then = _step(reask.Asking(), first)
    assert then.ask == reask.ReAsk("unreadable", DIALECTS["structured_outputs"], "read")
    state, then = _step(state, decide(plan, _reply(CONSTRAINED_CALL)))
    assert [c.name for c in then.decision.result.first.calls] == ["read"]


@pytest.mark.parametrize("second", [(PROSE, 200), (REFUSED, 400),
                                    ({"error": {"message": "boom"}}, 500)])
def test_an_unreadable_frame_the_re_ask_does_not_mend_is_answered_as_today(second):
    plan = _plan()
    first = decide(plan, _reply(UNREADABLE))
    state, _ = _step(reask.Asking(), first)
    state, then = _step(state, decide(plan, _reply(*second)))
    assert then.decision is first
    assert then.ask is None


@pytest.mark.parametrize(("state", "held"), [(reask.Asking(setting="demanded"), True),
                                             (reask.Asking(), False)])
def test_an_unreadable_frame_is_not_asked_again_where_the_setting_or_the_stream_forbids(
        state, held):
    """`held` False: the streamed mode's hold-back let all the content out (the frame, if
    any, has been shown): it cannot be taken back."""
    first = decide(_plan(), _reply(UNREADABLE))
    _, then = reask.step(state, first, _chooser(), TOOL_SCHEMAS, held=held)
    assert then.decision is first
    assert then.ask is None


BESIDE = vllm_completion('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
                         '</tool_call>\n<tool_call>{"name": "read", "arguments": "{path: /a"}'
                         '</tool_call>')


@pytest.mark.parametrize("state", [reask.Asking(), _demanded()])
def test_an_unreadable_frame_beside_good_calls_is_left_as_text_and_not_asked_again(state):
    """Decided (issue 41): the good calls are delivered, the unreadable frame stays text
    (counted: its reason in `left_as_text`, on the log line and in the metrics), and nothing
    is asked again. A re-ask is a new generation from the same prompt, blind to the calls
    already taken: constrained to the frame's tool it may well write one of them again (a
    second get_weather for Paris, not the one the frame held), and nothing shows that the
    call it writes is the frame's. Alone, an unreadable frame's re-ask replaces the whole
    answer, so nothing is doubled; beside calls, it would be merged into them. See
    docs/constrained-reasks.md."""
    first = decide(_plan(), _reply(BESIDE))
    assert isinstance(first, Answer)
    assert [(c.name, orjson.loads(c.arguments)) for c in first.result.first.calls] == [
        ("get_weather", {"city": "Paris"})]
    assert '"{path: /a"' in first.result.first.content
    assert {(t.reason, t.tool) for t in first.outcome.left_as_text} == {
        ("arguments_not_json", "read")}
    assert reask.unreadable_tool(first, TOOL_SCHEMAS) is False
    _, then = _step(state, first)
    assert then.decision is first
    assert then.ask is None


def test_a_call_cut_by_length_is_not_unreadable():
    cut = vllm_completion('<tool_call>{"name": "read", "arguments": {"path": "/a',
                          finish_reason="length")
    first = decide(_plan(), _reply(cut))
    assert reask.unreadable_tool(first, TOOL_SCHEMAS) is False


def test_the_waiting_machine_s_bound_covers_the_policy_s_asks():
    assert reask.budget("off", 1, demanded=True) == 1
    assert reask.budget("off", 1, demanded=False) == 0
    assert reask.budget("demanded", 1, demanded=True) == 2
    assert reask.budget("demanded", 1, demanded=False) == 0  # an auto turn: nothing to ask
    assert reask.budget("demanded+unreadable", 1, demanded=True) == 2
    assert reask.budget("demanded+unreadable", 0, demanded=False) == 1


def test_the_setting_s_former_name_is_read_as_the_new_one():
    assert reask.Asking(setting="demanded+botched").setting == "demanded+unreadable"
    assert reask.budget("demanded+botched", 0, demanded=False) == 1


def test_a_frame_whose_name_is_unreadable_too_is_asked_as_one_call_to_any_tool():
    unreadable = vllm_completion('<tool_call>{"name": "read", "arguments": {"path": }}'
                                 '</tool_call>')
    first = decide(_plan(), _reply(unreadable))
    assert reask.unreadable_tool(first, TOOL_SCHEMAS) is True
    _, then = _step(reask.Asking(), first)
    assert then.ask == reask.ReAsk("unreadable", DIALECTS["structured_outputs"], None)
    constraint = constraint_for(TOOL_SCHEMAS, None, True, "unreadable", None)
    assert set(constraint.tools) == {"get_weather", "read"}
    assert not constraint.parallel


def test_json_that_merely_looks_like_a_call_is_not_unreadable():
    prose = vllm_completion('Here is an example: {"name": "read", "arguments": {"path": }}')
    first = decide(_plan(), _reply(prose))
    assert reask.unreadable_tool(first, TOOL_SCHEMAS) is False


# -- a call written whole is never re-asked on an `auto` turn (issue 41, item 2) ---------------

REQUIRED = {"type": "object", "properties": {"path": {"type": "string"}},
            "required": ["path"]}
WRITTEN_WHOLE = {
    "a required key missing": '{"name": "delete_file", "arguments": {"recursive": true}}',
    "a required key empty": '{"name": "delete_file", "arguments": {"path": ""}}',
    "a key of the wrong type": '{"name": "delete_file", "arguments": {"path": 7.5}}',
}


def _deleting(**body) -> TurnPlan:
    tools = [*TOOLS, {"type": "function", "function": {"name": "delete_file",
                                                       "parameters": REQUIRED}}]
    return _plan(tools=tools, **body)


def _step_deleting(state, decision):
    schemas = {**TOOL_SCHEMAS, "delete_file": REQUIRED}

    def choose(reason, tool):
        return pick(dialects_of(VLLM), constraint_for(schemas, None, True, reason, tool),
                    wrapper_of(("auto",), VLLM))
    return reask.step(state, decision, choose, schemas)


@pytest.mark.parametrize("setting", ["demanded", "demanded+unreadable", "demanded+botched"])
@pytest.mark.parametrize("written", sorted(WRITTEN_WHOLE))
def test_a_call_written_whole_off_its_schema_is_delivered_as_written_and_counted(
        written, setting):
    """The model must not be made to invent a destination for `delete_file`: the call goes
    out as the model wrote it, counted `schema_invalid`, and nothing is asked again."""
    text = f"<tool_call>{WRITTEN_WHOLE[written]}</tool_call>"
    first = decide(_deleting(), _reply(vllm_completion(text)))
    assert isinstance(first, Answer)
    [call] = first.result.first.calls
    assert call.name == "delete_file"
    assert orjson.loads(call.arguments) == orjson.loads(WRITTEN_WHOLE[written])["arguments"]
    assert [s.tool for s in first.outcome.schema_invalid] == ["delete_file"]
    assert reask.unreadable_tool(first, TOOL_SCHEMAS) is False
    _, then = _step_deleting(reask.Asking(setting=setting), first)
    assert then.ask is None
    assert then.decision is first


def test_a_call_written_whole_without_arguments_is_not_asked_to_invent_them():
    """`{"name": "delete_file"}` (arguments the tool needs, none written) stays text as the
    engine leaves it; a constraint would force every argument out of the model."""
    first = decide(_deleting(), _reply(vllm_completion(
        '<tool_call>{"name": "delete_file"}</tool_call>')))
    assert [left.reason for left in first.outcome.left_as_text] == ["missing_arguments"]
    _, then = _step_deleting(reask.Asking(), first)
    assert (then.ask, then.decision) == (None, first)


@pytest.mark.parametrize("choice", ["required",
                                    {"type": "function", "function": {"name": "delete_file"}}])
@pytest.mark.parametrize("written", sorted(WRITTEN_WHOLE))
def test_a_demanded_call_off_its_schema_is_asked_again_under_the_demand(written, choice):
    """What vLLM does with a parser and `required`: the call must fit. The re-ask's call is
    delivered; one that fits replaces the first answer."""
    plan = _deleting(tool_choice=choice)
    first = decide(plan, _reply(vllm_completion(f"<tool_call>{WRITTEN_WHOLE[written]}"
                                                "</tool_call>")))
    assert isinstance(first, Answer)
    state, then = _step_deleting(_demanded(), first)
    assert then.ask == reask.ReAsk("demanded", DIALECTS["structured_outputs"])
    assert isinstance(then.decision, Failure)
    assert then.decision.ask_again
    mended = vllm_completion('[{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]')
    _, then = _step_deleting(state, decide(plan, _reply(mended)))
    [call] = then.decision.result.first.calls
    assert orjson.loads(call.arguments) == {"path": "/tmp/x"}
    assert ("constrained", "delete_file") in [(r.repair, r.tool)
                                              for r in then.decision.outcome.repairs]


@pytest.mark.parametrize("second", [(PROSE, 200), (REFUSED, 400),
                                    ({"error": {"message": "boom"}}, 500)])
def test_a_demanded_call_off_its_schema_the_re_ask_does_not_mend_is_delivered_as_written(
        second):
    """No 502 and no unconstrained retry: the client has the call the model wrote."""
    plan = _deleting(tool_choice="required")
    first = decide(plan, _reply(vllm_completion(
        f"<tool_call>{WRITTEN_WHOLE['a required key missing']}</tool_call>")))
    state, _ = _step_deleting(_demanded(), first)
    _, then = _step_deleting(state, decide(plan, _reply(*second)))
    assert then.decision is first
    assert then.ask is None
    assert then.refused == ("structured_outputs" if second[1] == 400 else None)


def test_a_demanded_call_off_its_schema_is_delivered_where_the_setting_is_off():
    plan = _deleting(tool_choice="required")
    first = decide(plan, _reply(vllm_completion(
        f"<tool_call>{WRITTEN_WHOLE['a required key empty']}</tool_call>")))
    _, then = _step_deleting(_demanded(setting="off"), first)
    assert (then.ask, then.decision) == (None, first)


def test_calls_that_fit_are_never_asked_again():
    fitting = vllm_completion('<tool_call>{"name": "read", "arguments": {"path": "/a"}}'
                              '</tool_call>')
    for state in (reask.Asking(), _demanded()):
        first = decide(_plan(tool_choice="required"), _reply(fitting))
        _, then = _step(state, first)
        assert (then.ask, then.decision) == (None, first)
