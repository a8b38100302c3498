"""The turn as one machine (`turn.machine`), tested without a server, a socket or a clock:
events in, actions out, every row of its table driven both ways, and a property over any
order of looks and answers."""

from __future__ import annotations

import textwrap

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.turn.constrained.profile import UpstreamProfile
from proxy.turn.core import UpstreamReply
from proxy.turn.machine import turn as machine
from proxy.turn.machine.events import (
    Abandon,
    AskUpstream,
    Cancel,
    ClientGone,
    Commit,
    Decided,
    Deliver,
    Draining,
    Fail,
    Flow,
    Heartbeat,
    Keep,
    LearnProfile,
    Note,
    ProfileLearned,
    ReAsked,
    Refused,
    Requested,
    StreamEnd,
    Suspect,
    Tick,
    Unreached,
    UpstreamEnded,
    UpstreamEvents,
    Wait,
    another_replica,
)
from proxy.turn.machine.turn import NoTransition, Phase, Settings, TurnMachine
from proxy.turn.plan import TurnPlan, plan_chat
from proxy.turn.thinking import ThinkingMemory
from proxy.turn.waiting import CHECK_SECONDS
from tests.conftest import TOOLS
from tests.fake_vllm import vllm_completion, vllm_tool_call

VLLM = UpstreamProfile(kind="vllm", version="0.33.0")
QUIET = {"constrained_reask": "off", "thinking_opened_by_template": "false"}
ENDS = (Deliver, Fail, Abandon)


def _plan(config: Config | None = None, **body: object) -> TurnPlan:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            **body}
    plan = plan_chat(orjson.dumps(body), config or Config())
    assert isinstance(plan, TurnPlan)
    return plan


def _machine(plan: TurnPlan | None = None, *, keeps: bool = False,
             profile_seconds: float = 5.0) -> TurnMachine:
    return TurnMachine(plan or _plan(), Settings(0.0, profile_seconds, keeps, ThinkingMemory()))


def _quiet(**fields: object) -> TurnMachine:
    """A turn that needs no profile: nothing to constrain, thinking not learned."""
    return _machine(_plan(Config(**{**QUIET, **fields})))  # type: ignore[arg-type]


def _kinds(actions: list) -> list[type]:
    return [type(action) for action in actions]


def _reply(payload: dict, status: int = 200) -> UpstreamReply:
    return UpstreamReply(status, {}, orjson.dumps(payload))


WEATHER = vllm_completion(tool_calls=[vllm_tool_call("get_weather", '{"city": "Paris"}')],
                          finish_reason="tool_calls")
PROSE = vllm_completion("It is sunny.")


def _calling(m: TurnMachine, now: float = 0.0) -> list:
    """Begin `m` and take it to its call, the first look done."""
    actions = m.handle(Requested(now))
    if m.phase is Phase.LEARNING:
        actions += m.handle(ProfileLearned(now, VLLM))
    assert m.phase is Phase.CALLING
    return actions + m.handle(Tick(now))


# -- the table, as its docstring shows it ------------------------------------------------


def test_the_docstring_shows_the_table_the_machine_reads():
    doc = machine.__doc__ or ""
    shown = doc[doc.index("    start "):doc.index("\n\n", doc.index("    start "))]
    assert textwrap.dedent(shown) == machine.render(machine.TABLE)


# -- start ---------------------------------------------------------------------------------


def test_a_turn_that_may_constrain_learns_the_profile_first_within_its_deadline():
    m = _machine(profile_seconds=5.0)
    assert m.handle(Requested(10.0)) == [LearnProfile(15.0)]
    assert m.phase is Phase.LEARNING


def test_a_turn_that_needs_no_profile_asks_upstream_at_once():
    m = _quiet()
    actions = m.handle(Requested(0.0))
    assert _kinds(actions) == [AskUpstream]
    assert actions[0].body == m.plan.upstream_body
    assert not actions[0].streamed
    assert not actions[0].profiled  # nothing to choose by a profile
    assert m.phase is Phase.CALLING


def test_a_streamed_first_turn_of_a_model_learns_its_thinking_opener_even_unconstrained():
    m = _machine(_plan(Config(constrained_reask="off", stream_mode="stream"), stream=True))
    assert _kinds(m.handle(Requested(0.0))) == [LearnProfile]


# -- learning ------------------------------------------------------------------------------


def test_the_profile_learned_starts_the_call_and_resumes_the_wait_under_way():
    m = _machine()
    m.handle(Requested(0.0))
    assert _kinds(m.handle(Tick(0.0))) == [Wait]
    actions = m.handle(ProfileLearned(0.2, VLLM))
    assert _kinds(actions) == [AskUpstream, Wait]
    assert actions[0].profiled  # its end is told with what is known of the replica then
    assert actions[-1].seconds == pytest.approx(CHECK_SECONDS - 0.2)
    assert m.profile is VLLM
    assert m.phase is Phase.CALLING


def test_the_profile_before_the_first_look_starts_the_call_alone():
    m = _machine()
    m.handle(Requested(0.0))
    assert _kinds(m.handle(ProfileLearned(0.0, VLLM))) == [AskUpstream]


def test_a_profile_told_once_the_call_is_under_way_has_no_row():
    m = _quiet()
    m.handle(Requested(0.0))
    with pytest.raises(NoTransition):
        m.handle(ProfileLearned(0.1, VLLM))


def test_the_wait_for_a_profile_ends_at_its_deadline_then_the_call_starts_without_it():
    m = _machine(profile_seconds=1.2)
    m.handle(Requested(0.0))
    for now in (0.0, 0.5):
        actions = m.handle(Tick(now))
        assert _kinds(actions) == [Wait]  # before the deadline: no call
    assert actions[0].seconds == pytest.approx(0.5)
    assert m.handle(Tick(1.0)) == [Wait(pytest.approx(0.2))]  # shortened to the deadline
    actions = m.handle(Tick(1.2))
    assert _kinds(actions) == [AskUpstream, Wait]
    assert m.profile == UpstreamProfile()  # the generic one
    assert m.phase is Phase.CALLING


def test_the_turn_s_time_running_out_on_the_profile_alone_suspects_the_replica():
    m = _machine(_plan(Config(buffered_timeout_seconds=2.0)), profile_seconds=5.0)
    m.handle(Requested(0.0))
    actions = m.handle(Tick(2.0))
    assert _kinds(actions) == [Suspect, Fail]
    assert actions[0].why.code == actions[1].error.code == "upstream_timeout"
    assert m.phase is Phase.DONE


def test_a_client_gone_while_learning_is_abandoned_with_nothing_to_cut():
    m = _machine()
    m.handle(Requested(0.0))
    assert _kinds(m.handle(ClientGone(0.3))) == [Abandon]


# -- looks while calling -------------------------------------------------------------------


def test_a_look_while_calling_is_the_wait_s():
    m = _quiet()
    assert _kinds(_calling(m)) == [AskUpstream, Wait]
    assert _kinds(m.handle(Tick(0.5))) == [Wait]


def test_the_turn_s_time_running_out_on_its_call_cuts_the_call_with_why():
    m = _machine(_plan(Config(**QUIET, buffered_timeout_seconds=2.0)))  # type: ignore[arg-type]
    _calling(m)
    actions = m.handle(Tick(2.0))
    assert _kinds(actions) == [Cancel, Fail]
    assert actions[0].why is actions[1].error


def test_a_client_gone_while_calling_cuts_the_call_and_ends():
    m = _quiet()
    _calling(m)
    assert m.handle(ClientGone(0.4)) == [Cancel(None), Abandon()]
    assert m.phase is Phase.DONE


def test_a_server_stopping_cuts_the_call_and_fails_with_a_restart():
    m = _quiet()
    _calling(m)
    actions = m.handle(Draining(0.4))
    assert _kinds(actions) == [Cancel, Fail]
    assert actions[0].why is None
    assert actions[1].error.code == "proxy_restarting"


def test_a_streaming_client_is_committed_and_beaten_while_the_call_is_slow():
    m = _machine(_plan(Config(**QUIET), stream=True))  # type: ignore[arg-type]
    _calling(m)
    assert _kinds(m.handle(Tick(0.5))) == [Commit, Wait]
    assert _kinds(m.handle(Tick(5.5))) == [Heartbeat, Wait]


# -- streamed events -----------------------------------------------------------------------


def _chunk(content: str) -> bytes:
    return orjson.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0,
                         "model": "m", "choices": [{"index": 0, "delta": {"content": content},
                                                    "finish_reason": None}]})


def _streamed(**fields: object) -> TurnMachine:
    plan = _plan(Config(**{**QUIET, "stream_mode": "stream", **fields}),  # type: ignore[arg-type]
                 stream=True)
    assert plan.streamed
    return _machine(plan)


def test_streamed_text_that_may_flow_commits_the_stream_and_flows():
    m = _streamed()
    asked = _calling(m)
    assert asked[0].streamed
    actions = m.handle(UpstreamEvents(0.1, (_chunk("Hello there, "),)))
    assert _kinds(actions) == [Commit, Flow, Wait]
    # (the trailing space is held: a frame could open after it)
    assert "".join(piece.text for piece in actions[1].pieces) == "Hello there,"
    assert actions[-1].seconds == pytest.approx(CHECK_SECONDS - 0.1)  # the wait goes on


def test_streamed_events_with_nothing_to_flow_only_go_on_waiting():
    m = _streamed()
    _calling(m)
    assert _kinds(m.handle(UpstreamEvents(0.1, ()))) == [Wait]


def test_streamed_events_at_the_wait_s_end_are_a_look_too():
    m = _streamed()
    _calling(m)
    assert _kinds(m.handle(UpstreamEvents(0.5, ()))) == [Commit, Wait]  # the commit window


def test_streamed_events_for_a_buffered_turn_have_no_row():
    m = _quiet()
    _calling(m)
    with pytest.raises(NoTransition):
        m.handle(UpstreamEvents(0.1, (_chunk("x"),)))


def test_a_stream_read_to_its_end_is_decided_as_the_assembled_answer():
    m = _streamed()
    _calling(m)
    m.handle(UpstreamEvents(0.1, (_chunk("Hello."), b"[DONE]")))
    actions = m.handle(UpstreamEnded(0.2, StreamEnd()))
    assert _kinds(actions) == [Decided, Deliver]
    assert actions[-1].answer.result.choices[0].content == "Hello."


def test_a_stream_that_ended_without_done_is_a_failure_in_the_stream():
    m = _streamed()
    _calling(m)
    m.handle(UpstreamEvents(0.1, (_chunk("Hel"),)))
    actions = m.handle(UpstreamEnded(0.2, StreamEnd()))
    assert _kinds(actions) == [Decided, Cancel, Fail]
    assert actions[-1].error.code == "upstream_stream_cut"


# -- the call's end ------------------------------------------------------------------------


def test_an_answer_is_delivered_and_kept_first_where_the_front_keeps_answers():
    plan = _plan(Config(**QUIET))  # type: ignore[arg-type]
    for keeps, kinds in ((True, [Decided, Keep, Deliver]), (False, [Decided, Deliver])):
        m = _machine(plan, keeps=keeps)
        _calling(m)
        actions = m.handle(UpstreamEnded(0.3, _reply(WEATHER)))
        assert _kinds(actions) == kinds
        assert actions[-1].answer.result.choices[0].calls[0].name == "get_weather"
        assert m.phase is Phase.DONE


def test_a_demanded_call_that_did_not_come_is_asked_again_constrained():
    m = _machine(_plan(tool_choice="required"))
    _calling(m)
    actions = m.handle(UpstreamEnded(0.3, _reply(PROSE), VLLM))
    kinds = _kinds(actions)
    assert kinds == [Decided, Note, AskUpstream, Wait]
    ask = actions[2]
    assert ask.reask is not None
    assert ask.reask.startswith("demanded:")
    assert actions[1].text == f"reask:{ask.reask}"
    assert ask.body != m.plan.upstream_body  # constrained
    actions = m.handle(UpstreamEnded(0.9, _reply(WEATHER), VLLM))
    assert _kinds(actions) == [ReAsked, Decided, Deliver]
    assert actions[0].result == "recovered"
    assert actions[0].ms == pytest.approx(600.0)


def test_a_demanded_call_with_re_asks_off_is_today_s_unconstrained_retry_then_the_502():
    m = _machine(_plan(Config(**QUIET), tool_choice="required"))  # type: ignore[arg-type]
    _calling(m)
    actions = m.handle(UpstreamEnded(0.3, _reply(PROSE)))
    assert _kinds(actions) == [Decided, Note, AskUpstream, Wait]
    assert actions[1].text == "tool_call_required:asked_again"
    assert actions[2].body == m.plan.upstream_body
    actions = m.handle(UpstreamEnded(0.6, _reply(PROSE)))
    assert _kinds(actions) == [ReAsked, Decided, Cancel, Fail]
    assert actions[-1].error.code == "tool_call_required_unmet"


def test_a_refused_constraint_is_told_to_be_remembered():
    m = _machine(_plan(tool_choice="required"))
    _calling(m)
    ask = m.handle(UpstreamEnded(0.3, _reply(PROSE), VLLM))[2]
    dialect = m.asks.state.last.dialect
    refusal = {"error": {"message": f"Unrecognized field: {dialect.field}",
                         "type": "BadRequestError", "param": dialect.field, "code": 400}}
    actions = m.handle(UpstreamEnded(0.5, _reply(refusal, 400), VLLM))
    assert ask.reask is not None
    assert _kinds(actions)[:3] == [Refused, Note, ReAsked]
    assert actions[0].dialect == dialect
    assert actions[1].text == f"constraint_refused:{dialect.field}"


@pytest.mark.parametrize(("fit", "kinds"), [
    (True, [Decided, Note, AskUpstream, Wait]),
    (False, [Decided, Cancel, Fail]),
])
def test_a_context_window_refusal_is_asked_again_fitted_once(fit, kinds):
    m = _quiet(fit_max_tokens=fit)
    _calling(m)
    refusal = {"error": {"message": "'max_tokens' or 'max_completion_tokens' is too large: "
                                    "4000. This model's maximum context length is 4096 tokens "
                                    "and your request has 1000 input tokens (4000 > 4096 - "
                                    "1000).", "type": "BadRequestError", "param": None,
                         "code": 400}}
    actions = m.handle(UpstreamEnded(0.3, _reply(refusal, 400)))
    assert _kinds(actions) == kinds
    if fit:
        assert actions[1].text.startswith("max_tokens_fitted:")
        assert actions[2].body != m.plan.upstream_body
        assert orjson.loads(actions[2].body).get("max_tokens") != 4000
        again = m.handle(UpstreamEnded(0.6, _reply(refusal, 400)))
        assert _kinds(again) == [Decided, Cancel, Fail]  # fitted once, no storm


def test_an_upstream_failure_fails_the_turn():
    m = _quiet()
    _calling(m)
    failure = ProxyError(502, "gone", type_="upstream_error", code="upstream_unreachable")
    actions = m.handle(UpstreamEnded(0.3, failure))
    assert _kinds(actions) == [Decided, Cancel, Fail]
    assert actions[-1].error is failure


def test_an_upstream_end_while_learning_has_no_row():
    m = _machine()
    m.handle(Requested(0.0))
    with pytest.raises(NoTransition):
        m.handle(UpstreamEnded(0.1, _reply(PROSE)))


# -- done ----------------------------------------------------------------------------------


@pytest.mark.parametrize("event", [Tick(9.0), ClientGone(9.0), Draining(9.0),
                                   UpstreamEnded(9.0, StreamEnd()), ProfileLearned(9.0, VLLM)])
def test_after_its_end_the_turn_takes_every_event_and_does_nothing(event):
    m = _quiet()
    _calling(m)
    m.handle(ClientGone(0.1))
    assert m.handle(event) == []


def test_before_its_request_the_turn_takes_no_event():
    with pytest.raises(NoTransition):
        _quiet().handle(Tick(0.0))


# -- the upstream's outcome ----------------------------------------------------------------


@pytest.mark.parametrize(("outcome", "another"), [
    (Unreached(502, "refused", code="upstream_unreachable"), True),
    (ProxyError(502, "cut", code="upstream_cut"), True),
    (UpstreamReply(503, {}, b""), True),
    (UpstreamReply(200, {}, b"{}"), False),
    (UpstreamReply(400, {}, b"{}"), False),
    (ProxyError(504, "slow", code="upstream_timeout"), False),
    (StreamEnd(), False),
])
def test_another_replica_is_asked_only_where_this_one_did_not_answer(outcome, another):
    assert another_replica(outcome) is another


# -- a property over any order of things ---------------------------------------------------

LOOKS = st.sampled_from(["tick", "tick", "tick", "gone", "draining", "answer", "prose",
                         "failure", "profile"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(LOOKS, st.floats(0.0, 3.0)), max_size=30),
       st.booleans(), st.booleans())
def test_any_turn_ends_once_cuts_what_it_asked_and_never_waits_past_a_look(
        steps, demanded, streams):
    body = {"tool_choice": "required"} if demanded else {}
    if streams:
        body["stream"] = True
    m = _machine(_plan(Config(buffered_timeout_seconds=20.0), **body))
    seen = m.handle(Requested(0.0))
    now = 0.0
    for kind, later in steps:
        now += later
        if kind == "profile" and m.phase is not Phase.LEARNING:
            continue
        if kind in ("answer", "prose", "failure") and m.phase is not Phase.CALLING:
            continue
        event = {"tick": Tick(now), "gone": ClientGone(now), "draining": Draining(now),
                 "answer": UpstreamEnded(now, _reply(WEATHER), VLLM),
                 "prose": UpstreamEnded(now, _reply(PROSE), VLLM),
                 "failure": UpstreamEnded(now, ProxyError(502, "x", code="upstream_error")),
                 "profile": ProfileLearned(now, VLLM)}[kind]
        seen += m.handle(event)
    ends = [i for i, action in enumerate(seen) if isinstance(action, ENDS)]
    assert len(ends) <= 1
    if ends:
        assert ends[0] == len(seen) - 1  # nothing after the end
        assert m.phase is Phase.DONE
        end = seen[-1]
        cut = seen[-2] if len(seen) > 1 else None
        asked = any(isinstance(action, AskUpstream) for action in seen)
        if isinstance(end, (Abandon, Fail)) and asked:
            assert isinstance(cut, Cancel)
        if not asked:
            assert not any(isinstance(action, Cancel) for action in seen)
    else:
        assert m.phase is not Phase.DONE
    assert all(0.0 <= action.seconds <= CHECK_SECONDS
               for action in seen if isinstance(action, Wait))
    commits = [i for i, action in enumerate(seen) if isinstance(action, Commit)]
    assert len(commits) <= 1
    if commits:  # the client streams; heartbeats and flows only once committed
        assert streams
    assert all(i > commits[0] for i, action in enumerate(seen)
               if isinstance(action, (Heartbeat, Flow))) if commits else not any(
        isinstance(action, (Heartbeat, Flow)) for action in seen)
