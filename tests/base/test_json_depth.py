"""JSON nested deep (issue 30, item 4): a request body past the one depth limit is a 400 in
the front's envelope on every front, before anything goes upstream; a value nested deep in
the upstream's answer (past the 254 levels orjson writes) is never a 500."""

from __future__ import annotations

import json
import tempfile

import orjson
import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.base.json_depth import MAX_DEPTH, deep_path, deeper_than
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion, vllm_tool_call

USER = [{"role": "user", "content": "x"}]
RESPONSES_TOOL = {"type": "function", "name": "get_weather",
                  "parameters": TOOLS[0]["function"]["parameters"]}
MESSAGES_TOOL = {"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}
# Each front's path, a valid body, and its errors' envelope.
FRONTS = {
    "chat": ("/v1/chat/completions", {"model": "m", "messages": USER, "tools": TOOLS},
             "openai"),
    "responses": ("/v1/responses", {"model": "m", "input": "x", "tools": [RESPONSES_TOOL]},
                  "openai"),
    "messages": ("/v1/messages", {"model": "m", "max_tokens": 5, "messages": USER,
                                  "tools": [MESSAGES_TOOL]}, "anthropic"),
    "count_tokens": ("/v1/messages/count_tokens", {"model": "m", "messages": USER},
                     "anthropic"),
    "ollama": ("/api/chat", {"model": "m", "messages": USER, "tools": TOOLS}, "ollama"),
}


def nested(levels: int) -> object:
    """An array holding an array … `levels` arrays in all."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def reference_depth(value: object) -> int:
    """Arrays and objects inside one another, counted by walking the value."""
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference_depth(v) for v in value), default=0)
    return 0


# --- the scan ------------------------------------------------------------------------------

TRICKY_TEXT = st.text(alphabet='[]{}"\\ax\n\u00e9', max_size=8)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), 1 << 63) | TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY_TEXT, inner, max_size=3),
    max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES, st.integers(0, 12), st.booleans())
def test_the_scan_agrees_with_walking_the_value(value, limit, indent):
    raw = (json.dumps(value, indent=1, ensure_ascii=False).encode() if indent
           else orjson.dumps(value))
    assert deeper_than(raw, limit) == (reference_depth(value) > limit)


@pytest.mark.parametrize("levels", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 300, 1100])
def test_the_limit_is_exact(levels):
    raw = orjson.dumps({"a": nested(levels - 1)}) if levels <= 254 else (
        b'{"a":' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}")
    assert deeper_than(raw) == (levels > MAX_DEPTH)


def test_brackets_inside_strings_and_escapes_do_not_count():
    text = '"\\"[[[' + "[" * 500 + '{\\\\'
    raw = orjson.dumps({"a": text, "b": ["]" * 300, "x\\\"{" * 200]})
    assert not deeper_than(raw)
    assert deeper_than(orjson.dumps({"a": text, "b": nested(MAX_DEPTH)}))


def test_the_path_names_where_the_value_is_too_deep():
    body = {"model": "m", "tools": [{"function": {"parameters": nested(MAX_DEPTH)}}]}
    assert deep_path(body) == "tools[0].function.parameters…"
    assert deep_path({"a": {"b": nested(MAX_DEPTH - 2)}}) == ""
    assert deep_path({"a": {"b": nested(MAX_DEPTH - 1)}}) == "a.b[0][0]…"
    assert deep_path({"a": [{}], "b": {"c": nested(MAX_DEPTH)}}) == "b.c[0][0]…"


# --- requests through the real server --------------------------------------------------------

@pytest.fixture
def kept_proxy(start_proxy):
    with tempfile.TemporaryDirectory() as folder:
        yield start_proxy(responses_store_path=f"{folder}/r.db")


def _deep_body(body: dict, levels: int) -> bytes:
    """`body` with a field holding arrays `levels` deep in all (the body's own level too)."""
    inner = levels - 1
    return orjson.dumps({**body, "x_deep": "HERE"}).replace(
        b'"HERE"', b"[" * inner + b"]" * inner)


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 300, 1100])
def test_a_body_nested_too_deep_is_a_400_in_the_fronts_envelope(fake, kept_proxy, front,
                                                                levels):
    path, body, envelope = FRONTS[front]
    response = requests.post(kept_proxy.url + path, data=_deep_body(body, levels),
                             headers={"Content-Type": "application/json"}, timeout=20)
    assert response.status_code == 400
    error = response.json()
    if envelope == "ollama":
        assert f"more than {MAX_DEPTH} levels deep" in error["error"]
        assert fake.received == []
        return
    if envelope == "anthropic":
        assert error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
    else:
        assert error["error"]["code"] == "json_too_deep"
        if levels < 1024:  # past what the parser reads, where is not known
            assert error["error"]["param"] == "x_deep[0][0][0]"
    assert f"more than {MAX_DEPTH} levels deep" in error["error"]["message"]
    assert fake.received == []


@pytest.mark.parametrize("front", ["chat", "responses", "messages", "ollama"])
def test_a_body_at_the_limit_is_served(fake, kept_proxy, front):
    path, body, _ = FRONTS[front]
    fake.answer(Answer(body=vllm_completion("fine")))
    response = requests.post(kept_proxy.url + path, data=_deep_body(body, MAX_DEPTH),
                             headers={"Content-Type": "application/json"}, timeout=20)
    assert response.status_code == 200, response.text
    assert len(fake.chat_requests()) == 1


# --- deep values in the upstream's answer ----------------------------------------------------

def _deep_arguments_answer(received) -> Answer:
    """A call whose arguments come as an object nested 300 deep (past what orjson writes),
    buffered or streamed as the request asks."""
    deep = b"[" * 300 + b"]" * 300
    if not received.json.get("stream"):
        completion = vllm_completion(tool_calls=[vllm_tool_call("get_weather", "{}")],
                                     finish_reason="tool_calls")
        return Answer(body=orjson.dumps(completion).replace(
            b'"arguments":"{}"', b'"arguments":{"city":' + deep + b"}"))
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "DEEP"}}}
    chunks = [{"role": "assistant", "content": ""}, {"tool_calls": [call]}]
    events = [b"data: " + orjson.dumps({**head, "choices": [
        {"index": 0, "delta": delta, "finish_reason": None}]}).replace(b'"DEEP"', deep) + b"\n\n"
        for delta in chunks]
    events.append(b"data: " + orjson.dumps({**head, "choices": [
        {"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}) + b"\n\n")
    return Answer(chunks=[*events, b"data: [DONE]\n\n"])


# What a delivered call looks like on each front's wire.
CALL_MARK = {"chat": b'"tool_calls"', "responses": b'"type":"function_call"',
             "messages": b'"type":"tool_use"', "ollama": b'"tool_calls"'}


@pytest.mark.parametrize("mode", ["buffer", "stream"])
@pytest.mark.parametrize("front", ["chat", "responses", "messages", "ollama"])
@pytest.mark.parametrize("stream", [False, True])
def test_arguments_nested_past_the_writer_are_refused_not_a_500(fake, start_proxy, mode,
                                                                 front, stream):
    proxy = start_proxy(stream_mode=mode)
    fake.answer(_deep_arguments_answer)
    path, body, _ = FRONTS[front]
    response = requests.post(proxy.url + path, json={**body, "stream": stream}, timeout=20)
    # The one call cannot be written: it is left out, and the answer left empty is an answer
    # (200), never a 500 (nor a 502 that clients would retry).
    assert response.status_code == 200, response.text
    assert CALL_MARK[front] not in response.content
    assert b"internal_error" not in response.content


def test_deep_arguments_beside_a_good_call_leave_the_good_one(fake, proxy):
    deep = "[" * 300 + "]" * 300
    completion = vllm_completion(tool_calls=[vllm_tool_call("get_weather", "{}"),
                                             vllm_tool_call("read", '{"path": "a"}')],
                                 finish_reason="tool_calls")
    fake.answer(Answer(body=orjson.dumps(completion).replace(
        b'"arguments":"{}"', b'"arguments":{"city":' + deep.encode() + b"}")))
    answer = proxy.client().chat.completions.create(model="m", messages=USER, tools=TOOLS)
    calls = answer.choices[0].message.tool_calls
    assert [(c.function.name, c.function.arguments) for c in calls] == [("read", '{"path": "a"}')]


@pytest.mark.parametrize("arguments", [
    "{'city': " + "[" * 300 + "]" * 300 + "}",  # repaired (Python quotes)
    json.dumps('{"city": ' + "[" * 300 + "]" * 300 + "}"),  # double-encoded
])
def test_arguments_that_decode_past_the_writer_are_refused_not_a_500(fake, proxy, arguments):
    fake.answer(Answer(body=vllm_completion(
        tool_calls=[vllm_tool_call("get_weather", arguments)], finish_reason="tool_calls")))
    response = requests.post(proxy.url + "/v1/chat/completions",
                             json={"model": "m", "messages": USER, "tools": TOOLS}, timeout=20)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"].get("tool_calls") is None
    assert response.json()["choices"][0]["finish_reason"] == "stop"


def test_deep_log_probabilities_are_dropped_not_a_500(fake, proxy):
    completion = vllm_completion("hi")
    completion["choices"][0]["logprobs"] = {"content": [
        {"token": "hi", "logprob": -0.5, "bytes": "DEEP", "top_logprobs": []}]}
    fake.answer(Answer(body=orjson.dumps(completion).replace(
        b'"DEEP"', b"[" * 300 + b"]" * 300)))
    response = requests.post(proxy.url + "/v1/chat/completions", json={
        "model": "m", "messages": USER, "tools": TOOLS, "logprobs": True}, timeout=20)
    assert response.status_code == 200
    token = response.json()["choices"][0]["logprobs"]["content"][0]
    assert (token["token"], token["logprob"], token["bytes"]) == ("hi", -0.5, None)


def test_an_upstream_error_nested_deep_keeps_its_status(fake, proxy):
    deep = b"[" * 1000 + b"]" * 1000
    fake.answer(Answer(status=422, body=b'{"error": {"message": ' + deep + b', "code": '
                       + deep + b"}}"))
    response = requests.post(proxy.url + "/v1/chat/completions",
                             json={"model": "m", "messages": USER, "tools": TOOLS}, timeout=20)
    assert response.status_code == 422
    assert response.json()["error"]["message"].startswith(
        'upstream answered HTTP 422: {"error": {"message": [[[')


def test_a_streamed_error_event_nested_deep_keeps_its_status(fake, start_proxy):
    proxy = start_proxy(stream_mode="stream")
    deep = b"[" * 300 + b"]" * 300
    fake.answer(Answer(chunks=[b'data: {"error": {"message": "busy", "code": 503, "x": '
                               + deep + b"}}\n\n"]))
    response = requests.post(proxy.url + "/v1/chat/completions", json={
        "model": "m", "messages": USER, "tools": TOOLS, "stream": True}, timeout=20)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "upstream_http_503"


def test_logged_bodies_too_deep_to_write_leave_the_line_written(fake, start_proxy,
                                                                log_lines):
    proxy = start_proxy(log_bodies=True, log_format="json", log_level="info")
    completion = vllm_completion("hi")
    completion["choices"][0]["message"]["extra"] = "DEEP"
    fake.answer(Answer(body=orjson.dumps(completion).replace(
        b'"DEEP"', b"[" * 300 + b"]" * 300)))
    response = requests.post(proxy.url + "/v1/chat/completions",
                             json={"model": "m", "messages": USER, "tools": TOOLS}, timeout=20)
    assert response.status_code == 200
    line = log_lines(1)[-1]
    assert line["status"] == 200
    assert line["bodies"].startswith("not logged: nested deeper")


@pytest.mark.parametrize("levels", [300, 1100])
def test_a_deep_body_to_a_relayed_path_is_relayed_as_written(fake, start_proxy, levels):
    # Two upstreams: the relay reads the body's model to route it (nothing is written back).
    proxy = start_proxy(models={"other*": {"upstream": "http://127.0.0.1:9"}})
    fake.answer(Answer(body={"id": "cmpl-1", "object": "text_completion", "choices": []}))
    raw = _deep_body({"model": "m", "prompt": "x"}, levels)
    response = requests.post(proxy.url + "/v1/completions", data=raw, timeout=20,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    assert [r.raw for r in fake.received if r.path == "/v1/completions"] == [raw]
