"""The waiting of a turn as a state machine (`turn.waiting`), tested without a server or a
clock: events in, actions out."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.base.errors import ProxyError
from proxy.turn import waiting
from proxy.turn.context_window import Refit
from proxy.turn.core import Answer, Failure
from proxy.turn.result import Outcome
from proxy.turn.waiting import (
    CHECK_SECONDS,
    Abandon,
    Arrived,
    AskAgain,
    Collect,
    Commit,
    Decided,
    Deliver,
    Fail,
    Flow,
    Heartbeat,
    Phase,
    Tick,
    UpstreamDone,
    Wait,
)

ANSWER = Answer({"choices": []}, Outcome())
MISSING_CALL = Failure(ProxyError(502, "no call", code="tool_call_required_unmet"),
                       ask_again=True)


def _kinds(actions):
    return [type(action) for action in actions]


def test_a_client_that_does_not_stream_is_never_sent_a_head_or_a_heartbeat():
    state = waiting.start(0.0, 100.0, beat=1.0)
    seen = []
    for now in [0.0, 0.5, 1.0, 5.0, 50.0, 99.9]:
        state, actions = waiting.step(state, Tick(now))
        seen += actions
    assert all(isinstance(action, Wait) for action in seen)
    assert state.phase is Phase.WAITING


def test_waits_are_never_longer_than_a_look_at_the_client():
    state = waiting.start(0.0, 1000.0, commit_after=10.0, beat=30.0)
    for now in [0.0, 3.0, 10.0, 20.0, 127.74954963355445]:  # the last: `now + 0.5 - now` > 0.5
        state, actions = waiting.step(state, Tick(now))
        wait = actions[-1]
        assert isinstance(wait, Wait)
        assert 0 <= wait.seconds <= CHECK_SECONDS


def test_the_stream_commits_when_the_window_passes_then_beats_on_schedule():
    state = waiting.start(100.0, 1800.0, commit_after=0.5, beat=5.0)
    state, actions = waiting.step(state, Tick(100.2))
    assert _kinds(actions) == [Wait]
    assert abs(actions[0].seconds - 0.3) < 1e-9
    state, actions = waiting.step(state, Tick(100.5))
    assert _kinds(actions) == [Commit, Wait]
    assert state.phase is Phase.STREAMING
    state, actions = waiting.step(state, Tick(104.0))
    assert _kinds(actions) == [Wait]
    state, actions = waiting.step(state, Tick(105.5))
    assert _kinds(actions) == [Heartbeat, Wait]
    state, actions = waiting.step(state, Tick(106.0))
    assert _kinds(actions) == [Wait]  # the next beat is 5 s after the last one


def test_no_heartbeats_when_they_are_turned_off():
    state = waiting.start(0.0, 100.0, commit_after=0.0, beat=0.0)
    kinds = []
    for now in [0.0, 10.0, 20.0, 30.0]:
        state, actions = waiting.step(state, Tick(now))
        kinds += _kinds(actions)
    assert Heartbeat not in kinds
    assert kinds.count(Commit) == 1


def test_the_deadline_fails_the_turn_with_a_504_naming_the_limit():
    state = waiting.start(10.0, 30.0, commit_after=0.5, beat=5.0)
    state, actions = waiting.step(state, Tick(40.0))
    (fail,) = actions
    assert isinstance(fail, Fail)
    assert fail.error.status == 504
    assert fail.error.code == "upstream_timeout"
    assert "30 s" in fail.error.message
    assert state.phase is Phase.DONE


def test_a_client_that_left_is_abandoned_and_a_stopping_server_fails_retryably():
    state = waiting.start(0.0, 100.0)
    _, actions = waiting.step(state, Tick(1.0, client_gone=True))
    assert _kinds(actions) == [Abandon]
    _, actions = waiting.step(state, Tick(1.0, draining=True))
    (fail,) = actions
    assert fail.error.status == 503
    assert fail.error.code == "proxy_restarting"
    assert fail.error.headers["Retry-After"] == "1"


def test_upstream_finishing_is_collected_and_an_answer_delivered():
    state = waiting.start(0.0, 100.0)
    state, actions = waiting.step(state, UpstreamDone(1.0))
    assert _kinds(actions) == [Collect]
    state, actions = waiting.step(state, Decided(1.0, ANSWER))
    assert actions == [Deliver(ANSWER)]
    assert state.phase is Phase.DONE


def test_a_missing_required_call_asks_again_while_retries_last():
    state = waiting.start(0.0, 100.0, retries=1)
    state, actions = waiting.step(state, Decided(1.0, MISSING_CALL))
    assert _kinds(actions) == [AskAgain, Wait]
    assert state.retries_left == 0
    state, actions = waiting.step(state, Decided(2.0, MISSING_CALL))
    assert actions == [Fail(MISSING_CALL.error)]


def test_a_failure_that_asking_again_cannot_mend_fails_at_once():
    failure = Failure(ProxyError(500, "upstream broke"))
    state = waiting.start(0.0, 100.0, retries=3)
    _, actions = waiting.step(state, Decided(1.0, failure))
    assert actions == [Fail(failure.error)]


TOO_LONG = Failure(ProxyError(400, "context window"), fit=Refit(1000))
STREAMING_CLIENT = waiting.start(0.0, 100.0, commit_after=0.5, beat=5.0, retries=1)
STREAMING = replace(STREAMING_CLIENT, phase=Phase.STREAMING, next_beat=5.5)
PLAIN_CLIENT = waiting.start(0.0, 100.0, retries=1)
OVER = replace(PLAIN_CLIENT, phase=Phase.DONE)
# One (state, event) for each thing that can happen to a turn; each row of the table below
# must be the one some of these take.
SITUATIONS = [
    *[(state, event) for state in (STREAMING_CLIENT, STREAMING, PLAIN_CLIENT) for event in (
        Tick(100.0), Tick(1.0, client_gone=True), Tick(1.0, draining=True), Tick(0.2),
        Tick(0.6), Tick(5.5), Arrived(0.2), UpstreamDone(1.0), Decided(1.0, ANSWER),
        Decided(1.0, TOO_LONG), Decided(1.0, MISSING_CALL),
        Decided(1.0, Failure(ProxyError(500, "upstream broke"))))],
    (replace(PLAIN_CLIENT, retries_left=0, fitted=True), Decided(1.0, TOO_LONG)),
    (replace(PLAIN_CLIENT, retries_left=0), Decided(1.0, MISSING_CALL)),
    *[(OVER, event) for event in (Tick(1.0), Arrived(1.0), UpstreamDone(1.0),
                                  Decided(1.0, ANSWER))],
]


def test_the_docstring_shows_the_table_that_step_reads():
    assert textwrap.indent(waiting.render(waiting.TABLE), "    ") in waiting.__doc__


@pytest.mark.parametrize(("state", "event"), SITUATIONS)
def test_step_does_what_its_row_of_the_table_says(state, event):
    row = waiting.row_for(state, event)
    after, actions = waiting.step(state, event)
    assert tuple(_kinds(actions)) == row.does
    assert after.phase is (row.to or state.phase)


def test_every_row_of_the_table_is_taken_by_some_situation():
    taken = {id(waiting.row_for(state, event)) for state, event in SITUATIONS}
    missed = [row for row in waiting.TABLE if id(row) not in taken]
    assert missed == []


def test_an_event_no_row_takes_is_an_error_not_a_silent_drop():
    @dataclass(frozen=True)
    class Unheard:
        now: float

    with pytest.raises(waiting.NoTransition, match="Unheard in phase waiting"):
        waiting.step(PLAIN_CLIENT, Unheard(1.0))


def test_a_finished_turn_answers_nothing_more():
    state = waiting.start(0.0, 100.0)
    state, _ = waiting.step(state, Tick(1.0, client_gone=True))
    for event in [Tick(2.0), UpstreamDone(2.0), Decided(2.0, ANSWER)]:
        assert waiting.step(state, event) == (state, [])


def test_live_text_commits_the_stream_at_once_and_flows():
    state = waiting.start(0.0, 100.0, commit_after=0.5, beat=5.0)
    state, actions = waiting.step(state, Arrived(0.1))
    assert _kinds(actions) == [Commit, Flow]
    assert state.phase is Phase.STREAMING
    state, actions = waiting.step(state, Arrived(0.2))
    assert _kinds(actions) == [Flow]


def test_heartbeats_are_sent_only_while_nothing_else_flows():
    state = waiting.start(0.0, 100.0, commit_after=0.5, beat=5.0)
    state, _ = waiting.step(state, Tick(0.5))  # committed: next beat at 5.5
    state, _ = waiting.step(state, Arrived(4.0))  # text flowed: next beat at 9.0
    state, actions = waiting.step(state, Tick(5.5))
    assert Heartbeat not in _kinds(actions)
    state, actions = waiting.step(state, Tick(9.0))
    assert _kinds(actions) == [Heartbeat, Wait]


def test_live_text_for_a_client_that_does_not_stream_waits_for_the_answer():
    state = waiting.start(0.0, 100.0, beat=1.0)
    state, actions = waiting.step(state, Arrived(0.1))
    assert actions == []
    assert state.phase is Phase.WAITING


def test_live_text_does_not_postpone_the_deadline_or_the_looks_at_the_client():
    state = waiting.start(0.0, 30.0, commit_after=0.5, beat=5.0)
    state, _ = waiting.step(state, Arrived(29.0))
    _, actions = waiting.step(state, Tick(31.0))
    assert _kinds(actions) == [Fail]
    _, actions = waiting.step(state, Tick(29.5, client_gone=True))
    assert _kinds(actions) == [Abandon]


_EVENTS = st.one_of(
    st.builds(Tick, st.floats(0, 200), st.booleans(), st.booleans()),
    st.builds(Arrived, st.floats(0, 200)),
    st.builds(UpstreamDone, st.floats(0, 200)),
    st.builds(Decided, st.floats(0, 200), st.sampled_from([ANSWER, MISSING_CALL])),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_EVENTS, max_size=30), st.booleans(), st.integers(0, 3))
def test_any_run_ends_once_commits_at_most_once_and_beats_only_while_streaming(
        events, streaming, retries):
    state = waiting.start(0.0, 150.0, commit_after=0.5 if streaming else None, beat=5.0,
                          retries=retries)
    ends = commits = asked = 0
    for event in sorted(events, key=lambda e: e.now):
        before = state.phase
        row = waiting.row_for(state, event)
        state, actions = waiting.step(state, event)
        assert tuple(_kinds(actions)) == row.does
        for action in actions:
            if isinstance(action, (Deliver, Fail, Abandon)):
                ends += 1
            if isinstance(action, Commit):
                commits += 1
                assert streaming
                assert before is Phase.WAITING
            if isinstance(action, Flow):
                assert streaming
                assert state.phase is Phase.STREAMING
            if isinstance(action, Heartbeat):
                assert before is Phase.STREAMING
            if isinstance(action, AskAgain):
                asked += 1
            if isinstance(action, Wait):
                assert 0 <= action.seconds <= CHECK_SECONDS
        if ends:
            assert state.phase is Phase.DONE
    assert ends <= 1
    assert commits <= 1
    assert asked <= retries
