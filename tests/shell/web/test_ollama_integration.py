"""Ollama's API through the real proxy before the fake vLLM, read by the official `ollama`
Python client (Home Assistant's transport): the models, a chat with tools streamed and not,
tool results sent back as Home Assistant and the client send them, thinking, `format`,
generate, embeddings, errors before and inside the stream, the endpoints that manage
models, keys, heartbeats, and the probe sequence VS Code Copilot's Ollama provider runs."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import Any

import httpx
import ollama
import openai
import orjson
import pytest
import requests

from tests.conftest import RunningProxy
from tests.fake_vllm import (
    MODEL,
    Answer,
    vllm_completion,
    vllm_error,
    vllm_stream_of,
    vllm_text_completion,
    vllm_tool_call,
)
from tests.fakes.ollama import FakeOllama

pytestmark = pytest.mark.integration

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TEXT_CALL = ('Let me check.<tool_call>{"name": "get_weather", "arguments": '
             '{"city": "Paris",}}</tool_call>')
HI = [{"role": "user", "content": "Weather in Paris?"}]


def client(proxy: RunningProxy, **headers: str) -> ollama.Client:
    return ollama.Client(host=proxy.url, timeout=20, headers=headers or None)


def test_list_show_and_ps_are_the_upstreams_models(fake, proxy):
    ollama_client = client(proxy)
    (listed,) = ollama_client.list().models
    assert listed.model == MODEL
    assert listed.details.family == "qwen3"
    for name in (MODEL, MODEL + ":latest"):
        shown = ollama_client.show(name)
        assert shown.modelinfo["qwen3.context_length"] == 32768  # vLLM's max_model_len
        assert "tools" in shown.capabilities
    (loaded,) = ollama_client.ps().models
    assert (loaded.model, loaded.context_length) == (MODEL, 32768)
    with pytest.raises(ollama.ResponseError) as missing:
        ollama_client.show("llama3")
    assert missing.value.status_code == 404
    assert fake.chat_requests() == []


def test_a_client_polling_the_models_asks_upstream_once_a_moment(fake, proxy):
    def listings() -> int:
        return sum(r.path == "/v1/models" for r in fake.received)

    polling = client(proxy, authorization="Bearer one")
    for _ in range(3):  # Home Assistant's list, show, ps: one model list read upstream
        (listed,) = polling.list().models
        assert listed.model == MODEL
        polling.show(MODEL)
        polling.ps()
    assert listings() == 1
    (listed,) = client(proxy, authorization="Bearer two").list().models  # another key's:
    assert listed.model == MODEL                                        # asked on its own
    assert listings() == 2


def test_a_model_list_older_than_its_moment_is_asked_again(fake, proxy, monkeypatch):
    from proxy.shell.web import handlers

    monkeypatch.setattr(handlers, "MODELS_SECONDS", 0.0)
    polling = client(proxy)
    polling.list()
    fake.model = "qwen3-next"  # the upstream now serves another model: the next poll says so
    (listed,) = polling.list().models
    assert listed.model == "qwen3-next"
    assert sum(r.path == "/v1/models" for r in fake.received) == 2


def test_a_tool_call_written_as_text_arrives_whole_streamed_and_not(fake, proxy):
    fake.answer(Answer(body=vllm_completion(TEXT_CALL, reasoning="The user wants weather.")))
    ollama_client = client(proxy)
    whole = ollama_client.chat(MODEL, HI, tools=[WEATHER], stream=False)
    assert whole.message.content == "Let me check."
    assert whole.message.thinking == "The user wants weather."
    (call,) = whole.message.tool_calls
    assert (call.function.name, call.function.arguments) == ("get_weather", {"city": "Paris"})
    assert (whole.done, whole.done_reason, whole.prompt_eval_count) == (True, "stop", 31)

    parts = list(ollama_client.chat(MODEL, HI, tools=[WEATHER], stream=True))
    assert [part.done for part in parts][-1] is True
    assert sum(part.done for part in parts) == 1
    assert "".join(part.message.content for part in parts) == "Let me check."
    calls = [call for part in parts for call in part.message.tool_calls or ()]
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        ("get_weather", {"city": "Paris"})]
    assert parts[-1].message.tool_calls is None  # the calls come in a line before the last
    sent = fake.chat_requests()[-1].json
    assert sent["stream"] is False
    assert sent["tools"] == [WEATHER]


def _paused_once_written(completion: dict[str, Any], marker: str,
                         ) -> tuple[Answer, threading.Event]:
    """The completion streamed as vLLM streams it, paused (until the Event) once its content
    so far holds `marker`."""
    events = vllm_stream_of(completion, size=6)
    resume, written = threading.Event(), ""
    for at, event in enumerate(events):
        if event.startswith(b"data: {"):
            for choice in orjson.loads(event.removeprefix(b"data: "))["choices"]:
                written += choice["delta"].get("content") or ""
        if marker in written:
            return Answer(chunks=events, pauses={at: resume}), resume
    raise AssertionError(f"{marker!r} is never written")


def test_in_the_streamed_mode_text_flows_and_the_call_arrives_whole(fake, start_proxy):
    proxy = start_proxy(stream_mode="stream", thinking_opened_by_template="false")
    answer, resume = _paused_once_written(
        vllm_completion("Let me look that up, it takes a moment. " + TEXT_CALL), "moment")
    fake.answer(answer)
    parts: queue.Queue = queue.Queue()

    def read() -> None:
        try:
            for part in client(proxy).chat(MODEL, HI, tools=[WEATHER], stream=True):
                parts.put(part)
        finally:
            parts.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        while not (part := parts.get(timeout=20)).message.content:
            pass
        assert not resume.is_set()  # text came while upstream was still writing
        assert "Let me look".startswith(part.message.content[:11])
    finally:
        resume.set()
    rest = [part, *iter(lambda: parts.get(timeout=20), None)]
    assert "".join(p.message.content for p in rest).endswith("takes a moment. Let me check.")
    calls = [call for p in rest for call in p.message.tool_calls or ()]
    assert [c.function.arguments for c in calls] == [{"city": "Paris"}]
    assert fake.chat_requests()[-1].json["stream"] is True


@pytest.mark.parametrize("names", [True, False], ids=["tool_name", "home_assistant"])
def test_a_tool_result_goes_back_answering_its_call(fake, proxy, names):
    """The client's own result message (`tool_name`), and Home Assistant's (neither a name
    nor an id, its assistant call without an id): the upstream gets chat's pairing."""
    fake.answer(Answer(body=vllm_completion(None, tool_calls=[
        vllm_tool_call("get_weather", '{"city": "Paris"}')], finish_reason="tool_calls")))
    ollama_client = client(proxy)
    first = ollama_client.chat(MODEL, HI, tools=[WEATHER], stream=False)
    (call,) = first.message.tool_calls
    assistant = ollama.Message(role="assistant", content="", tool_calls=[
        ollama.Message.ToolCall(function=ollama.Message.ToolCall.Function(
            name=call.function.name, arguments=call.function.arguments))])
    result = ollama.Message(role="tool", content='{"data": "sunny"}',
                            **({"tool_name": "get_weather"} if names else {}))
    fake.answer(Answer(body=vllm_completion("It is sunny in Paris.")))
    answer = ollama_client.chat(MODEL, [*HI, assistant, result], tools=[WEATHER],
                                stream=False)
    assert answer.message.content == "It is sunny in Paris."
    sent = fake.chat_requests()[-1].json["messages"]
    assert sent[1]["tool_calls"][0]["function"] == {"name": "get_weather",
                                                    "arguments": '{"city":"Paris"}'}
    assert sent[2] == {"role": "tool", "tool_call_id": sent[1]["tool_calls"][0]["id"],
                       "content": '{"data": "sunny"}'}


def test_thinking_and_the_think_switch(fake, proxy):
    fake.answer(Answer(body=vllm_completion("4.", reasoning="2 and 2.")))
    ollama_client = client(proxy)
    answer = ollama_client.chat(MODEL, HI, think="high", stream=False)
    assert (answer.message.thinking, answer.message.content) == ("2 and 2.", "4.")
    assert fake.chat_requests()[-1].json["chat_template_kwargs"] == {"enable_thinking": True}
    assert fake.chat_requests()[-1].json["reasoning_effort"] == "high"
    ollama_client.chat(MODEL, HI, think=False, stream=False)
    assert fake.chat_requests()[-1].json["chat_template_kwargs"] == {"enable_thinking": False}


def test_format_is_a_structured_output_never_read_as_a_call(fake, proxy):
    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "arguments": {"type": "object"}}}
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    fake.answer(Answer(body=vllm_completion(text)))
    answer = client(proxy).chat(MODEL, HI, tools=[WEATHER], format=schema, stream=False)
    assert answer.message.content == text
    assert answer.message.tool_calls is None
    sent = fake.chat_requests()[-1].json
    assert sent["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "format", "schema": schema}}
    client(proxy).chat(MODEL, HI, format="json", stream=False)
    assert fake.chat_requests()[-1].json["response_format"] == {"type": "json_object"}


def test_generate_streamed_and_not(fake, proxy):
    fake.answer(Answer(body=vllm_completion("Blue.", reasoning="Sky.")))
    ollama_client = client(proxy)
    whole = ollama_client.generate(MODEL, "Sky colour?", system="One word.",
                                   options={"num_predict": 8, "temperature": 0})
    assert (whole.response, whole.thinking, whole.done_reason) == ("Blue.", "Sky.", "stop")
    sent = fake.chat_requests()[-1].json
    assert sent["messages"] == [{"role": "system", "content": "One word."},
                                {"role": "user", "content": "Sky colour?"}]
    assert (sent["max_tokens"], sent["temperature"]) == (8, 0)
    parts = list(ollama_client.generate(MODEL, "Sky colour?", stream=True))
    assert "".join(part.response for part in parts) == "Blue."


def test_generate_without_the_template_is_the_upstreams_completion(fake, proxy, log_lines):
    fake.answer(lambda received: Answer(body=vllm_text_completion(" 1\n")) if received.path
                == "/v1/completions" else vllm_error(404, "no chat here"))
    ollama_client = client(proxy)
    whole = ollama_client.generate(MODEL, "def f():\n    return", raw=True,
                                   options={"num_predict": 4})
    assert (whole.response, whole.done_reason, whole.eval_count) == (" 1\n", "stop", 5)
    sent = fake.received[-1]
    assert (sent.path, sent.json["prompt"], sent.json["max_tokens"]) == (
        "/v1/completions", "def f():\n    return", 4)
    parts = list(ollama_client.generate(MODEL, "def f(", suffix="    return 1", stream=True))
    assert "".join(part.response for part in parts) == " 1\n"
    assert fake.received[-1].json["suffix"] == "    return 1"
    assert [(line["front"], line["mode"]) for line in log_lines(2)] == [
        ("ollama", "exchange")] * 2
    fake.answer(vllm_error(400, "suffix is not currently supported"))  # vLLM's own words
    with pytest.raises(ollama.ResponseError) as refused:
        ollama_client.generate(MODEL, "def f(", suffix="    return 1")
    assert (refused.value.status_code, refused.value.error) == (
        400, "suffix is not currently supported")


def test_embeddings_are_the_upstreams(fake, proxy):
    fake.embeddings = True  # a vLLM serving an embedding model
    ollama_client = client(proxy)
    embedded = ollama_client.embed(MODEL, ["a b", "c"])
    assert len(embedded.embeddings) == 2
    assert embedded.prompt_eval_count == 5
    assert fake.received[-1].path == "/v1/embeddings"
    assert len(ollama_client.embeddings(MODEL, "a b").embedding) == 4
    fake.embeddings = False  # a vLLM of a chat model: FastAPI's 404 for a route it lacks
    fake.answer(Answer(status=404, body={"detail": "Not Found"}))
    with pytest.raises(ollama.ResponseError) as none:
        ollama_client.embed(MODEL, "a")
    assert none.value.status_code == 404
    assert "serves no embeddings" in none.value.error


@pytest.mark.parametrize("manage", [
    lambda c: c.push("me/llama3"),
    lambda c: c.create("mine", from_="llama3"), lambda c: c.copy("a", "b"),
    lambda c: c.delete("llama3")], ids=["push", "create", "copy", "delete"])
def test_managing_models_says_the_models_are_the_upstreams(fake, proxy, manage):
    with pytest.raises(ollama.ResponseError) as refused:
        manage(client(proxy))
    assert refused.value.status_code == 400
    assert "the models here are the upstream server's" in refused.value.error
    assert fake.received == []


def test_an_upstream_error_before_the_stream_keeps_its_status(fake, proxy):
    fake.answer(vllm_error(404, f"The model `{MODEL}x` does not exist.", "NotFoundError"))
    with pytest.raises(ollama.ResponseError) as refused:
        client(proxy).chat(MODEL + "x", HI, tools=[WEATHER], stream=False)
    assert refused.value.status_code == 404
    assert refused.value.error == f"The model `{MODEL}x` does not exist."
    parts = client(proxy).chat(MODEL + "x", HI, tools=[WEATHER], stream=True)
    with pytest.raises(ollama.ResponseError) as refused:
        next(iter(parts))
    assert refused.value.status_code == 404


def test_a_bad_request_is_a_400_naming_the_field_in_ollamas_envelope(fake, proxy):
    response = requests.post(proxy.url + "/api/chat", timeout=20, data=orjson.dumps(
        {"model": MODEL, "messages": HI, "options": {"temperature": "warm"}}))
    assert response.status_code == 400
    assert response.json() == {"error": "options.temperature: expected a number."}
    assert fake.received == []


def test_an_error_after_the_stream_started_is_an_error_line_the_client_raises(fake,
                                                                               start_proxy):
    proxy = start_proxy(commit_window_seconds=0.01, heartbeat_seconds=0.05)
    fake.answer(lambda received: Answer(status=500, delay=0.5, body={"error": {
        "message": "engine died", "type": "InternalServerError", "param": None, "code": 500}}))
    seen: list[Any] = []

    def read() -> None:
        seen.extend(client(proxy).chat(MODEL, HI, tools=[WEATHER], stream=True))

    with pytest.raises(ollama.ResponseError) as failed:
        read()
    assert failed.value.error == "engine died"
    assert seen  # the stream had started: the error came as its last line
    assert all(part.message.content == "" and not part.done for part in seen)


def test_heartbeats_keep_the_client_reading_and_add_nothing(fake, start_proxy, log_lines):
    proxy = start_proxy(commit_window_seconds=0.01, heartbeat_seconds=0.05, log_level="info")
    release = threading.Event()

    def answer(received: Any) -> Answer:
        release.wait(10)
        return Answer(body=vllm_completion(TEXT_CALL))

    fake.answer(answer)
    parts = []
    for part in client(proxy).chat(MODEL, HI, tools=[WEATHER], stream=True):
        parts.append(part)
        if len(parts) == 4:  # the head and three heartbeats: the model may answer now
            release.set()
    assert all(part.message.content == "" for part in parts[:4])
    assert "".join(part.message.content for part in parts) == "Let me check."
    assert [c.function.arguments for p in parts for c in p.message.tool_calls or ()] == [
        {"city": "Paris"}]
    (line,) = log_lines(1)
    assert line["heartbeats"] >= 3
    assert (line["front"], line["path"], line["status"]) == ("ollama", "/api/chat", 200)


def test_keys_are_asked_of_ollamas_clients_too(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-home"])
    with pytest.raises(ollama.ResponseError) as refused:
        client(proxy).list()
    assert refused.value.status_code == 401
    assert isinstance(orjson.loads(httpx.get(proxy.url + "/api/tags").content)["error"], str)
    assert client(proxy, Authorization="Bearer sk-home").list().models[0].model == MODEL


def test_the_metrics_and_the_status_page_count_the_front(fake, proxy):
    client(proxy).chat(MODEL, HI, stream=False)
    metrics = requests.get(proxy.url + "/proxy/metrics", timeout=20).text
    assert 'front="ollama"' in metrics
    turns = requests.get(proxy.url + "/proxy/status.json", timeout=20).json()["turns"]
    assert any(turn.get("front") == "ollama" for turn in turns)


def test_copilots_probe_sequence_then_chat_completions_on_the_same_base_url(fake, proxy):
    """VS Code Copilot's Ollama provider: the version (each part a number, at least
    0.6.4), the tags, `show` for each model (its `<architecture>.context_length`), then
    OpenAI's chat completions on the same base URL with the listed name."""
    headers = {"User-Agent": "GitHubCopilotChat/0.33.0"}
    version = requests.get(proxy.url + "/api/version", headers=headers, timeout=20).json()
    assert [int(part) for part in version["version"].split(".")] >= [0, 6, 4]
    models = requests.get(proxy.url + "/api/tags", headers=headers, timeout=20).json()["models"]
    for listed in models:
        info = requests.post(proxy.url + "/api/show", json={"model": listed["model"]},
                             headers=headers, timeout=20).json()
        architecture = info["model_info"]["general.architecture"]
        assert info["model_info"][f"{architecture}.context_length"] == 32768
        assert info["model_info"]["general.basename"]
        assert "tools" in info["capabilities"]
    fake.answer(Answer(body=vllm_completion(TEXT_CALL)))
    copilot = openai.OpenAI(base_url=proxy.url + "/v1", api_key="ollama", max_retries=0)
    answer = copilot.chat.completions.create(model=models[0]["model"], messages=HI,
                                             tools=[WEATHER])
    (call,) = answer.choices[0].message.tool_calls
    assert call.function.arguments == '{"city":"Paris"}'  # the trailing comma repaired
    assert fake.chat_requests()[-1].json["model"] == MODEL


@pytest.mark.parametrize("path", ["/api/chat", "/api/embed", "/api/show"])
def test_a_body_over_the_limit_is_a_413_in_ollamas_envelope(fake, start_proxy, path):
    proxy = start_proxy(max_body_bytes=1024)
    response = requests.post(proxy.url + path, timeout=20, json={
        "model": MODEL, "input": "x", "messages": [{"role": "user", "content": "x" * 4096}]})
    assert response.status_code == 413
    assert "max_body_bytes" in response.json()["error"]
    assert fake.received == []


def test_an_upstream_that_cannot_be_reached_is_a_502_in_ollamas_envelope(start_proxy):
    proxy = start_proxy(upstream="http://127.0.0.1:9", connect_timeout_seconds=2)
    with pytest.raises(ollama.ResponseError) as listing:
        client(proxy).list()
    assert listing.value.status_code == 502
    with pytest.raises(ollama.ResponseError) as chatting:
        client(proxy).chat(MODEL, HI, stream=False)
    assert chatting.value.status_code == 502


def test_per_model_settings_apply_to_the_name_without_its_latest_tag(fake, start_proxy):
    proxy = start_proxy(models={MODEL: {"messages_thinking_switch": "thinking"}})
    client(proxy).chat(MODEL + ":latest", HI, think=True, stream=False)
    assert fake.chat_requests()[-1].json["chat_template_kwargs"] == {"thinking": True}


def test_a_context_window_above_the_upstreams_is_said_once_in_the_log(fake, proxy, caplog):
    caplog.set_level(logging.WARNING, logger="toolcall_proxy")
    ollama_client = client(proxy)
    # Home Assistant sends it on every turn; other windows above it are not said again
    for num_ctx in (65536, 65536, 8192, 65536, 131072, 40000):
        ollama_client.chat(MODEL, HI, options={"num_ctx": num_ctx}, stream=False)
    said = [r.getMessage() for r in caplog.records if "context window" in r.getMessage()]
    assert said == [f"model {MODEL}: a client asks for a context window of 65536 tokens; "
                    "the upstream's is 32768 (set where it runs, e.g. vLLM's --max-model-len)"]
    assert all("num_ctx" not in r.json for r in fake.chat_requests())
    assert len([r for r in fake.received if r.path == "/v1/models"]) == 1  # read once


def test_loading_and_unloading_a_model_is_answered_without_the_upstream(fake, proxy,
                                                                        log_lines):
    ollama_client = client(proxy)
    loaded = ollama_client.chat(MODEL, [], stream=False)
    assert (loaded.done, loaded.done_reason) == (True, "load")
    unloaded = ollama_client.generate(MODEL, keep_alive=0)
    assert (unloaded.done, unloaded.done_reason) == (True, "unload")
    assert fake.received == []
    assert [(line["front"], line["mode"]) for line in log_lines(2)] == [
        ("ollama", "answered")] * 2


def test_show_says_thinking_of_a_model_whose_template_opens_it(fake, start_proxy):
    proxy = start_proxy(models={MODEL: {"thinking_opened_by_template": "true"}})
    assert "thinking" in client(proxy).show(MODEL).capabilities
    plain = start_proxy()
    assert "thinking" not in client(plain).show(MODEL).capabilities


def test_home_assistants_turn_through_the_async_client(fake, proxy):
    """Home Assistant's Ollama integration, as its conversation entity talks: the async
    client, `stream=True`, its tools, `keep_alive` as seconds, `options.num_ctx`, `think`
    unset; the stream's deltas added up as it adds them (role first, content, thinking and
    calls as they come), then its tool result sent back without a name or an id, and its
    assistant call without an id."""
    light = {"type": "function", "function": {
        "name": "HassTurnOn", "description": "Turns on a device",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}},
                       "required": []}}}
    text_call = ('<tool_call>{"name": "HassTurnOn", "arguments": {"name": "kitchen light",}}'
                 "</tool_call>")
    fake.answer(lambda received: Answer(body=vllm_completion(
        "The kitchen light is on." if received.json["messages"][-1]["role"] == "tool"
        else text_call, reasoning="Turn it on.")))

    async def conversation() -> tuple[dict[str, Any], dict[str, Any]]:
        ha = ollama.AsyncClient(host=proxy.url, timeout=20)
        history = [ollama.Message(role="system", content="You control a house."),
                   ollama.Message(role="user", content="Turn on the kitchen light")]

        async def turn() -> dict[str, Any]:
            said: dict[str, Any] = {"content": "", "thinking": "", "tool_calls": []}
            async for response in await ha.chat(
                    model=MODEL, messages=list(history), tools=[light], stream=True,
                    keep_alive="300s", options={"num_ctx": 8192}, think=None, format=None):
                message = response["message"]
                said["content"] += message.get("content") or ""
                said["thinking"] += message.get("thinking") or ""
                said["tool_calls"] += [(call["function"]["name"], call["function"]["arguments"])
                                       for call in message.get("tool_calls") or ()]
            return said

        first = await turn()
        history.append(ollama.Message(role="assistant", content=first["content"],
                                      thinking=first["thinking"], tool_calls=[
            ollama.Message.ToolCall(function=ollama.Message.ToolCall.Function(
                name=name, arguments=arguments)) for name, arguments in first["tool_calls"]]))
        history.append(ollama.Message(role="tool", content='{"data": {"success": [1]}, '
                                                           '"error": null}'))
        return first, await turn()

    first, second = asyncio.run(conversation())
    assert first == {"content": "", "thinking": "Turn it on.",
                     "tool_calls": [("HassTurnOn", {"name": "kitchen light"})]}
    assert second["content"] == "The kitchen light is on."
    sent = fake.chat_requests()[-1].json["messages"]
    assert sent[2]["reasoning"] == "Turn it on."
    assert sent[3]["tool_call_id"] == sent[2]["tool_calls"][0]["id"]
    assert sent[3]["content"] == '{"data": {"success": [1]}, "error": null}'


def test_the_front_answers_in_the_shapes_the_fake_ollama_answers(fake, proxy):
    """Against the fake Ollama (tests/fakes/ollama.py, its own reading of Ollama's source),
    the proxy's answers hold every field Ollama's hold, of the same types (but the two
    durations the upstream cannot say, left out as Ollama leaves out its zeros)."""
    real = FakeOllama(models=(MODEL,))
    try:
        def both(method: str, path: str, body: Any = None) -> tuple[Any, Any]:
            return tuple(requests.request(method, url + path, json=body, timeout=20).json()
                         for url in (real.url, proxy.url))

        def same_shape(theirs: Any, ours: Any, where: str = "") -> None:
            assert type(ours) is type(theirs) or {type(ours), type(theirs)} <= {int, float}, (
                where, theirs, ours)
            if isinstance(theirs, dict):
                unsaid = {"load_duration", "prompt_eval_duration", "general.parameter_count"}
                assert set(theirs) - unsaid <= set(ours), (where, set(theirs) - set(ours))
                for key in set(theirs) & set(ours):
                    same_shape(theirs[key], ours[key], f"{where}.{key}")

        ollama_tags, our_tags = both("GET", "/api/tags")
        same_shape(ollama_tags["models"][0], our_tags["models"][0], "tags")
        same_shape(*both("GET", "/api/version"), "version")
        same_shape(*both("POST", "/api/show", {"model": MODEL}), "show")
        chat = {"model": MODEL, "messages": HI, "stream": False}
        same_shape(*both("POST", "/api/chat", chat), "chat")
        assert both("POST", "/api/show", {"model": "nope"})[0].keys() == {"error"}
        assert both("POST", "/api/show", {"model": "nope"})[1].keys() == {"error"}
    finally:
        real.close()
