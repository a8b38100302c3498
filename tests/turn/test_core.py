"""The turn's decisions (`turn.core.decide`): the upstream's reply in, the turn's result
or the error out, with every policy applied. No server."""

from __future__ import annotations

import orjson
import pytest

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.shell.config_load import build_config
from proxy.turn.core import Answer, Failure, UpstreamReply, decide
from proxy.turn.plan import TurnPlan, plan_chat
from tests.conftest import TOOLS
from tests.fake_vllm import vllm_completion, vllm_tool_call

HERMES = '<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>'


CONFIG = Config()


def _plan(config=CONFIG, **body) -> TurnPlan:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            **body}
    plan = plan_chat(orjson.dumps(body), config)
    assert isinstance(plan, TurnPlan)
    return plan


def _reply(payload, status=200) -> UpstreamReply:
    body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return UpstreamReply(status, {}, body)


def test_a_call_written_as_text_is_answered_with_tool_calls():
    decision = decide(_plan(), _reply(vllm_completion(HERMES)))
    assert isinstance(decision, Answer)
    choice = decision.result.first
    assert choice.finish == "tool_calls"
    assert [(call.name, call.arguments, call.format) for call in choice.calls] == [
        ("read", '{"path":"/a"}', "hermes")]
    assert choice.calls[0].id.startswith("call_")
    assert decision.outcome.tool_calls == 1
    assert decision.upstream_status == 200


def test_a_failure_in_place_of_a_reply_is_the_turn_s_failure():
    error = ProxyError(502, "unreachable", code="upstream_unreachable")
    decision = decide(_plan(), error)
    assert isinstance(decision, Failure)
    assert decision.error is error
    assert decision.upstream_status is None


def test_an_upstream_error_keeps_its_status_and_message():
    body = {"error": {"message": "context too long", "type": "BadRequestError", "code": 400}}
    decision = decide(_plan(), _reply(body, 400))
    assert isinstance(decision, Failure)
    assert (decision.error.status, decision.error.message) == (400, "context too long")
    assert decision.upstream_status == 400
    assert not decision.ask_again


@pytest.mark.parametrize(("payload", "code"), [
    (b"<html>bad gateway</html>", "upstream_invalid_json"),
    ({"object": "list"}, "upstream_bad_shape"),
])
def test_an_answer_the_client_cannot_use_is_a_502(payload, code):
    decision = decide(_plan(), _reply(payload))
    assert isinstance(decision, Failure)
    assert decision.error.status == 502
    assert decision.error.code == code


@pytest.mark.parametrize("unknown", ["deliver", "text"])
def test_an_answer_left_empty_by_a_dropped_call_is_an_answer(unknown):
    # Issue 26, item 6: never a 502 because a call was left out (clients retry those).
    for call in (vllm_tool_call("read", '{"path": '), vllm_tool_call("rm", "{}")):
        decision = decide(_plan(build_config({"unknown_tool_calls": unknown})),
                          _reply(vllm_completion(None, tool_calls=[call])))
        assert isinstance(decision, Answer)
        (choice,) = decision.result.choices
        delivered = call["function"]["name"] == "rm" and unknown == "deliver"
        assert choice.finish == ("tool_calls" if delivered else "stop")
        assert bool(choice.calls) == delivered


def test_parallel_tool_calls_false_keeps_the_first_call_and_counts_the_rest():
    calls = [vllm_tool_call("read", '{"path": "/a"}'), vllm_tool_call("read", '{"path": "/b"}')]
    decision = decide(_plan(parallel_tool_calls=False),
                      _reply(vllm_completion(tool_calls=calls, finish_reason="tool_calls")))
    assert isinstance(decision, Answer)
    assert [call.arguments for call in decision.result.first.calls] == ['{"path": "/a"}']
    assert decision.dropped_calls == 1
    assert decision.outcome.tool_calls == 1
    assert decision.outcome.call_formats == ["native"]
    assert "parallel_tool_calls_false:kept_first_call" in decision.notes


@pytest.mark.parametrize("tool_choice", [
    "required", {"type": "function", "function": {"name": "read"}}])
def test_a_required_call_that_did_not_come_asks_again(tool_choice):
    config = Config(required_call_retries=2)
    decision = decide(_plan(config, tool_choice=tool_choice),
                      _reply(vllm_completion("I would rather not.")))
    assert isinstance(decision, Failure)
    assert decision.ask_again
    assert decision.error.code == "tool_call_required_unmet"
    assert "asked 3 times" in decision.error.message
    assert decision.notes == ("tool_call_required_but_none_found",)


def test_a_required_call_that_came_is_answered():
    decision = decide(_plan(tool_choice="required"), _reply(vllm_completion(HERMES)))
    assert isinstance(decision, Answer)
    assert decision.notes == ()
