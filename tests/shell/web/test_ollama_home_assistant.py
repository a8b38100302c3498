"""What Home Assistant 2026 sends the Ollama front (its `ollama` integration, read from the
2026.11 wheel: tests/home_assistant.py), through the real proxy before the fake vLLM, sent
by the official `ollama` client as the integration calls it: `keep_alive` as the integer -1,
`think` per agent, `format` as a JSON schema (AI Task's structured output), history carrying
`thinking`, tool results as `{"data", "error"}` without a name or an id, tool schemas in
OpenAPI 3.0 and 3.1 style; its setup's `pull`; and the model-management endpoints refused
without the upstream."""

from __future__ import annotations

import asyncio
from typing import Any

import ollama
import openai
import orjson
import pytest
import requests

from tests.fake_vllm import MODEL, Answer, FakeVLLM, Received, vllm_completion
from tests.home_assistant import (
    ADD_ITEM,
    ADD_ITEM_30,
    NO_TIMERS,
    TURN_ON,
    area_line,
    prompt_2025,
    prompt_2026,
    shared,
)

pytestmark = pytest.mark.integration

SYSTEM = prompt_2026("Kitchen", entities=5)


def _chat(proxy: Any, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """One turn as OllamaBaseLLMEntity._async_handle_chat_log asks it (the async client,
    streamed, keep_alive -1, num_ctx), its deltas added up as the chat log adds them."""
    async def turn() -> dict[str, Any]:
        client = ollama.AsyncClient(host=proxy.url, timeout=20)
        said: dict[str, Any] = {"content": "", "thinking": "", "tool_calls": []}
        asked = {"tools": [TURN_ON, ADD_ITEM], "think": None, "format": None, **fields}
        async for response in await client.chat(
                model=MODEL, messages=messages, stream=True, keep_alive=-1,
                options={"num_ctx": 8192}, **asked):
            message = response["message"]
            said["content"] += message.get("content") or ""
            said["thinking"] += message.get("thinking") or ""
            said["tool_calls"] += [(call["function"]["name"], call["function"]["arguments"])
                                   for call in message.get("tool_calls") or ()]
        return said
    return asyncio.run(turn())


def _history() -> list[dict[str, Any]]:
    """A conversation after one turned-on light: the assistant's thinking and call (no id),
    the tool's result as `_convert_content` writes it (no name, no id), a follow-up."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "turn on the kitchen light"},
        {"role": "assistant", "content": "", "thinking": "The user wants the light on.",
         "tool_calls": [{"function": {"name": "intent__HassTurnOn",
                                      "arguments": {"name": "kitchen light"}}}]},
        {"role": "tool", "content": orjson.dumps(
            {"data": {"success": [{"name": "Kitchen Light", "type": "entity"}],
                      "failed": []}, "error": None}).decode()},
        {"role": "assistant", "content": "The kitchen light is on."},
        {"role": "user", "content": "and add milk to the list"},
    ]


@pytest.mark.parametrize(("think", "switch"), [(True, {"enable_thinking": True}),
                                                (False, {"enable_thinking": False}),
                                                (None, None)])
def test_home_assistant_2026s_turn_reaches_the_upstream_as_a_chat(fake, proxy, think,
                                                                    switch):
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "todo__HassListAddItem", "arguments": {"item": "milk"}}'
        "</tool_call>", reasoning="Add it." if think else None)))
    said = _chat(proxy, _history(), think=think)
    assert said["tool_calls"] == [("todo__HassListAddItem", {"item": "milk"})]
    assert said["thinking"] == ("Add it." if think else "")
    sent = fake.chat_requests()[-1].json
    assert sent.get("chat_template_kwargs") == switch
    assert "keep_alive" not in sent
    assert "options" not in sent
    assert sent["messages"][0] == {"role": "system", "content": SYSTEM}
    assistant, result = sent["messages"][2], sent["messages"][3]
    assert assistant["reasoning"] == "The user wants the light on."
    assert result["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert orjson.loads(result["content"])["error"] is None
    # The tools as the official client sends them: it keeps of a schema only `type`,
    # `properties` (their `type`, `items`, `description`, `enum`) and `required`, so
    # `anyOf`, `nullable`, `format`, `uniqueItems`, ranges and `additionalProperties` never
    # reach an Ollama server from Home Assistant (raw clients send them: below).
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "intent__HassTurnOn", "todo__HassListAddItem"]
    assert sent["tools"][1]["function"]["parameters"]["properties"]["color"] == {}


def test_ai_tasks_structured_output_is_the_upstreams_json_schema(fake, proxy):
    structure = {"type": "object", "properties": {
        "summary": {"type": "string"}, "rooms": {"type": "array", "items": {"type": "string"},
                                                 "uniqueItems": True},
        "when": {"anyOf": [{"type": "null"}, {"type": "string", "format": "date-time"}]}},
        "required": ["summary"], "additionalProperties": False}
    answer = '{"summary": "All quiet.", "rooms": ["Kitchen"], "when": null}'
    fake.answer(Answer(body=vllm_completion(answer)))
    said = _chat(proxy, [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": "Summarise the house."}],
                 tools=None, format=structure)
    assert orjson.loads(said["content"]) == orjson.loads(answer)  # json_loads, as ai_task.py
    assert said["tool_calls"] == []
    sent = fake.chat_requests()[-1].json
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "format", "schema": structure}}


def _raw_chat(proxy: Any, tools: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """A turn with the tools' schemas whole, as a client without the official library (Open
    WebUI, curl) sends them; the calls of its answer."""
    answer = requests.post(proxy.url + "/api/chat", json={
        "model": MODEL, "messages": _history(), "tools": tools, "stream": False,
        "keep_alive": -1, "options": {"num_ctx": 8192}}, timeout=20)
    assert answer.status_code == 200, answer.text
    return [(c["function"]["name"], c["function"]["arguments"])
            for c in answer.json()["message"].get("tool_calls") or ()]


@pytest.mark.parametrize("added", [ADD_ITEM, ADD_ITEM_30], ids=["openapi31", "openapi30"])
def test_openapi_schemas_null_sets_formats_and_ranges_are_valid_calls(fake, proxy, log_lines,
                                                                      added):
    arguments = {"item": "milk", "color": None, "labels": ["dairy", "cold"],
                 "due_date": "2026-11-21", "brightness": 40, "domain": ["light"]}
    fake.answer(Answer(body=vllm_completion(
        f'<tool_call>{{"name": "todo__HassListAddItem", "arguments": '
        f"{orjson.dumps(arguments).decode()}}}</tool_call>")))
    assert _raw_chat(proxy, [TURN_ON, added]) == [("todo__HassListAddItem", arguments)]
    assert log_lines(1)[-1]["schema_invalid"] == []
    assert fake.chat_requests()[-1].json["tools"][1] == added  # whole, as the client sent it


@pytest.mark.parametrize("wrong", [{"brightness": "high"}, {"color": ["red"]},
                                   {"labels": "dairy"}, {"lights": 1}])
def test_a_value_an_openapi_schema_does_not_take_is_still_schema_invalid(fake, proxy,
                                                                         log_lines, wrong):
    arguments = {"item": "milk", **wrong}
    fake.answer(Answer(body=vllm_completion(
        f'<tool_call>{{"name": "todo__HassListAddItem", "arguments": '
        f"{orjson.dumps(arguments).decode()}}}</tool_call>")))
    _raw_chat(proxy, [TURN_ON, ADD_ITEM_30])
    assert log_lines(1)[-1]["schema_invalid"] == [
        "hermes:schema_invalid:todo__HassListAddItem"]


def _mended(received: Received) -> Answer:
    """A model that botches its call unless constrained; constrained, it writes one call
    that fits the schema it was given (the item, and null where the schema takes it)."""
    constraint = (received.json.get("structured_outputs") or {}).get("json")
    if constraint is None:
        return Answer(body=vllm_completion(
            '<tool_call>{"name": "todo__HassListAddItem", "arguments": "{item: milk"}'
            "</tool_call>"))
    items = constraint["items"]
    first = items["anyOf"][0] if "anyOf" in items else items
    color = first["properties"]["arguments"]["properties"]["color"]
    takes_null = "null" in color.get("type", []) or {"type": "null"} in color.get("anyOf", [])
    arguments = {"item": "milk", **({"color": None} if takes_null else {})}
    return Answer(body=vllm_completion(orjson.dumps(
        [{"name": first["properties"]["name"]["enum"][0], "arguments": arguments}]).decode()))


@pytest.mark.parametrize("added", [ADD_ITEM, ADD_ITEM_30], ids=["openapi31", "openapi30"])
def test_a_botched_call_is_re_asked_under_a_schema_the_engine_compiles(start_proxy, added):
    parserless = FakeVLLM(tool_parser=False)
    try:
        parserless.answer(_mended)
        proxy = start_proxy(upstream=parserless.url, upstream_tool_parser=False,
                            formats=["qwen_xml", "hermes"])
        assert _raw_chat(proxy, [TURN_ON, added]) == [
            ("todo__HassListAddItem", {"item": "milk", "color": None})]
        schema = parserless.chat_requests()[-1].json["structured_outputs"]["json"]
        asked = schema["items"]["properties"]["arguments"]
        text = orjson.dumps(asked).decode()
        for keyword in ("uniqueItems", '"format"', "nullable"):
            assert keyword not in text
        assert asked["properties"]["item"] == {"type": "string"}
        assert asked["properties"]["brightness"] == {"type": "integer", "minimum": 0,
                                                     "maximum": 100}
        assert asked["additionalProperties"] is False
    finally:
        parserless.close()


# --- the setup's pull, and the endpoints that manage models -----------------------------------

def test_a_pull_of_a_served_model_is_ollamas_success_and_asks_nothing_but_the_list(fake,
                                                                                   proxy):
    client = ollama.Client(host=proxy.url, timeout=20)
    assert client.pull(MODEL).status == "success"  # as config_flow's download step calls it
    assert [part.status for part in client.pull(MODEL + ":latest", stream=True)] == [
        "pulling manifest", "verifying sha256 digest", "writing manifest", "success"]
    assert {r.path for r in fake.received} == {"/v1/models"}


def test_a_pull_of_a_model_the_upstream_does_not_serve_is_a_clear_404(fake, proxy):
    client = ollama.Client(host=proxy.url, timeout=20)
    for pull in (lambda: client.pull("llama3.2:latest"),
                 lambda: list(client.pull("llama3.2:latest", stream=True))):
        with pytest.raises(ollama.ResponseError) as refused:
            pull()
        assert refused.value.status_code == 404
        assert "'llama3.2:latest' is not one the upstream serves" in refused.value.error
        assert MODEL in refused.value.error


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api/pull"), ("POST", "/api/delete"), ("PUT", "/api/create"),
    ("HEAD", "/api/blobs/sha256:" + "ab" * 32), ("POST", "/api/blobs/sha256:" + "ab" * 32)])
def test_the_endpoints_that_manage_models_are_refused_without_the_upstream(fake, proxy,
                                                                           method, path):
    answer = requests.request(method, proxy.url + path, data=b"\0" * 1_000_000, timeout=20)
    assert answer.status_code == 400
    if method != "HEAD":
        assert "the models here are the upstream server's" in answer.json()["error"]
    assert fake.received == []


# --- the prefix cache across turns ------------------------------------------------------------

def test_with_stable_prefix_two_turns_a_minute_apart_share_the_prompt_upstream(fake,
                                                                                start_proxy):
    fake.answer(Answer(body=vllm_completion("Done.")))
    proxy = start_proxy(models={MODEL: {"stable_prefix": True}})
    plain = start_proxy()
    for at, host in (("12:00:00", proxy), ("12:01:00", proxy), ("12:00:00", plain),
                     ("12:01:00", plain)):
        _chat(host, [{"role": "system", "content": prompt_2025(at, "2026-11-20", "Kitchen")},
                     {"role": "user", "content": "turn on the light"}])
    sent = [r.json["messages"][0]["content"] for r in fake.chat_requests()]
    moved, kept = sent[:2], sent[2:]
    assert kept == [prompt_2025(at, "2026-11-20", "Kitchen") for at in ("12:00:00",
                                                                          "12:01:00")]
    assert kept[0][:shared(*kept)] == "Current time is 12:0"
    common = moved[0][:shared(*moved)]
    assert common.startswith("You are a voice assistant")
    assert "Static Context" in common
    assert moved[0].endswith("Current time is 12:00:00. Today's date is 2026-11-20.\n"
                             + area_line("Kitchen") + "\n" + NO_TIMERS + "\n")


# --- Home Assistant 2026's llama_cpp integration: Chat Completions on the proxy's /v1 ---------
# Its module imports Home Assistant's core (2026.3 and later need Python 3.14): its calls
# are made here as components/llama_cpp/api.py and entity.py make them, with the official
# `openai` SDK: the model list, the setup's validation turn (a tool, `max_tokens`, streamed
# and not), then a turn with the tools in OpenAPI 3.1 style, whole (the SDK keeps them).

@pytest.mark.parametrize("streaming", [False, True])
def test_home_assistants_llama_cpp_integration_on_the_v1_base_url(fake, proxy, streaming):
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-no-key-required",
                           max_retries=0, timeout=20)
    assert [model.id for model in client.models.list()] == [MODEL]
    test_tool = {"type": "function", "function": {
        "name": "test_function", "description": "Test function.",
        "parameters": {"type": "object", "properties": {}}}}
    fake.answer(Answer(body=vllm_completion("Paris.")))
    validated = client.chat.completions.create(
        model=MODEL, max_tokens=10, stream=streaming, tools=[test_tool], messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"}])
    if streaming:
        list(validated)
    arguments = {"item": "milk", "color": None, "labels": ["dairy"]}
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "todo__HassListAddItem", "arguments": '
        f"{orjson.dumps(arguments).decode()}}}</tool_call>")))
    turn = client.chat.completions.create(
        model=MODEL, messages=[{"role": "system", "content": SYSTEM},
                               {"role": "user", "content": "add milk to the list"}],
        tools=[TURN_ON, ADD_ITEM], max_tokens=3000, top_p=1.0, temperature=1.0,
        user="01JC0NVERSATION", stream=streaming)
    if streaming:
        calls: dict[int, list[str]] = {}
        for chunk in turn:
            for call in (chunk.choices[0].delta.tool_calls or ()) if chunk.choices else ():
                calls.setdefault(call.index, [call.function.name or "", ""])
                calls[call.index][1] += call.function.arguments or ""
        said = [(name, orjson.loads(args)) for name, args in calls.values()]
    else:
        said = [(c.function.name, orjson.loads(c.function.arguments))
                for c in turn.choices[0].message.tool_calls]
    assert said == [("todo__HassListAddItem", arguments)]
    assert fake.chat_requests()[-1].json["tools"][1] == ADD_ITEM
