"""An upstream's parse failure is not the end of the turn (issue 41, item 4): the model's text
llama.cpp's error holds is read (`turn.rescue.upstream_error.rescued`), and the turn decides
on it as on a 200 answer, buffered and streamed; what holds no such text, or only a fragment
without a call, stays the error it was. No server."""

from __future__ import annotations

import orjson
import pytest

from proxy.base.config import Config
from proxy.turn.core import Answer, Failure, UpstreamReply, decide
from proxy.turn.live import LiveTurn
from proxy.turn.plan import TurnPlan, plan_chat
from proxy.turn.rescue.upstream_error import LLAMA_CPP, Rescued, rescued
from tests.conftest import TOOLS
from tests.fakes.llamacpp import llamacpp_completion, llamacpp_error, llamacpp_stream_of

CALL = "<tool_call>\n<function=read>\n<parameter=path>\n/etc/hosts\n</parameter>\n</function>" \
       "\n</tool_call>"


def _error(message: str) -> dict:
    return llamacpp_error(500, message).body


def _plan(**body) -> TurnPlan:
    """A tool turn (one without tools is relayed as it is, its errors too)."""
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
               **body}
    plan = plan_chat(orjson.dumps(request), Config())
    assert isinstance(plan, TurnPlan)
    return plan


def _reply(error: dict, status: int = 500) -> UpstreamReply:
    return UpstreamReply(status, {}, orjson.dumps(error))


# -- the reader ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("message", "text", "whole"), [
    (f"Failed to parse input at pos 0: {CALL}", CALL, True),
    (f"Failed to parse input at pos 1360: {CALL}\n\nDone.", f"{CALL}\n\nDone.", False),
    ("Failed to parse input at pos 12: </tool_call>", "</tool_call>", False),
    ("Failed to parse input at pos 0: <think>\nplan\n</think>\nHello", "<think>\nplan\n"
     "</think>\nHello", True),  # the template's generation prompt comes first
])
def test_llama_cpp_s_parse_failure_gives_the_output_from_where_it_stopped(message, text, whole):
    for error in (_error(message), {"error": {"message": message}}, message):
        assert rescued(error) == Rescued(LLAMA_CPP, text, whole)


@pytest.mark.parametrize("error", [
    _error("The model produced output that does not match the expected peg-native format"),
    _error("Failed to parse input at pos 3: "),  # nothing after the position
    _error("Failed to parse tool call arguments as JSON: [json.exception.parse_error.101]"),
    _error("tools param requires --jinja flag"),
    {"error": "XML syntax error on line 1: unexpected EOF"},  # Ollama: never the output
    {"error": {"message": "incomplete GLM tool call: unexpected EOF", "type": "api_error",
               "param": None, "code": None}},
    {"error": {"message": "Some text: Failed to parse input at pos 0: <tool_call>"}},
    {"error": {"code": 500}}, [], None, 7,
])
def test_an_error_that_does_not_hold_the_output_gives_nothing(error):
    assert rescued(error) is None


# -- buffered: the core decides on the rescued text ----------------------------------------------

def test_a_call_in_llama_cpp_s_500_is_delivered_as_if_it_had_answered_200():
    decision = decide(_plan(), _reply(_error(f"Failed to parse input at pos 13: {CALL}")))
    assert isinstance(decision, Answer)
    [call] = decision.result.first.calls
    assert (call.name, orjson.loads(call.arguments)) == ("read", {"path": "/etc/hosts"})
    assert decision.result.first.finish == "tool_calls"
    assert "upstream_error_rescued:llama.cpp" in decision.notes
    assert decision.upstream_status == 500  # what the upstream said, for the log line


def test_a_whole_output_without_a_call_is_delivered_as_text():
    decision = decide(_plan(), _reply(_error(
        "Failed to parse input at pos 0: I cannot find </tool_call> anywhere.")))
    assert isinstance(decision, Answer)
    assert decision.result.first.calls == ()
    assert decision.result.first.content == "I cannot find </tool_call> anywhere."


@pytest.mark.parametrize(("plan", "message"), [
    (_plan(), "Failed to parse input at pos 12: </tool_call>"),  # a fragment, no call
    (_plan(), "The model produced output that does not match the expected peg-native format"),
])
def test_where_nothing_is_read_as_the_answer_today_s_error_stands(plan, message):
    decision = decide(plan, _reply(_error(message)))
    assert isinstance(decision, Failure)
    assert decision.error.status == 500
    assert message in decision.error.message
    assert not decision.notes


def test_a_rescued_answer_still_owes_a_demanded_call():
    plan = _plan(tool_choice="required")
    decision = decide(plan, _reply(_error("Failed to parse input at pos 0: No call here.")))
    assert isinstance(decision, Failure)
    assert decision.ask_again


# -- streamed: the stream's answer so far, then the text the error held ---------------------------

def _streamed(chunks: list[bytes], plan: TurnPlan) -> UpstreamReply:
    live = LiveTurn(plan)
    live.feed([chunk.removeprefix(b"data: ").rstrip(b"\n") for chunk in chunks])
    reply = live.reply()
    assert isinstance(reply, UpstreamReply)
    return reply


def test_an_error_event_that_ends_a_stream_is_read_with_what_the_stream_sent():
    plan = _plan(stream=True)
    sent = llamacpp_stream_of(llamacpp_completion("Let me look.\n", reasoning="The hosts."))
    error = orjson.dumps(_error(f"Failed to parse input at pos 40: {CALL}"))
    reply = _streamed([*sent[:-2], b"data: " + error + b"\n\n"], plan)
    assert reply.rescue is not None
    decision = decide(plan, reply)
    assert isinstance(decision, Answer)
    choice = decision.result.first
    assert (choice.content, choice.reasoning) == ("Let me look.", "The hosts.")
    assert [(c.name, orjson.loads(c.arguments)) for c in choice.calls] == [
        ("read", {"path": "/etc/hosts"})]
    assert "upstream_error_rescued:llama.cpp" in decision.notes


def test_a_stream_ended_by_an_error_without_the_output_keeps_today_s_error():
    plan = _plan(stream=True)
    sent = llamacpp_stream_of(llamacpp_completion("Let me look.\n"))
    error = orjson.dumps(_error("The model produced output that does not match the expected "
                                "peg-native format"))
    live = LiveTurn(plan)
    live.feed([c.removeprefix(b"data: ").rstrip(b"\n") for c in [*sent[:-2],
                                                                b"data: " + error + b"\n\n"]])
    decision = decide(plan, live.reply())
    assert isinstance(decision, Failure)
    assert decision.error.status == 500
