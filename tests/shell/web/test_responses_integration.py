"""The Responses front end to end: the official openai SDK (`client.responses`) → the proxy
(real HTTP) → the fake vLLM (real HTTP, vLLM's shapes)."""

from __future__ import annotations

import json
import socket
import time

import openai
import orjson
import pytest
import requests

from tests.fake_vllm import Answer, vllm_completion, vllm_error, vllm_tool_call
from tests.metrics_text import metric, settled_metrics

pytestmark = pytest.mark.integration

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string"}, "days": {"type": "integer"}},
               "required": ["city"]}, "strict": False}
READ = {"type": "function", "name": "read", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    "strict": False}
AGENTS = {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents",
          "tools": [{"type": "function", "name": "spawn_agent", "parameters": {
              "type": "object", "properties": {"task": {"type": "string"}},
              "required": ["task"]}}]}
PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /(.|\\n)+/"}}
TOOLS = [WEATHER, READ, {"type": "web_search"}]
HERMES_TWO = (
    "Checking both.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call>\n'
    '<tool_call>\n{"name": "read", "arguments": {"path": "/etc/hosts"}}\n</tool_call>')
QWEN_XML = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
            "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")


@pytest.fixture
def proxy(start_proxy, tmp_path):
    return start_proxy(responses_store_path=str(tmp_path / "responses.sqlite3"))


@pytest.fixture
def client(proxy) -> openai.OpenAI:
    return proxy.client()


def calls_of(response) -> list:
    return [item for item in response.output if item.type in ("function_call",
                                                               "custom_tool_call")]


def test_text_answer_as_json_and_as_stream(fake, client):
    fake.answer(Answer(body=vllm_completion("Hello there.")))
    response = client.responses.create(model="qwen", input="Hi", instructions="Be nice.")
    assert response.status == "completed"
    assert response.output_text == "Hello there."
    assert response.usage.input_tokens == 31
    assert response.usage.output_tokens == 21
    assert fake.chat_requests()[0].json["messages"] == [
        {"role": "system", "content": "Be nice."}, {"role": "user", "content": "Hi"}]
    stream = client.responses.create(model="qwen", input="Hi", stream=True)
    seen = list(stream)
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert seen[0].type == "response.created"
    assert seen[-1].type == "response.completed"
    text = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert text == "Hello there." == seen[-1].response.output_text


@pytest.mark.parametrize("written", [HERMES_TWO, QWEN_XML], ids=["hermes", "qwen_xml"])
def test_a_call_written_as_text_arrives_as_a_function_call(fake, client, written):
    fake.answer(Answer(body=vllm_completion(written)))
    with client.responses.stream(model="qwen", input="Weather in Oslo?", tools=TOOLS) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    calls = calls_of(final)
    assert calls[0].name == "get_weather"
    assert json.loads(calls[0].arguments)["city"] == "Oslo"
    assert json.loads(calls[0].arguments)["days"] in (2, 3)  # schema-coerced from XML text
    assert all(call.call_id.startswith("call_") and call.status == "completed"
               for call in calls)
    assert "response.function_call_arguments.done" in kinds
    assert "<tool_call>" not in final.output_text
    sent = fake.chat_requests()[0].json
    assert sent["stream"] is False
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather", "read"]


def test_parallel_calls_and_parallel_tool_calls_false(fake, client):
    fake.answer(Answer(body=vllm_completion(HERMES_TWO)))
    response = client.responses.create(model="qwen", input="both", tools=TOOLS)
    assert [c.name for c in calls_of(response)] == ["get_weather", "read"]
    assert response.output_text == "Checking both."
    assert len({c.call_id for c in calls_of(response)}) == 2
    single = client.responses.create(model="qwen", input="both", tools=TOOLS,
                                     parallel_tool_calls=False)
    assert [c.name for c in calls_of(single)] == ["get_weather"]
    assert single.parallel_tool_calls is False


def test_vllm_parsed_calls_pass_with_repaired_arguments(fake, client):
    fake.answer(Answer(body=vllm_completion(None, tool_calls=[
        vllm_tool_call("read", '{"path": "/a",}')], finish_reason="tool_calls")))
    response = client.responses.create(model="qwen", input="read", tools=TOOLS)
    assert json.loads(calls_of(response)[0].arguments) == {"path": "/a"}


def test_a_namespace_tool_comes_back_with_its_namespace(fake, client):
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "multi_agent_v1__spawn_agent", "arguments": {"task": "lint"}}'
        "</tool_call>")))
    with client.responses.stream(model="qwen", input="delegate", tools=[AGENTS]) as stream:
        final = stream.get_final_response()
    call = calls_of(final)[0]
    assert (call.type, call.name, call.namespace) == ("function_call", "spawn_agent",
                                                      "multi_agent_v1")
    assert json.loads(call.arguments) == {"task": "lint"}
    offered = fake.chat_requests()[0].json["tools"][0]["function"]["name"]
    assert offered == "multi_agent_v1__spawn_agent"


def test_a_custom_tool_comes_back_as_a_custom_tool_call_with_the_raw_input(fake, client):
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch"
    fake.answer(Answer(body=vllm_completion(
        "<tool_call>" + json.dumps({"name": "apply_patch", "arguments": {"input": patch}})
        + "</tool_call>")))
    response = client.responses.create(model="qwen", input="add a file", tools=[PATCH])
    call = calls_of(response)[0]
    assert (call.type, call.name, call.input) == ("custom_tool_call", "apply_patch", patch)
    stream = client.responses.create(model="qwen", input="add a file", tools=[PATCH],
                                     stream=True)
    seen = list(stream)
    done = [e for e in seen if e.type == "response.custom_tool_call_input.done"]
    assert done[0].input == patch


def test_reasoning_is_a_reasoning_item_with_summary_events(fake, client):
    fake.answer(Answer(body=vllm_completion("It is 4.", reasoning="2 + 2 is 4.")))
    with client.responses.stream(model="qwen", input="2+2?") as stream:
        deltas = [e.delta for e in stream if e.type == "response.reasoning_summary_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "2 + 2 is 4."
    assert final.output[0].type == "reasoning"
    assert final.output[0].summary[0].text == "2 + 2 is 4."
    assert final.output_text == "It is 4."


def test_length_is_an_incomplete_response(fake, client):
    fake.answer(Answer(body=vllm_completion("The long answer", finish_reason="length")))
    response = client.responses.create(model="qwen", input="go", max_output_tokens=5)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert fake.chat_requests()[0].json["max_tokens"] == 5
    stream = client.responses.create(model="qwen", input="go", stream=True, tools=TOOLS)
    last = list(stream)[-1]
    assert last.type == "response.incomplete"
    assert last.response.output_text == "The long answer"


def test_a_call_cut_by_length_is_not_emitted(fake, client):
    cut = 'Reading.\n<tool_call>{"name": "read", "arguments": {"path": "/etc/ho'
    fake.answer(Answer(body=vllm_completion(cut, finish_reason="length")))
    response = client.responses.create(model="qwen", input="go", tools=TOOLS)
    assert calls_of(response) == []
    assert response.status == "incomplete"
    assert response.output_text.startswith("Reading.")


def test_an_upstream_error_before_the_stream_keeps_status_envelope_and_retry_after(fake, proxy):
    fake.answer(Answer(status=429, body={"error": {"message": "Too many requests", "type":
                                                   "RateLimitError", "param": None,
                                                   "code": 429}},
                       headers={"Retry-After": "2"}))
    response = requests.post(proxy.url + "/v1/responses", timeout=10, json={
        "model": "qwen", "input": "x", "tools": TOOLS, "stream": True})
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "2"
    assert response.json()["error"]["message"] == "Too many requests"
    fake.answer(vllm_error(400, "This model's maximum context length is 32768 tokens."))
    with pytest.raises(openai.BadRequestError) as caught:
        proxy.client().responses.create(model="qwen", input="x")
    assert "maximum context length" in caught.value.message


def test_an_upstream_error_after_the_start_is_response_failed(fake, start_proxy, tmp_path):
    proxy = start_proxy(commit_window_seconds=0.1, heartbeat_seconds=0.2,
                        responses_store_path=str(tmp_path / "r.sqlite3"))
    fake.answer(Answer(status=503, body={"error": {"message": "engine died", "type":
                                                   "ServiceUnavailable", "code": 503}},
                       delay=0.6))
    stream = proxy.client().responses.create(model="qwen", input="x", tools=TOOLS,
                                             stream=True)
    seen = list(stream)
    kinds = [e.type for e in seen]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds.count("response.in_progress") >= 2  # heartbeats while upstream worked
    assert kinds[-1] == "response.failed"
    assert seen[-1].response.status == "failed"
    assert seen[-1].response.error.message == "engine died"
    assert seen[-1].response.error.code == "503"
    assert [e.sequence_number for e in seen] == list(range(len(seen)))


def test_store_previous_response_id_get_and_delete(fake, client):
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "notes.txt"}}</tool_call>')))
    first = client.responses.create(model="qwen", input="Read my notes", tools=TOOLS,
                                    instructions="Be brief.")
    call = calls_of(first)[0]
    assert client.responses.retrieve(first.id).model_dump() == first.model_dump()
    fake.answer(Answer(body=vllm_completion("Your notes say hi.")))
    second = client.responses.create(
        model="qwen", previous_response_id=first.id, tools=TOOLS,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "hi"}])
    assert second.output_text == "Your notes say hi."
    assert second.previous_response_id == first.id
    messages = fake.chat_requests()[-1].json["messages"]
    assert messages[0] == {"role": "user", "content": "Read my notes"}  # no old instructions
    assert messages[1]["tool_calls"][0]["id"] == call.call_id
    assert messages[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "hi"}
    fake.answer(Answer(body=vllm_completion("Still hi.")))
    third = client.responses.create(model="qwen", previous_response_id=second.id,
                                    input="And now?")
    assert len(fake.chat_requests()[-1].json["messages"]) == 5  # the whole chain
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.retrieve(first.id)
    assert caught.value.body["param"] == "response_id"
    with pytest.raises(openai.NotFoundError):  # a chain whose start is gone
        client.responses.create(model="qwen", previous_response_id=third.id, input="more")
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(first.id)


def test_store_false_keeps_nothing(fake, client):
    fake.answer(Answer(body=vllm_completion("ok")))
    response = client.responses.create(model="qwen", input="x", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="qwen", input="y", previous_response_id=response.id)
    assert caught.value.body["param"] == "previous_response_id"


def test_a_streamed_answer_is_kept_as_streamed(fake, client):
    fake.answer(Answer(body=vllm_completion("Hi.", reasoning="Greet.")))
    with client.responses.stream(model="qwen", input="hello") as stream:
        final = stream.get_final_response()
    kept = client.responses.retrieve(final.id)
    assert [item.id for item in kept.output] == [item.id for item in final.output]
    assert kept.output_text == "Hi."


def test_a_bad_request_is_a_400_naming_the_param(client, fake):
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="qwen", input=[{"role": "robot", "content": "x"}])
    assert caught.value.body["param"] == "input[0].role"
    assert fake.chat_requests() == []


def _raw_post(url: str, body: dict) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    payload = orjson.dumps(body)
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                 b"\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
    return sock


def test_a_client_leaving_closes_the_upstream_request(fake, start_proxy, tmp_path):
    proxy = start_proxy(commit_window_seconds=0.1, heartbeat_seconds=1.0,
                        responses_store_path=str(tmp_path / "r.sqlite3"))
    fake.answer(Answer(body=vllm_completion("late"), delay=20))
    sock = _raw_post(proxy.url, {"model": "q", "input": "x", "tools": TOOLS, "stream": True})
    data = b""
    deadline = time.monotonic() + 10
    while b"response.in_progress" not in data and time.monotonic() < deadline:
        data += sock.recv(65536)
    assert b"event: response.created" in data
    # The stream begins after the commit window, whether or not the call has reached upstream
    # yet (on a loaded machine it may not have): leave once it has.
    assert fake.wait_chat_requests(), "the call never reached upstream"
    sock.close()
    left = time.monotonic()
    gone = fake.first_disconnect(within=5)
    assert gone is not None, "the upstream call outlived its client"
    assert gone - left < 2


def test_relay_mode_sends_the_endpoint_upstream_unchanged(fake, start_proxy):
    proxy = start_proxy(responses_mode="relay")
    fake.answer(Answer(body={"id": "resp_native", "object": "response", "status": "completed",
                             "output": []}))
    body = {"model": "qwen", "input": "x", "tools": TOOLS}
    response = requests.post(proxy.url + "/v1/responses", json=body, timeout=10)
    assert response.json()["id"] == "resp_native"
    assert fake.received[-1].path == "/v1/responses"
    assert fake.received[-1].json == body
    requests.get(proxy.url + "/v1/responses/resp_native", timeout=10)
    assert fake.received[-1].path == "/v1/responses/resp_native"


def test_the_log_line_and_metrics_name_the_front_and_the_hosted_tools(fake, proxy, log_lines):
    fake.answer(Answer(body=vllm_completion(HERMES_TWO)))
    proxy.client().responses.create(model="qwen", input="x", tools=TOOLS, store=False)
    line = log_lines(1)[-1]
    assert line["front"] == "responses"
    assert line["mode"] == "buffered"
    assert "hosted_tools_left_out:web_search" in line["rewrites"]
    assert line["tool_calls"] == 2
    metrics = settled_metrics(proxy)
    assert metric(metrics, "toolcall_proxy_requests_total", front="responses",
                   mode="buffered", status="200") == 1
