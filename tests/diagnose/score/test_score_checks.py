"""The score's checks, pure: an answer as its client read it, judged against its suite turn."""

from __future__ import annotations

import orjson
import pytest

from proxy.diagnose.score.checks import (
    CHECKS,
    RIGHT,
    markup_in,
    same_value,
    schema_valid,
    verdicts,
)
from proxy.diagnose.score.reading import Call, Reading, read_completion, read_stream
from proxy.diagnose.score.suite import SUITE

TURNS = {turn.id: turn for turn in SUITE}
WEATHER = TURNS["weather-city"]
TWO = TURNS["two-cities"]
NO_CALL = TURNS["no-call-thanks"]
NAMED = TURNS["named-weather"]
OFFERED = ("get_weather", "set_timer", "set_thermostat")


def _answer(*calls: tuple[str, object], content: str = "", finish: str | None = None
            ) -> Reading:
    made = tuple(Call(name, a if isinstance(a, str) else orjson.dumps(a).decode())
                 for name, a in calls)
    return Reading(200, None, content, "", made,
                   finish or ("tool_calls" if made else "stop"))


def test_the_right_call_passes_every_check():
    got = verdicts(WEATHER, _answer(("get_weather", {"city": "Paris"})))
    assert got == {**dict.fromkeys(CHECKS, True), RIGHT: True}


def test_a_call_of_another_tool_is_the_wrong_tool_and_an_invented_call():
    got = verdicts(WEATHER, _answer(("get_time", {"timezone": "UTC"})))
    assert got["tool"] is False
    assert got["no_invented"] is False
    assert got[RIGHT] is False
    assert got["schema"] is False  # get_time is not offered


def test_fixed_arguments_must_come_as_the_prompt_gives_them():
    assert verdicts(WEATHER, _answer(("get_weather", {"city": "Lyon"})))["fixed"] is False
    assert verdicts(WEATHER, _answer(("get_weather", {"city": " Paris "})))["fixed"] is True
    extra = verdicts(WEATHER, _answer(("get_weather", {"city": "Paris", "unit": "celsius"})))
    assert extra["fixed"] is True
    assert extra[RIGHT] is True


def test_arguments_that_do_not_fit_the_schema_fail_it_as_sent():
    assert not schema_valid(Call("get_weather", '{"unit": "celsius"}'), OFFERED)  # city required
    assert not schema_valid(Call("get_weather", '{"city": "Paris", "unit": "kelvin"}'), OFFERED)
    assert not schema_valid(Call("set_timer", '{"minutes": "25"}'), OFFERED)  # coercible, not valid
    assert not schema_valid(Call("get_weather", '{"city": "Par'), OFFERED)  # not JSON
    assert not schema_valid(Call("get_weather", '["Paris"]'), OFFERED)  # not an object
    assert not schema_valid(Call("set_thermostat", '{"mode": "heat", "temperature": 21, '
                                                   '"fan": true}'), OFFERED)  # a closed object
    assert schema_valid(Call("set_timer", '{"minutes": 25}'), OFFERED)
    assert not schema_valid(Call("set_timer", '{"minutes": 25}'), ("get_weather",))


def test_two_calls_expected_need_two_calls_in_any_order():
    both = _answer(("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Paris"}))
    assert verdicts(TWO, both)[RIGHT] is True
    one = verdicts(TWO, _answer(("get_weather", {"city": "Paris"})))
    assert one["tool"] is False
    assert one["fixed"] is False
    assert one["no_invented"] is True
    same_twice = _answer(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Paris"}))
    assert verdicts(TWO, same_twice)["fixed"] is False
    three = _answer(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"}),
                    ("get_weather", {"city": "Oslo"}))
    assert verdicts(TWO, three)["no_invented"] is False


def test_a_turn_that_must_not_call_fails_on_any_call_and_skips_the_call_checks():
    prose = verdicts(NO_CALL, _answer(content="You are welcome."))
    assert prose["tool"] is None
    assert prose["schema"] is None
    assert prose["fixed"] is None
    assert prose[RIGHT] is True
    called = verdicts(NO_CALL, _answer(("get_weather", {"city": "Paris"})))
    assert called["no_invented"] is False
    assert called[RIGHT] is False


def test_markup_left_in_the_content_is_found():
    for text in ('<tool_call>\n{"name": "get_weather"}\n</tool_call>', "[TOOL_CALLS][{...}]",
                 "Done.<|im_end|>", "<think>hmm</think>The answer.", "<|python_tag|>x()",
                 "<｜tool▁calls▁begin｜>", "<function=get_weather>"):
        assert markup_in(text) is not None, text
    got = verdicts(WEATHER, _answer(("get_weather", {"city": "Paris"}),
                                    content="<tool_call>"))
    assert got["clean"] is False
    assert got[RIGHT] is False


def test_prose_code_and_examples_are_no_markup():
    for text in ("3 < 4 and 5 > 2", "Use `a | b` in a shell.", "Call: get_weather; done.",
                 '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
                 "The result is [1, 2] | {x}", "<b>bold</b> and <br>"):
        assert markup_in(text) is None, text


def test_the_finish_reason_says_calls_when_there_are_calls():
    call = ("get_weather", {"city": "Paris"})
    assert verdicts(WEATHER, _answer(call, finish="stop"))["finish"] is False
    assert verdicts(WEATHER, _answer(call, finish="length"))["finish"] is False
    assert verdicts(NO_CALL, _answer(content="Bye.", finish="tool_calls"))["finish"] is False
    assert verdicts(NO_CALL, _answer(content="Bye.", finish="length"))["finish"] is False
    # a named tool_choice is answered "stop" by OpenAI itself: a client copes with both
    named = ("get_weather", {"city": "Cairo"})
    assert verdicts(NAMED, _answer(named, finish="stop"))["finish"] is True
    assert verdicts(NAMED, _answer(named, finish="tool_calls"))["finish"] is True


@pytest.mark.parametrize("reading", [Reading(400, "bad request"), Reading(None, "refused"),
                                     Reading(200, "an error inside the stream")])
def test_an_answer_that_did_not_come_fails_every_check_that_applies(reading):
    assert set(verdicts(WEATHER, reading).values()) == {False}
    no_call = verdicts(NO_CALL, reading)
    assert no_call["tool"] is None
    assert no_call["answered"] is False
    assert not no_call[RIGHT]


def test_values_compare_by_value():
    assert same_value(3.0, 3)
    assert same_value(3, 3.0)
    assert not same_value(1, True)
    assert not same_value(True, 1)
    assert not same_value("3", 3)
    assert same_value({"a": [1, {"b": "x"}], "extra": 1}, {"a": [1, {"b": "x "}]})
    assert not same_value(["a", "b"], ["b", "a"])
    assert not same_value(["a"], ["a", "b"])


COMPLETION = {"id": "c", "object": "chat.completion", "choices": [{
    "index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "reasoning_content": "Let me see.",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]}}]}


def _sse(*events: object, done: bool = True) -> bytes:
    body = b": keep-alive\n\n" + b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)
    return body + (b"data: [DONE]\n\n" if done else b"")


CHUNKS = [
    {"id": "c", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"role": "assistant", "reasoning_content": "Let me see."}}]},
    {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {
        "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": '}}]}}]},
    {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {
        "tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
        "finish_reason": "tool_calls"}]},
]


def test_a_stream_reads_as_the_completion_it_adds_up_to():
    whole = read_completion(200, orjson.dumps(COMPLETION))
    streamed = read_stream(200, _sse(*CHUNKS))
    assert whole.calls == (Call("get_weather", '{"city": "Paris"}'),)
    assert whole.reasoning == "Let me see."
    assert whole.finish == "tool_calls"
    assert streamed.same_answer(whole)
    assert whole.same_answer(streamed)
    assert streamed.reasoning == "Let me see."


def test_a_stream_that_does_not_end_or_carries_an_error_is_no_answer():
    assert read_stream(200, _sse(*CHUNKS, done=False)).error is not None
    failed = read_stream(200, _sse(CHUNKS[0], {"error": {"message": "upstream went away"}}))
    assert failed.error == "upstream went away"
    assert not failed.answered
    assert read_stream(200, b"data: {not json\n\n").error is not None


def test_errors_are_read_from_each_envelope():
    assert read_completion(400, b'{"error": {"message": "no"}}').error == "no"
    assert read_completion(400, b'{"detail": "Not Found"}').error == "Not Found"
    assert read_completion(502, b"Bad Gateway").error == "the answer is not JSON"
    assert read_completion(200, b'{"choices": []}').error is not None


def test_answers_that_differ_are_told_apart():
    whole = read_completion(200, orjson.dumps(COMPLETION))
    other = Reading(200, None, "", "", (Call("get_weather", '{"city":"Lyon"}'),), "tool_calls")
    spaced = Reading(200, None, "", "", (Call("get_weather", '{ "city" : "Paris" }'),),
                     "tool_calls")
    assert not whole.same_answer(other)
    assert whole.same_answer(spaced)  # arguments compare as data
    assert Reading(400, "x").same_answer(Reading(400, "y"))
    assert not Reading(400, "x").same_answer(whole)
