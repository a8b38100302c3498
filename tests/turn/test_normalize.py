"""Normalisation: an allowlist of OpenAI's schema, honest finish_reason, arguments as strings."""

from __future__ import annotations

import json

import orjson
import pytest

from proxy.base.config import Config
from proxy.fronts import chat
from proxy.turn.normalize import (
    ExtractionSettings,
    UpstreamShapeError,
    normalize,
)
from proxy.turn.plan import plan_chat
from tests.fake_vllm import vllm_completion, vllm_tool_call

SETTINGS = ExtractionSettings(tools={"read": {}, "get_weather": {}})
MESSAGE_KEYS = {"role", "content", "reasoning_content", "refusal", "tool_calls"}


def normalize_completion(upstream, settings):
    """The turn's result as the chat front renders it (the allowlist a client sees), and
    what was repaired and refused."""
    result = normalize(upstream, settings)
    return chat.completion_of(result), result.outcome


def _normalize(upstream, settings=SETTINGS):
    completion, outcome = normalize_completion(upstream, settings)
    return completion, completion["choices"][0], outcome


def test_vendor_fields_are_left_out():
    upstream = vllm_completion("plain answer", reasoning="thinking")
    upstream["some_future_field"] = {"x": 1}
    upstream["choices"][0]["message"]["vendor_thing"] = 1
    completion, choice, _ = _normalize(upstream)
    assert set(completion) == {"id", "object", "created", "model", "choices", "usage"}
    assert set(choice) == {"index", "message", "logprobs", "finish_reason"}
    assert set(choice["message"]) <= MESSAGE_KEYS
    assert choice["message"] == {"role": "assistant", "content": "plain answer",
                                 "reasoning_content": "thinking"}
    assert completion["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


@pytest.mark.parametrize(("field", "expected"), [
    ("reasoning_content", {"reasoning_content": "r"}), ("reasoning", {"reasoning": "r"}),
    ("both", {"reasoning_content": "r", "reasoning": "r"}), ("drop", {})])
def test_reasoning_field_setting(field, expected):
    """The core's result holds the reasoning (or none: not shown); the names the chat wire
    gives it are the chat front's (`reasoning_field`)."""
    settings = ExtractionSettings(tools={}, reasoning_shown=field != "drop")
    result = normalize(vllm_completion("a", reasoning="r"), settings)
    assert result.first.reasoning == (None if field == "drop" else "r")
    plan = plan_chat(orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                   "tools": [{"type": "function", "function": {"name": "f"}}]}),
                     Config(reasoning_field=field))
    message = orjson.loads(chat.render_json(plan, result))["choices"][0]["message"]
    assert {k: v for k, v in message.items() if k.startswith("reasoning")} == expected
    assert list(message)[:2] == ["role", "content"]  # the reasoning in its place, after them


@pytest.mark.parametrize(("finish", "expected"), [
    ("stop", "tool_calls"), ("tool_calls", "tool_calls"), ("length", "tool_calls"),
    (None, "tool_calls")])
def test_finish_reason_is_tool_calls_whenever_calls_are_present(finish, expected):
    upstream = vllm_completion(None, tool_calls=[vllm_tool_call("read", '{"path": "a"}')],
                               finish_reason=finish)
    _, choice, outcome = _normalize(upstream)
    assert choice["finish_reason"] == expected
    assert outcome.finish_before == [finish]
    assert outcome.finish_after == [expected]


@pytest.mark.parametrize(("finish", "expected"), [
    ("tool_calls", "stop"), ("stop", "stop"), ("length", "length"),
    ("content_filter", "content_filter")])
def test_finish_reason_is_never_tool_calls_without_calls(finish, expected):
    _, choice, _ = _normalize(vllm_completion("text only", finish_reason=finish))
    assert choice["finish_reason"] == expected
    assert "tool_calls" not in choice["message"]


@pytest.mark.parametrize(("raw", "expected", "repair"), [
    ('{"path": "a"}', '{"path": "a"}', None),
    ({"path": "a"}, '{"path":"a"}', "arguments_as_object"),
    ('"{\\"path\\": \\"a\\"}"', '{"path":"a"}', "double_encoded_arguments"),
    ("", "{}", "empty_arguments"),
    ('{"path": "a",}', '{"path":"a"}', "invalid_json_arguments"),
])
def test_native_arguments_become_json_object_strings(raw, expected, repair):
    call = vllm_tool_call("read", "")
    call["function"]["arguments"] = raw
    _, choice, outcome = _normalize(vllm_completion(None, tool_calls=[call]))
    arguments = choice["message"]["tool_calls"][0]["function"]["arguments"]
    assert arguments == expected
    assert isinstance(json.loads(arguments), dict)
    assert [r.repair for r in outcome.repairs] == ([repair] if repair else [])


def test_native_call_cut_by_length_is_dropped():
    upstream = vllm_completion(None, tool_calls=[vllm_tool_call("read", '{"path": "/a/b')],
                               finish_reason="length")
    _, choice, outcome = _normalize(upstream)
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "length"
    assert [(t.reason, t.tool) for t in outcome.left_as_text] == [("cut_by_length", "read")]


def test_text_calls_get_minted_ids_unique_in_last_nine():
    calls = "\n".join(f'<tool_call>{{"name": "read", "arguments": {{"path": "{i}"}}}}</tool_call>'
                      for i in range(50))
    _, choice, outcome = _normalize(vllm_completion(calls))
    ids = [c["id"] for c in choice["message"]["tool_calls"]]
    assert len(ids) == 50 == outcome.tool_calls
    assert all(i.startswith("call_") and len(i) == 29 and i[5:].isalnum() for i in ids)
    assert len({i[-9:] for i in ids}) == 50
    assert outcome.formats == ["hermes"]


def test_content_is_byte_identical_when_nothing_is_extracted():
    text = 'Use {"name": "read", "arguments": {}} like this, then stop.\n  '
    _, choice, _ = _normalize(vllm_completion(text))
    assert choice["message"]["content"] == text


def test_every_choice_is_normalised():
    upstream = vllm_completion('<tool_call>{"name": "read", "arguments": {}}</tool_call>',
                               choices=2)
    completion, _, outcome = _normalize(upstream)
    assert [c["index"] for c in completion["choices"]] == [0, 1]
    assert outcome.tool_calls == 2
    assert all(c["finish_reason"] == "tool_calls" for c in completion["choices"])


@pytest.mark.parametrize("upstream", [
    [], {"choices": []}, {"object": "error"}, {"choices": [{"message": None}]},
    {"choices": ["x"]}])
def test_wrong_shapes_are_refused(upstream):
    with pytest.raises(UpstreamShapeError):
        normalize_completion(upstream, SETTINGS)


@pytest.mark.parametrize(("content", "finish"), [
    (None, "stop"), ("", "stop"), (None, "tool_calls"), ("", None)])
def test_an_answer_upstream_left_empty_is_an_answer(content, finish):
    upstream = vllm_completion(content, finish_reason=finish)
    completion, outcome = normalize_completion(upstream, SETTINGS)
    (choice,) = completion["choices"]
    assert choice["message"]["content"] == content
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
    assert outcome.left_as_text == []


def test_an_answer_of_only_calls_left_out_is_an_empty_answer_not_an_error():
    # Upstream parsed a call, nothing the client could use: arguments beyond repair. The
    # turn ends (a 200), never an error a client retries (issue 26, item 6).
    upstream = vllm_completion(None, tool_calls=[vllm_tool_call("read", '{"path": "/a", "n": ')])
    completion, outcome = normalize_completion(upstream, SETTINGS)
    (choice,) = completion["choices"]
    assert (choice["message"]["content"], choice["finish_reason"]) == (None, "stop")
    assert "tool_calls" not in choice["message"]
    assert [(t.reason, t.tool) for t in outcome.left_as_text] == [
        ("arguments_not_object", "read")]


def test_reasoning_alone_is_an_answer_and_dropped_reasoning_leaves_an_empty_one():
    upstream = vllm_completion(None, reasoning="r")
    assert normalize_completion(upstream, SETTINGS)[0]["choices"][0]["message"][
        "reasoning_content"] == "r"
    completion, _ = normalize_completion(upstream, ExtractionSettings(
        tools={"read": {}}, reasoning_shown=False))
    assert completion["choices"][0]["message"] == {"role": "assistant", "content": None}
    assert completion["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("upstream", [
    vllm_completion(None, finish_reason="length"),
    vllm_completion(None, reasoning="still thinking", finish_reason="length"),
    vllm_completion(None, tool_calls=[vllm_tool_call("read", '{"path": "/a", "n": ')],
                    finish_reason="length"),
])
def test_an_answer_cut_by_length_stays_cut_however_empty(upstream):
    completion, _ = normalize_completion(upstream, ExtractionSettings(
        tools={"read": {}}, reasoning_shown=False))
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "length"
    assert "tool_calls" not in choice["message"]


def test_null_arguments_of_a_parsed_call_are_an_empty_object():
    upstream = vllm_completion(None, tool_calls=[vllm_tool_call("read", "null")])
    _, choice, outcome = _normalize(upstream)
    assert choice["message"]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert choice["finish_reason"] == "tool_calls"
    assert [(r.repair, r.tool) for r in outcome.repairs] == [("empty_arguments", "read")]


def test_parsed_calls_are_checked_against_the_tools_and_the_named_choice():
    upstream = vllm_completion("Running both.", tool_calls=[
        vllm_tool_call("rm_rf", '{"path": "/"}'), vllm_tool_call("read", '{"path": "/a"}')])
    strict = ExtractionSettings(tools=SETTINGS.tools, deliver_unknown=False)
    completion, outcome = normalize_completion(upstream, strict)
    choice = completion["choices"][0]
    assert [c["function"]["name"] for c in choice["message"]["tool_calls"]] == ["read"]
    assert [(t.format, t.reason, t.tool) for t in outcome.left_as_text] == [
        ("native", "unknown_tool", "rm_rf")]
    only = ExtractionSettings(tools={"read": {}, "get_weather": {}}, only="get_weather")
    completion, outcome = normalize_completion(upstream, only)
    assert "tool_calls" not in completion["choices"][0]["message"]
    assert completion["choices"][0]["finish_reason"] == "stop"
    assert {t.reason for t in outcome.left_as_text} == {"unknown_tool", "not_the_chosen_tool"}
    # Nothing left at all: an empty turn (a 200), never an error.
    completion, _ = normalize_completion(vllm_completion(None, tool_calls=[
        vllm_tool_call("rm_rf", "{}")]), strict)
    assert completion["choices"][0]["finish_reason"] == "stop"


def test_a_parsed_call_to_a_name_no_tool_has_is_delivered_as_written():
    # Issue 26, item 6: as the engine's own parser delivers it; the agent answers "no such
    # tool" and the model corrects itself. Logged as `unknown_tool`.
    upstream = vllm_completion(None, tool_calls=[vllm_tool_call("rm_rf", '{"path": "/"}')])
    _, choice, outcome = _normalize(upstream)
    assert [(c["function"]["name"], c["function"]["arguments"])
            for c in choice["message"]["tool_calls"]] == [("rm_rf", '{"path": "/"}')]
    assert choice["finish_reason"] == "tool_calls"
    assert [(r.format, r.repair, r.tool) for r in outcome.repairs] == [
        ("native", "unknown_tool", "rm_rf")]
    assert outcome.left_as_text == []


@pytest.mark.parametrize(("written", "offered"), [
    ("Bash", "bash"), ("get-weather", "get_weather"), ("functions.read", "read"),
    ("Get Weather", "get_weather"), ("READ_FILE", "read-file")])
def test_a_parsed_call_named_a_little_off_one_tool_is_that_tools(written, offered):
    settings = ExtractionSettings(tools={offered: {}, "other": {}}, deliver_unknown=False)
    upstream = vllm_completion(None, tool_calls=[vllm_tool_call(written, "{}")])
    completion, outcome = normalize_completion(upstream, settings)
    calls = completion["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == [offered]
    assert [(r.repair, r.tool) for r in outcome.repairs] == [("tool_name_matched", offered)]


def test_a_name_matching_two_tools_once_folded_is_not_repaired():
    settings = ExtractionSettings(tools={"read_file": {}, "readfile": {}}, deliver_unknown=False)
    upstream = vllm_completion(None, tool_calls=[vllm_tool_call("ReadFile", "{}")])
    completion, outcome = normalize_completion(upstream, settings)
    assert "tool_calls" not in completion["choices"][0]["message"]
    assert [(t.reason, t.tool) for t in outcome.left_as_text] == [("unknown_tool", "ReadFile")]


def test_logprobs_keep_openai_fields_only_and_reach_the_stream_once():
    from proxy.fronts.chat import StreamIdentity, completion_chunks

    upstream = vllm_completion("Hi")
    token = {"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "token_id": 9,
             "top_logprobs": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105],
                               "token_id": 9}]}
    upstream["choices"][0]["logprobs"] = {"content": [token], "vendor": 1}
    result = normalize(upstream, SETTINGS)
    choice = chat.completion_of(result)["choices"][0]
    assert choice["logprobs"] == {"content": [{
        "token": "Hi", "logprob": -0.1, "bytes": [72, 105],
        "top_logprobs": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105]}]}],
        "refusal": None}
    raw = b"".join(completion_chunks(StreamIdentity("c", 1, "m"), result, False))
    chunks = [json.loads(line[6:]) for line in raw.split(b"\n\n") if line.startswith(b"data: {")]
    carried = [c["choices"][0]["logprobs"] for c in chunks if c["choices"][0]["logprobs"]]
    assert carried == [choice["logprobs"]]


def test_parsed_arguments_keep_big_integers_exact_on_every_path():
    big = "123456789012345678901234567890"
    for raw in (f'{{"n": {big}}}', f'{{"n": {big},}}', json.dumps(f'{{"n": {big}}}')):
        upstream = vllm_completion(None, tool_calls=[vllm_tool_call("read", raw)])
        _, choice, _ = _normalize(upstream)
        arguments = choice["message"]["tool_calls"][0]["function"]["arguments"]
        assert json.loads(arguments) == {"n": int(big)}, raw


def test_a_count_that_is_not_an_integer_is_no_count():
    upstream = vllm_completion("a")
    upstream["usage"] = {"prompt_tokens": 3, "completion_tokens": False, "total_tokens": "4",
                         "prompt_tokens_details": {"cached_tokens": True, "audio_tokens": 1},
                         "completion_tokens_details": {"reasoning_tokens": 2.0}}
    usage = normalize(upstream, SETTINGS).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (3, None, None)
    assert (dict(usage.prompt_details), dict(usage.completion_details)) == (
        {"audio_tokens": 1}, {})
    assert (usage.cached_tokens, usage.reasoning_tokens) == (0, 0)
    completion, _ = normalize_completion(upstream, SETTINGS)
    assert completion["usage"] == {"prompt_tokens": 3,
                                   "prompt_tokens_details": {"audio_tokens": 1}}


def test_parallel_tool_calls_false_leaves_the_full_result_as_it_was():
    from proxy.turn.result import first_calls_only

    calls = [vllm_tool_call("read", '{"path": "/a"}'), vllm_tool_call("read", '{"path": "/b"}')]
    result = normalize(vllm_completion(None, tool_calls=calls), SETTINGS)
    kept, dropped = first_calls_only(result)
    assert dropped == 1
    assert [len(r.first.calls) for r in (result, kept)] == [2, 1]
    assert [r.outcome.tool_calls for r in (result, kept)] == [2, 1]
    assert kept.outcome.call_formats == ["native"]
    assert first_calls_only(kept) == (kept, 0)


def test_an_answer_without_an_id_gets_one_from_the_chat_front():
    upstream = vllm_completion("a")
    upstream["id"], upstream["created"] = 7, True
    result = normalize(upstream, SETTINGS)
    assert (result.id, result.created) == (None, None)  # the core invents nothing
    completion = chat.completion_of(result)
    assert completion["id"].startswith("chatcmpl-")
    assert len(completion["id"]) == 33
    assert isinstance(completion["created"], int)
    assert completion["created"] > 1_700_000_000
    upstream["id"], upstream["created"] = "chatcmpl-up", 5
    assert [chat.completion_of(normalize(upstream, SETTINGS))[k] for k in ("id", "created")] == [
        "chatcmpl-up", 5]


@pytest.mark.parametrize("raw", ['{"limit": "5", "path": "a"}',
                                 '{"limit": "5", "path": "a", "n": 123456789012345678901234}'])
def test_a_parsed_calls_arguments_are_checked_against_its_schema_as_read(raw):
    schema = {"type": "object", "properties": {
        "path": {"type": "string"}, "limit": {"type": "integer"}, "n": {"type": "integer"}}}
    settings = ExtractionSettings(tools={"read": schema})
    upstream = vllm_completion(None, tool_calls=[vllm_tool_call("read", raw)])
    result = normalize(upstream, settings)
    (call,) = result.choices[0].calls
    assert json.loads(call.arguments) == {**json.loads(raw), "limit": 5}  # big ints exact
    assert [r.repair for r in result.outcome.repairs] == ["schema_coerced"]
    assert result.outcome.schema_invalid == []

