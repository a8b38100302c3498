"""The fake Ollama says who it is as Ollama does, takes `format` natively and `response_format`
(json_object, json_schema) on its OpenAI-compatible route, drops every other response format
and `tool_choice` without a word, and answers in its shapes, read back by the official OpenAI
SDK. Each rule cites the Ollama source it copies (ollama/ollama, newest snapshot read)."""

from __future__ import annotations

import openai
import orjson
import pytest
import requests

from tests.fakes.constraints import Constraint, fit_errors
from tests.fakes.helpers import TOOLS, USER, parameters_of, sdk
from tests.fakes.models import calls, never_calls_unless_constrained, says, thinks
from tests.fakes.ollama import MODEL, FakeOllama
from tests.fakes.schema import schema_errors
from tests.fakes.template import ChatTemplate

SEARCH = parameters_of("search")
PROSE = "I would rather describe what to do."


@pytest.fixture
def ollama(serve):
    fake = serve(FakeOllama)
    fake.behave(never_calls_unless_constrained())
    return fake


def _native(fake, **fields):
    return requests.post(fake.url + "/api/chat", timeout=5,
                         json={"model": MODEL, "messages": USER, "stream": False, **fields})


def test_version_show_and_tags_say_who_it_is(serve):
    fake = serve(FakeOllama, context_length=40960, template=ChatTemplate(opens_thinking=True))
    # server/routes.go: GET /api/version → {"version"}
    assert requests.get(fake.url + "/api/version", timeout=5).json() == {"version": "0.13.4"}
    # ShowHandler: model_info["<architecture>.context_length"], the template, capabilities
    shown = requests.post(fake.url + "/api/show", timeout=5, json={"model": MODEL}).json()
    architecture = shown["model_info"]["general.architecture"]
    assert shown["model_info"][f"{architecture}.context_length"] == 40960
    assert "<think>" in shown["template"]
    assert "tools" in shown["capabilities"]
    missing = requests.post(fake.url + "/api/show", timeout=5, json={"model": "nope"})
    assert (missing.status_code, missing.json()) == (404, {"error": "model 'nope' not found"})
    assert requests.post(fake.url + "/api/show", timeout=5, json={}).json() == {
        "error": "model is required"}
    assert [m["model"] for m in requests.get(fake.url + "/api/tags", timeout=5).json()["models"]
            ] == [MODEL]
    assert [m.id for m in sdk(fake).models.list().data] == [MODEL]


@pytest.mark.parametrize(("response_format", "constraint"), [
    # openai/openai.go: FromChatRequest — json_object → format "json", json_schema → its schema
    ({"type": "json_object"}, Constraint("json_object")),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": SEARCH}},
     Constraint("json_schema", SEARCH)),
])
def test_response_format_becomes_format(ollama, response_format, constraint):
    content = sdk(ollama).chat.completions.create(
        model=MODEL, messages=USER, response_format=response_format).choices[0].message.content
    assert fit_errors(constraint, content) == []


def test_other_response_formats_and_tool_choice_are_dropped_without_a_word(ollama):
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "at_least_one": True,
                                                "triggers": ["<tool_call>"], "tags": []}}
    choice = sdk(ollama).chat.completions.create(
        model=MODEL, messages=USER, tools=TOOLS, tool_choice="required",
        extra_body={"response_format": tag}).choices[0]
    assert (choice.message.content, choice.message.tool_calls) == (PROSE, None)
    assert choice.finish_reason == "stop"


def test_the_native_format_takes_json_or_a_schema_and_refuses_the_rest(ollama):
    # llm/llama_server.go: "json" or a JSON Schema object
    assert fit_errors(Constraint("json_schema", SEARCH),
                      _native(ollama, format=SEARCH).json()["message"]["content"]) == []
    assert isinstance(orjson.loads(_native(ollama, format="json").json()["message"]["content"]),
                      dict)
    refused = _native(ollama, format="yaml")
    assert refused.status_code == 500
    assert refused.json()["error"].startswith('invalid format: "\\"yaml\\""')


def test_refusals_come_in_each_routes_shape(ollama):
    # middleware/openai.go: ChatMiddleware; openai.go NewError
    with pytest.raises(openai.BadRequestError) as empty:
        sdk(ollama).chat.completions.create(model=MODEL, messages=[])
    assert empty.value.body["message"] == "[] is too short - 'messages'"
    with pytest.raises(openai.NotFoundError) as missing:
        sdk(ollama).chat.completions.create(model="nope", messages=USER)
    assert missing.value.body["type"] == "not_found_error"
    assert _native(ollama, model="nope").json() == {"error": "model 'nope' not found"}


@pytest.mark.parametrize("stream", [False, True])
def test_calls_come_with_finish_tool_calls_and_object_arguments_natively(serve, stream):
    fake = serve(FakeOllama)
    fake.behave(thinks("Looking.", calls("read", {"path": "a.py"})))
    client = sdk(fake)
    if stream:
        chunks = list(client.chat.completions.create(model=MODEL, messages=USER, tools=TOOLS,
                                                     stream=True))
        (call,) = [c for chunk in chunks for ch in chunk.choices for c in ch.delta.tool_calls or ()]
        finish = [ch.finish_reason for chunk in chunks for ch in chunk.choices if ch.finish_reason]
    else:
        choice = client.chat.completions.create(model=MODEL, messages=USER, tools=TOOLS).choices[0]
        (call,), finish = choice.message.tool_calls, [choice.finish_reason]
        assert choice.message.model_extra["reasoning"] == "Looking."
    # openai.go: ToChatCompletion / FinishChunk — "tool_calls" when calls came
    assert finish == ["tool_calls"]
    assert (call.function.name, orjson.loads(call.function.arguments)) == ("read", {"path": "a.py"})
    native = _native(fake, tools=TOOLS).json()
    assert native["message"]["tool_calls"][0]["function"]["arguments"] == {"path": "a.py"}
    assert native["message"]["thinking"] == "Looking."
    assert native["done"] is True


def test_the_native_chat_streams_ndjson_by_default(ollama):
    response = requests.post(ollama.url + "/api/chat", timeout=5,
                             json={"model": MODEL, "messages": USER})
    lines = [orjson.loads(line) for line in response.content.splitlines()]
    assert response.headers["Content-Type"] == "application/x-ndjson"
    assert "".join(line["message"]["content"] for line in lines) == PROSE
    assert [line["done"] for line in lines][-2:] == [False, True]
    assert schema_errors(lines[-1]["eval_count"], {"type": "integer"}) == []


# -- a builtin parser's error (ROUTES: ChatHandler's parserErr; writeChatResponse) -------------

XML_CALL = "<tool_call>\n<function=read>\n<parameter=path>\na\n</parameter>\n</function>"


def test_a_builtin_parser_that_cannot_read_a_call_fails_the_turn_without_the_output(serve):
    fake = serve(lambda: FakeOllama(builtin_parser="qwen3-coder"))
    fake.behave(says(f"Look.\n{XML_CALL}"))
    native = requests.post(fake.url + "/api/chat", timeout=5, json={
        "model": MODEL, "messages": USER, "tools": TOOLS, "stream": False})
    assert (native.status_code, native.json()) == (
        500, {"error": "XML syntax error on line 1: unexpected EOF"})
    streamed = requests.post(fake.url + "/api/chat", timeout=5, json={
        "model": MODEL, "messages": USER, "tools": TOOLS})
    lines = [orjson.loads(line) for line in streamed.text.splitlines()]
    assert "".join(line.get("message", {}).get("content", "") for line in lines) == "Look.\n"
    assert lines[-1] == {"error": "XML syntax error on line 1: unexpected EOF"}
    with pytest.raises(openai.InternalServerError) as raised:
        sdk(fake).chat.completions.create(model=MODEL, messages=USER, tools=TOOLS)
    assert raised.value.body["message"] == "XML syntax error on line 1: unexpected EOF"
