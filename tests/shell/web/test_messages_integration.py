"""The Messages front end to end: the official `anthropic` SDK → the proxy (real HTTP) → the
fake vLLM (real HTTP), which writes its calls as text."""

from __future__ import annotations

import json
import socket
import time

import anthropic
import pytest
import requests

from tests.clients import read_until
from tests.fake_vllm import Answer, vllm_completion, vllm_error
from tests.metrics_text import metric, settled_metrics

pytestmark = pytest.mark.integration

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}
READ = {"name": "read", "input_schema": {"type": "object",
                                         "properties": {"path": {"type": "string"}}}}
TOOLS = [WEATHER, READ]
ASK = [{"role": "user", "content": "What's the weather in Oslo?"}]
HERMES_CALL = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
               '{"city": "Oslo", "days": 2}}\n</tool_call>')
QWEN_XML_CALL = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                 "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
FAST = {"commit_window_seconds": 0.05, "heartbeat_seconds": 0.1}


@pytest.fixture
def claude(proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                               timeout=20)


def _client(proxy, **kwargs) -> anthropic.Anthropic:
    kwargs.setdefault("api_key", "sk-test")
    return anthropic.Anthropic(base_url=proxy.url, max_retries=0, timeout=20, **kwargs)


def _sent(fake) -> dict:
    return fake.chat_requests()[-1].json


def _events(raw: bytes) -> list[tuple[str, dict]]:
    """(event name, data) of each SSE event, checking that the two name the same type."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        events.append((lines["event"], data))
    return events


def test_create_returns_a_tool_use_message(fake, claude):
    fake.answer(Answer(body=vllm_completion(HERMES_CALL)))
    message = claude.messages.create(model="qwen", max_tokens=256, messages=ASK, tools=TOOLS)
    assert message.id.startswith("msg_")
    assert message.role == "assistant"
    assert message.model == "qwen"
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[0].text == "Let me check."
    call = message.content[1]
    assert call.id.startswith("toolu_")
    assert len(call.id) == 30
    assert (call.name, call.input) == ("get_weather", {"city": "Oslo", "days": 2})
    assert (message.usage.input_tokens, message.usage.output_tokens) == (31, 21)
    sent = _sent(fake)
    assert sent["stream"] is False
    assert sent["max_tokens"] == 256
    assert sent["messages"] == [{"role": "user", "content": "What's the weather in Oslo?"}]
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather", "read"]
    assert sent["tools"][0]["function"]["parameters"] == WEATHER["input_schema"]


def test_stream_final_message_with_thinking_and_qwen_xml(fake, claude):
    fake.answer(Answer(body=vllm_completion(QWEN_XML_CALL, reasoning="Oslo, three days.")))
    with claude.messages.stream(model="qwen", max_tokens=512, messages=ASK, tools=TOOLS,
                                thinking={"type": "enabled", "budget_tokens": 1024}) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert [b.type for b in final.content] == ["thinking", "tool_use"]
    assert final.content[0].thinking == "Oslo, three days."
    assert final.content[1].input == {"city": "Oslo", "days": 3}  # coerced by the schema
    assert final.stop_reason == "tool_use"
    assert final.usage.input_tokens == 31
    assert final.usage.output_tokens == 21
    assert _sent(fake)["chat_template_kwargs"] == {"enable_thinking": True}


def test_raw_event_sequence(fake, proxy):
    fake.answer(Answer(body=vllm_completion(HERMES_CALL, reasoning="Hmm.")))
    response = requests.post(proxy.url + "/v1/messages?beta=true", timeout=10, json={
        "model": "qwen", "max_tokens": 100, "messages": ASK, "tools": TOOLS, "stream": True},
        headers={"anthropic-version": "2023-06-01",
                 "anthropic-beta": "interleaved-thinking-2025-05-14"})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = _events(response.content)
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["content"] == []
    assert start["stop_reason"] is None
    assert [e[1]["content_block"] for e in events if e[0] == "content_block_start"][:2] == [
        {"type": "thinking", "thinking": "", "signature": ""}, {"type": "text", "text": ""}]
    tool_start = events[7][1]
    assert tool_start["index"] == 2
    assert tool_start["content_block"]["input"] == {}
    delta = events[8][1]["delta"]
    assert delta["type"] == "input_json_delta"
    assert json.loads(delta["partial_json"]) == {"city": "Oslo", "days": 2}
    assert events[10][1]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert events[10][1]["usage"]["output_tokens"] == 21


def test_tool_use_round_trip(fake, claude):
    fake.answer(Answer(body=vllm_completion(HERMES_CALL)))
    first = claude.messages.create(model="qwen", max_tokens=256, messages=ASK, tools=TOOLS)
    call = first.content[1]
    fake.answer(Answer(body=vllm_completion("It is 4 °C in Oslo.")))
    second = claude.messages.create(model="qwen", max_tokens=256, tools=TOOLS, messages=[
        *ASK,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                          for b in first.content]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": "4 °C, cloudy"},
            {"type": "text", "text": "Answer briefly."}]}])
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == "It is 4 °C in Oslo."
    messages = _sent(fake)["messages"]
    assert messages[1] == {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": call.id, "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city":"Oslo","days":2}'}}]}
    assert messages[2] == {"role": "tool", "tool_call_id": call.id, "content": "4 °C, cloudy"}
    assert messages[3] == {"role": "user", "content": "Answer briefly."}


def test_max_tokens_and_stop_sequence(fake, claude):
    fake.answer(Answer(body=vllm_completion("Once upon a", finish_reason="length")))
    cut = claude.messages.create(model="qwen", max_tokens=3, messages=ASK)
    assert cut.stop_reason == "max_tokens"
    assert _sent(fake)["max_tokens"] == 3
    stopped = vllm_completion("Step one")
    stopped["choices"][0]["stop_reason"] = "\n\n"
    fake.answer(Answer(body=stopped))
    answer = claude.messages.create(model="qwen", max_tokens=50, messages=ASK,
                                    stop_sequences=["END", "\n\n"])
    assert (answer.stop_reason, answer.stop_sequence) == ("stop_sequence", "\n\n")
    assert _sent(fake)["stop"] == ["END", "\n\n"]
    fake.answer(Answer(body=vllm_completion("Done.")))  # EOS: vLLM's stop_reason is null
    plain = claude.messages.create(model="qwen", max_tokens=50, messages=ASK,
                                   stop_sequences=["END"])
    assert (plain.stop_reason, plain.stop_sequence) == ("end_turn", None)


@pytest.mark.parametrize(("status", "kind", "error_class"), [
    (400, "invalid_request_error", anthropic.BadRequestError),
    (404, "not_found_error", anthropic.NotFoundError),
    (429, "rate_limit_error", anthropic.RateLimitError),
    (500, "api_error", anthropic.InternalServerError),
    (503, "overloaded_error", anthropic.OverloadedError),
])
def test_errors_before_the_stream_keep_their_meaning(fake, claude, status, kind, error_class):
    answer = vllm_error(status, "upstream says no")
    answer.headers = {"Retry-After": "7"} if status in (429, 503) else {}
    fake.answer(answer)
    for stream in (False, True):
        with pytest.raises(error_class) as caught:
            claude.messages.create(model="qwen", max_tokens=10, messages=ASK, stream=stream)
        assert caught.value.body == {"type": "error",
                                     "error": {"type": kind, "message": "upstream says no"}}
        assert caught.value.status_code == (529 if status == 503 else status)
        if status in (429, 503):
            assert caught.value.response.headers["retry-after"] == "7"


def test_error_after_the_stream_started(fake, start_proxy):
    proxy = start_proxy(**FAST)
    fake.answer(Answer(status=200, body=b"<html>oops</html>", delay=0.5,
                       headers={"Content-Type": "text/html"}))
    response = requests.post(proxy.url + "/v1/messages", timeout=10, json={
        "model": "qwen", "max_tokens": 10, "messages": ASK, "stream": True})
    events = _events(response.content)
    assert events[0][0] == "message_start"
    assert events[-1] == ("error", {"type": "error", "error": {
        "type": "api_error", "message": "The upstream answered with a body that is not JSON."}})
    client = _client(proxy)
    with (pytest.raises(anthropic.APIStatusError) as caught,
          client.messages.stream(model="qwen", max_tokens=10, messages=ASK) as stream):
        stream.get_final_message()
    assert caught.value.body["error"]["type"] == "api_error"


def test_pings_while_upstream_works(fake, start_proxy):
    proxy = start_proxy(**FAST)
    fake.answer(Answer(body=vllm_completion("Here."), delay=0.6))
    response = requests.post(proxy.url + "/v1/messages", timeout=10, json={
        "model": "qwen", "max_tokens": 10, "messages": ASK, "stream": True})
    names = [name for name, _ in _events(response.content)]
    assert names[0] == "message_start"
    first_block = names.index("content_block_start")
    assert names[1:first_block].count("ping") >= 3
    assert set(names[1:first_block]) == {"ping"}
    with _client(proxy).messages.stream(model="qwen", max_tokens=10, messages=ASK) as stream:
        assert stream.get_final_message().content[0].text == "Here."


def test_a_client_that_leaves_closes_the_upstream_request(fake, start_proxy):
    proxy = start_proxy(**FAST, buffered_timeout_seconds=60, read_timeout_seconds=60)
    fake.answer(Answer(body=vllm_completion("never read"), delay=20))
    host, port = proxy.url.removeprefix("http://").split(":")
    payload = json.dumps({"model": "qwen", "max_tokens": 10, "messages": ASK,
                          "stream": True}).encode()
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json"
                     b"\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
        assert b"message_start" in read_until(sock, b"message_start")  # may come after the head
        # message_start goes out after the commit window, whether or not the call has reached
        # upstream yet (on a loaded machine it may not have): leave once it has.
        assert fake.wait_chat_requests(), "the call never reached upstream"
    left = time.monotonic()
    gone = fake.first_disconnect(within=5)
    assert gone is not None, "the upstream call outlived its client"
    assert gone - left < 2


def test_count_tokens_uses_the_upstream_tokenizer(fake, claude):
    counted = claude.messages.count_tokens(model="qwen", system="Be brief.", messages=ASK,
                                           tools=TOOLS)
    tokenize = [r for r in fake.received if r.path == "/tokenize"][-1].json
    assert tokenize["messages"] == [{"role": "system", "content": "Be brief."}, *ASK]
    assert [t["function"]["name"] for t in tokenize["tools"]] == ["get_weather", "read"]
    assert counted.input_tokens == fake.tokenize(tokenize)
    fake.tokenize = None  # a server without /tokenize: the documented estimate
    estimated = claude.messages.count_tokens(model="qwen", messages=ASK)
    assert estimated.input_tokens == (16 + len(ASK[0]["content"]) + 3) // 4


def test_auth_by_x_api_key_or_bearer(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-proxy"])
    fake.answer(Answer(body=vllm_completion("Hi.")))
    by_key = _client(proxy, api_key="sk-proxy").messages.create(
        model="qwen", max_tokens=5, messages=ASK)
    by_bearer = _client(proxy, api_key=None, auth_token="sk-proxy").messages.create(
        model="qwen", max_tokens=5, messages=ASK)
    assert by_key.content[0].text == by_bearer.content[0].text == "Hi."
    assert all("sk-proxy" not in json.dumps(r.headers) for r in fake.received)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        _client(proxy, api_key="wrong").messages.create(model="qwen", max_tokens=5,
                                                        messages=ASK)
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.AuthenticationError):
        _client(proxy, api_key="wrong").messages.count_tokens(model="qwen", messages=ASK)


def test_beta_path_and_headers(fake, proxy):
    fake.answer(Answer(body=vllm_completion("Hi.")))
    client = _client(proxy)
    message = client.beta.messages.create(model="qwen", max_tokens=5, messages=ASK,
                                          betas=["interleaved-thinking-2025-05-14"])
    assert message.content[0].text == "Hi."
    assert fake.chat_requests()[-1].path == "/v1/chat/completions"


@pytest.mark.parametrize(("body", "field"), [
    ({"max_tokens": 5, "messages": ASK}, "model"),
    ({"model": "qwen", "messages": ASK}, "max_tokens"),
    ({"model": "qwen", "max_tokens": 5, "messages": []}, "messages"),
    ({"model": "qwen", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]},
     "messages.0.role"),
    ({"model": "qwen", "max_tokens": 5, "messages": ASK, "tools": [{"name": "x"}]},
     "tools.0.input_schema"),
])
def test_wrong_shapes_are_400_in_anthropic_envelope(fake, proxy, body, field):
    response = requests.post(proxy.url + "/v1/messages", json=body, timeout=10)
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(field)
    assert fake.chat_requests() == []


def test_not_json_is_400_in_anthropic_envelope(proxy):
    response = requests.post(proxy.url + "/v1/messages", data=b"{oops", timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_the_log_line_and_metrics_name_the_front(fake, proxy, claude, log_lines):
    fake.answer(Answer(body=vllm_completion("Hi.")))
    claude.messages.create(model="qwen", max_tokens=5, messages=ASK)
    fake.tokenize = None
    claude.messages.count_tokens(model="qwen", messages=ASK)
    turn, count = log_lines(2)
    assert (turn["front"], turn["mode"], turn["path"], turn["status"]) == (
        "messages", "buffered", "/v1/messages", 200)
    assert (count["front"], count["path"]) == ("messages", "/v1/messages/count_tokens")
    assert count["notes"] == ["count_tokens:estimated"]
    assert "What's the weather" not in json.dumps([turn, count])  # no prompt text
    text = settled_metrics(proxy)
    assert metric(text, "toolcall_proxy_requests_total", front="messages",
                   mode="buffered") == 1


def test_with_stable_prefix_claude_codes_system_prompt_keeps_its_prefix_across_turns(
        fake, start_proxy):
    """Claude Code's system blocks (its billing line, new every request, dropped; a token
    reminder, where it stands in the system prompt, moved behind the rest)."""
    fake.answer(Answer(body=vllm_completion("Done.")))
    proxy = start_proxy(stable_prefix=True)
    rules = "".join(f"Rule {i}: keep the code tidy.\n" for i in range(100))
    for used in (1200, 5400):
        system = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332; "
                   f"cc_entrypoint=cli; cch={used:05x};"},
                  {"type": "text", "text": "You are Claude Code.\n<system-reminder>\nToken "
                   f"usage: {used}/200000; {200000 - used} remaining\n</system-reminder>\n"
                   + rules}]
        _client(proxy, api_key="sk-test").messages.create(
            model="qwen", max_tokens=64, system=system, messages=ASK, tools=TOOLS)
    sent = [r.json["messages"][0]["content"] for r in fake.chat_requests()]
    assert all("billing" not in text for text in sent)
    assert all(text.startswith("You are Claude Code.\n" + rules) for text in sent)
    assert sent[0].endswith("<system-reminder>\nToken usage: 1200/200000; 198800 remaining\n"
                            "</system-reminder>\n")
