"""The spine end to end: the OpenAI SDK → the proxy (real HTTP) → a fake vLLM (real HTTP)."""

from __future__ import annotations

import json
import socket
import time

import openai
import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion, vllm_error, vllm_stream_chunks, vllm_tool_call

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "What's the weather in Oslo?"}]
HERMES_TWO = (
    "Let me check both.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call>\n'
    '<tool_call>\n{"name": "read", "arguments": {"path": "/etc/hosts"}}\n</tool_call>'
)
OPENAI_CHUNK_KEYS = {"id", "object", "created", "model", "choices", "usage",
                     "system_fingerprint", "service_tier"}


def _assemble(stream):
    """Content, tool calls and finish_reason as a client assembles them from deltas."""
    content, calls, finish, usage, ids = "", {}, None, None, set()
    for chunk in stream:
        ids.add((chunk.id, chunk.created, chunk.model))
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            for call in delta.tool_calls or ():
                slot = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = call.id or slot["id"]
                if call.function:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
            finish = choice.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish, usage, ids


def test_streamed_hermes_calls_arrive_intact(fake, client):
    fake.answer(Answer(body=vllm_completion(HERMES_TWO)))
    stream = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS,
                                            stream=True)
    content, calls, finish, usage, ids = _assemble(stream)
    assert content == "Let me check both."
    assert [c["name"] for c in calls] == ["get_weather", "read"]
    assert json.loads(calls[0]["arguments"]) == {"city": "Oslo", "days": 2}
    assert json.loads(calls[1]["arguments"]) == {"path": "/etc/hosts"}
    assert all(c["id"].startswith("call_") and len(c["id"]) == 29 for c in calls)
    assert calls[0]["id"][-9:] != calls[1]["id"][-9:]
    assert finish == "tool_calls"
    assert usage is None  # not asked for
    assert len(ids) == 1  # one id/created/model across every chunk
    sent = fake.chat_requests()[0].json
    assert sent["stream"] is False
    assert "stream_options" not in sent
    assert sent["tools"] == TOOLS


def test_stream_helper_assembles_the_same_message(fake, client):
    fake.answer(Answer(body=vllm_completion(HERMES_TWO)))
    with client.chat.completions.stream(model="qwen", messages=MESSAGES, tools=TOOLS) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in message.tool_calls] == ["get_weather", "read"]
    assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Oslo", "days": 2}
    assert message.content == "Let me check both."


def test_usage_chunk_only_when_asked(fake, client):
    fake.answer(Answer(body=vllm_completion(HERMES_TWO)))
    stream = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].choices == []
    assert chunks[-1].usage.prompt_tokens == 31
    assert chunks[-1].usage.completion_tokens == 21
    assert all(c.usage is None for c in chunks[:-1])
    assert "stream_options" not in fake.chat_requests()[0].json


def test_raw_sse_sequence_follows_the_design(fake, proxy):
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>',
        reasoning="The user wants a file.")))
    response = requests.post(proxy.url + "/v1/chat/completions", stream=True, timeout=10, json={
        "model": "qwen", "messages": MESSAGES, "tools": TOOLS, "stream": True})
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["Cache-Control"] == "no-cache"
    assert response.headers["X-Accel-Buffering"] == "no"
    events = [e for e in response.content.decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert all(set(c) <= OPENAI_CHUNK_KEYS for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[1] == {"reasoning_content": "The user wants a file."}
    first_call = deltas[2]["tool_calls"][0]
    assert first_call["function"] == {"name": "read", "arguments": ""}
    assert first_call["type"] == "function"
    assert first_call["index"] == 0
    assert json.loads(deltas[3]["tool_calls"][0]["function"]["arguments"]) == {"path": "a"}
    assert deltas[4] == {}
    assert chunks[4]["choices"][0]["finish_reason"] == "tool_calls"
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


def test_non_streaming_client_gets_clean_json(fake, proxy):
    fake.answer(Answer(body=vllm_completion(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")))
    response = requests.post(proxy.url + "/v1/chat/completions", timeout=10, json={
        "model": "qwen", "messages": MESSAGES, "tools": TOOLS})
    body = response.json()
    assert response.status_code == 200
    assert set(body) <= OPENAI_CHUNK_KEYS
    assert set(body["choices"][0]) == {"index", "message", "logprobs", "finish_reason"}
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens",
                                  "prompt_tokens_details"}
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    message = body["choices"][0]["message"]
    assert "reasoning" not in message
    assert message["content"] is None
    assert message["tool_calls"][0]["function"] == {"name": "get_weather",
                                                   "arguments": '{"city":"Oslo","days":3}'}
    assert body["choices"][0]["finish_reason"] == "tool_calls"


def test_sdk_non_streaming_with_native_calls_and_wrong_finish_reason(fake, client):
    fake.answer(Answer(body=vllm_completion(
        None, tool_calls=[vllm_tool_call("get_weather", '"{\\"city\\": \\"Oslo\\"}"')],
        finish_reason="stop")))
    completion = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Oslo"}
    assert choice.message.tool_calls[0].id.startswith("chatcmpl-tool-")


def test_unknown_tool_stays_text_byte_identical_under_the_strict_rule(fake, start_proxy):
    client = start_proxy(unknown_tool_calls="text").client()
    text = 'Try this:\n<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>'
    fake.answer(Answer(body=vllm_completion(text)))
    stream = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS,
                                            stream=True)
    content, calls, finish, _, _ = _assemble(stream)
    assert content == text
    assert calls == []
    assert finish == "stop"


@pytest.mark.parametrize("response_format", [
    {"type": "json_object"},
    {"type": "json_schema", "json_schema": {"name": "step", "schema": {
        "type": "object", "properties": {"name": {"type": "string"},
                                         "arguments": {"type": "object"}}}}},
])
def test_structured_output_is_content_never_a_call(fake, client, response_format):
    text = '{"name": "read", "arguments": {"path": "/etc/hosts"}}'
    fake.answer(Answer(body=vllm_completion(text)))
    completion = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS,
                                                response_format=response_format)
    choice = completion.choices[0]
    assert (choice.message.content, choice.message.tool_calls, choice.finish_reason) \
        == (text, None, "stop")
    fake.answer(Answer(body=vllm_completion(
        None, tool_calls=[vllm_tool_call("read", '{"path": "/a"}')], finish_reason="stop")))
    completion = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS,
                                                response_format=response_format)
    assert completion.choices[0].finish_reason == "tool_calls"  # vLLM's own call still counts
    assert completion.choices[0].message.tool_calls[0].function.name == "read"


def test_an_answer_of_only_calls_left_out_is_an_empty_turn_never_a_502(fake, start_proxy):
    proxy = start_proxy(unknown_tool_calls="text")
    fake.answer(Answer(body=vllm_completion(
        None, tool_calls=[vllm_tool_call("delete_everything", '{"path": "/"}')])))
    reply = requests.post(proxy.url + "/v1/chat/completions", timeout=10, json={
        "model": "qwen", "messages": MESSAGES, "tools": TOOLS})
    assert reply.status_code == 200
    choice = reply.json()["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == (None, "stop")


@pytest.mark.parametrize("content", ["", None])
def test_an_empty_answer_is_an_answer_not_a_502(fake, client, content):
    fake.answer(Answer(body=vllm_completion(content)))
    completion = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS)
    choice = completion.choices[0]
    assert (choice.message.content, choice.message.tool_calls, choice.finish_reason) \
        == (content, None, "stop")
    stream = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS,
                                            stream=True)
    chunks = list(stream)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""
    assert len(fake.chat_requests()) == 2  # asked once each: nothing to retry


def test_an_empty_answer_to_a_required_call_is_asked_again_once(fake, start_proxy):
    client = start_proxy(required_call_retries=1).client()
    fake.answer(Answer(body=vllm_completion("")))
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS,
                                       tool_choice="required")
    assert caught.value.status_code == 502
    assert caught.value.body["code"] == "tool_call_required_unmet"
    assert len(fake.chat_requests()) == 2


def test_length_stays_length_and_cut_call_is_not_emitted(fake, client):
    text = '<tool_call>{"name": "read", "arguments": {"path": "/very/long/pa'
    fake.answer(Answer(body=vllm_completion(text, finish_reason="length")))
    stream = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS,
                                            stream=True)
    content, calls, finish, _, _ = _assemble(stream)
    assert (content, calls, finish) == (text, [], "length")


def test_loop_guard_refuses_before_upstream(fake, start_proxy):
    proxy = start_proxy(loop_guard_max_tool_calls=3)
    history = [{"role": "user", "content": "go"}]
    for i in range(4):
        history.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{i}", "type": "function",
            "function": {"name": "read", "arguments": '{"path": "a"}'}}]})
        history.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "x"})
    with pytest.raises(openai.BadRequestError) as caught:
        proxy.client().chat.completions.create(model="qwen", messages=history, tools=TOOLS,
                                               stream=True)
    error = caught.value.body
    assert caught.value.status_code == 400
    assert error["code"] == "tool_call_loop_guard"
    assert error["param"] == "messages"
    assert fake.chat_requests() == []


def test_passthrough_chat_without_tools_is_relayed_as_streamed(fake, proxy):
    chunks = vllm_stream_chunks("The answer is forty-two.", pieces=4)
    fake.answer(Answer(chunks=chunks, chunk_gap=0.05))
    raw = b"".join(requests.post(proxy.url + "/v1/chat/completions", timeout=10, stream=True,
                                 json={"model": "qwen", "messages": MESSAGES, "stream": True})
                   .iter_content(None))
    assert raw == b"".join(chunks)
    sent = fake.chat_requests()[0]
    assert sent.json["stream"] is True


def test_passthrough_first_chunk_arrives_before_upstream_finishes(fake, proxy):
    chunks = vllm_stream_chunks("slow " * 6, pieces=6)
    fake.answer(Answer(chunks=chunks, chunk_gap=0.4))
    started = time.monotonic()
    response = requests.post(proxy.url + "/v1/chat/completions", timeout=20, stream=True,
                             json={"model": "qwen", "messages": MESSAGES, "stream": True})
    pieces = response.iter_content(None)
    first = next(pieces)
    first_at = time.monotonic() - started
    rest = b"".join(pieces)
    total = time.monotonic() - started
    assert first.startswith(b"data: ")
    # The upstream spends 0.4 s between each of its 9 chunks; the first must not wait for them.
    assert total > 2.5
    assert first_at < total / 3
    assert (first + rest) == b"".join(chunks)


def test_passthrough_other_paths_with_status_headers_and_body(fake, proxy):
    fake.answer(Answer(status=418, body=b"short and stout",
                       headers={"Content-Type": "text/plain", "X-Vendor": "teapot",
                                "Keep-Alive": "timeout=5"}))
    response = requests.get(proxy.url + "/metrics?x=1", timeout=10)
    assert response.status_code == 418
    assert response.content == b"short and stout"
    assert response.headers["X-Vendor"] == "teapot"
    assert "Keep-Alive" not in response.headers
    assert fake.received[-1].path == "/metrics?x=1"
    models = proxy.client().models.list()
    assert [m.id for m in models.data] == ["Qwen/Qwen3.6-27B-FP8"]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_passthrough_get_sends_upstream_no_body(fake, proxy, method):
    """A GET's content has no meaning (RFC 9110 9.3.1): a client's is not forwarded, so the
    upstream never sees a body it did not expect (nor a framing two servers read apart)."""
    fake.answer(Answer(status=200, body=b"fine", headers={"Content-Type": "text/plain"}))
    response = requests.request(method, proxy.url + "/metrics", data=b'{"model": "other"}',
                                timeout=10)
    assert response.status_code == 200
    received = fake.received[-1]
    assert (received.method, received.path, received.raw) == (method, "/metrics", b"")
    assert "content-length" not in {name.lower() for name in received.headers}


def test_upstream_refused_is_502(start_proxy):
    # A port bound and never listening refuses connections; held for the test, so that the
    # proxy started next cannot be given it.
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        proxy = start_proxy(upstream=f"http://127.0.0.1:{spare.getsockname()[1]}")
        for stream in (True, False):
            with pytest.raises(openai.APIStatusError) as caught:
                proxy.client().chat.completions.create(model="q", messages=MESSAGES,
                                                       tools=TOOLS, stream=stream)
            assert caught.value.status_code == 502
            assert caught.value.body["code"] == "upstream_unreachable"
        response = requests.get(proxy.url + "/v1/models", timeout=10)
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "upstream_error"


def test_upstream_timeout_is_504(fake, start_proxy):
    proxy = start_proxy(buffered_timeout_seconds=0.3, read_timeout_seconds=0.3)
    fake.answer(Answer(body=vllm_completion("late"), delay=1.5))
    with pytest.raises(openai.APIStatusError) as caught:
        proxy.client().chat.completions.create(model="q", messages=MESSAGES, tools=TOOLS)
    assert caught.value.status_code == 504
    assert caught.value.body["code"] == "upstream_timeout"
    response = requests.get(proxy.url + "/metrics", timeout=10)  # passthrough: read timeout
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"


@pytest.mark.parametrize(("status", "error_class"), [
    (400, openai.BadRequestError), (429, openai.RateLimitError),
    (500, openai.InternalServerError), (503, openai.InternalServerError)])
def test_upstream_errors_keep_status_and_message(fake, client, status, error_class):
    answer = vllm_error(status, f"This model's maximum context length is 32768 ({status})")
    answer.headers["Retry-After"] = "7"
    fake.answer(answer)
    with pytest.raises(error_class) as caught:
        client.chat.completions.create(model="q", messages=MESSAGES, tools=TOOLS, stream=True)
    assert caught.value.status_code == status
    body = caught.value.body
    assert body["message"] == f"This model's maximum context length is 32768 ({status})"
    # A 400 in the words of a context window's refusal is OpenAI's context_length_exceeded.
    assert body["code"] == ("context_length_exceeded" if status == 400 else str(status))
    assert isinstance(body["type"], str)
    assert caught.value.response.headers["Retry-After"] == "7"


def test_html_error_page_becomes_an_envelope(fake, proxy):
    fake.answer(Answer(status=502, body=b"<html><body>Bad gateway</body></html>",
                       headers={"Content-Type": "text/html"}))
    response = requests.post(proxy.url + "/v1/chat/completions", timeout=10, json={
        "model": "q", "messages": MESSAGES, "tools": TOOLS})
    assert response.status_code == 502
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "Bad gateway" in error["message"]


def test_health(proxy):
    response = requests.get(proxy.url + "/proxy/health", timeout=5)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_an_answer_the_upstream_compresses_is_read_as_the_plain_one(fake, client):
    import gzip

    body = gzip.compress(json.dumps(vllm_completion(HERMES_TWO)).encode())
    fake.answer(Answer(body=body, headers={"Content-Type": "application/json",
                                           "Content-Encoding": "gzip"}))
    answer = client.chat.completions.create(model="qwen", messages=MESSAGES, tools=TOOLS)
    message = answer.choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["get_weather", "read"]
    assert message.content == "Let me check both."
