"""A context window's refusal, read once (`turn.context_window`) and worded by each front:
OpenAI's code `context_length_exceeded` for chat and Responses clients (what Codex reads in
`response.failed` to stop retrying), Anthropic's "prompt is too long" for Messages clients,
for every phrasing the reader knows. Pure, through each front's own error rendering; the
last tests go through the real server."""

from __future__ import annotations

import anthropic
import openai
import orjson
import pytest

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.fronts import Incoming
from proxy.fronts.registry import front_for
from proxy.turn.context_window import refuses_window
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_error
from tests.turn.test_context_window import (
    PROMPT_ALONE,
    SGLANG,
    VLLM,
    VLLM_EARLIER,
    VLLM_OLDER,
    VLLM_PASSED,
    VLLM_PROMPT_ALONE,
)

CHAT, RESPONSES, MESSAGES = (front_for("POST", path) for path in
                             ("/v1/chat/completions", "/v1/responses", "/v1/messages"))
COUNTED = [VLLM, VLLM_PASSED, VLLM_PROMPT_ALONE, VLLM_EARLIER, VLLM_OLDER, SGLANG,
           *PROMPT_ALONE]
WITHOUT_COUNTS = ["This model's maximum context length is 32768 tokens.",
                  "the request exceeds the available context size, try increasing it",
                  "Input is longer than the model's context window."]
PHRASINGS = COUNTED + WITHOUT_COUNTS
OTHER_400S = ["context too long", "'max_tokens' must be at least 1, got 0.",
              "tools[0] must be a function tool with a name", ""]
PARAM = {"chat": "messages", "responses": "input"}


def _plan(front, body: dict):
    raw = orjson.dumps({"model": "m", "max_tokens": 64, "stream": True, **body})
    return front.parse(Incoming.post(front.path, raw), Config())


PLANS = {"chat": lambda: _plan(CHAT, {"messages": [{"role": "user", "content": "x"}],
                                      "tools": TOOLS}),
         "responses": lambda: _plan(RESPONSES, {"input": "x"}),
         "messages": lambda: _plan(MESSAGES, {"messages": [{"role": "user",
                                                           "content": "x"}]})}


def _sse_data(data: bytes) -> list[dict]:
    return [orjson.loads(line[6:]) for line in data.split(b"\n") if line.startswith(b"data: {")]


def test_the_reader_knows_each_phrasing_once():
    assert all(refuses_window(400, message) for message in PHRASINGS)
    assert not any(refuses_window(400, message) for message in OTHER_400S)
    assert not refuses_window(500, VLLM)  # only a refusal of the request (a 400)
    assert not refuses_window(429, PROMPT_ALONE[4])


@pytest.mark.parametrize("message", PHRASINGS)
@pytest.mark.parametrize("name", ["chat", "responses"])
def test_openai_fronts_answer_context_length_exceeded(name, message):
    front = {"chat": CHAT, "responses": RESPONSES}[name]
    rendered = front.error_response(ProxyError(400, message, type_="BadRequestError",
                                               code="400"))
    assert rendered.status == 400
    assert orjson.loads(rendered.body) == {"error": {
        "message": message, "type": "invalid_request_error", "param": PARAM[name],
        "code": "context_length_exceeded"}}


@pytest.mark.parametrize("message", PHRASINGS)
def test_codex_reads_context_length_exceeded_in_response_failed(message):
    writer = RESPONSES.stream_writer(PLANS["responses"]())
    events = _sse_data(writer.head() + writer.error(ProxyError(400, message, code="400")))
    failed = events[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"] == {"code": "context_length_exceeded",
                                           "message": message}


@pytest.mark.parametrize("message", PHRASINGS)
def test_a_chat_stream_carries_the_code_in_its_error_event(message):
    writer = CHAT.stream_writer(PLANS["chat"]())
    out = writer.head() + writer.error(ProxyError(400, message, code="400"))
    assert _sse_data(out)[-1]["error"]["code"] == "context_length_exceeded"
    assert out.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("message", PHRASINGS)
def test_claude_code_is_told_its_prompt_is_too_long(message):
    rendered = MESSAGES.error_response(ProxyError(400, message))
    error = orjson.loads(rendered.body)["error"]
    assert rendered.status == 400
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(("prompt is too long: ",
                                        "input length and `max_tokens` exceed context limit"))
    writer = MESSAGES.stream_writer(PLANS["messages"]())
    assert _sse_data(writer.error(ProxyError(400, message)))[-1]["error"] == error


@pytest.mark.parametrize("message", OTHER_400S)
@pytest.mark.parametrize("name", ["chat", "responses", "messages"])
def test_other_errors_keep_their_words_and_code(name, message):
    front = {"chat": CHAT, "responses": RESPONSES, "messages": MESSAGES}[name]
    error = ProxyError(400, message, code="400")
    body = orjson.loads(front.error_response(error).body)["error"]
    assert body["message"] == message
    assert body.get("code", "400") == "400"
    unrefused = orjson.loads(front.error_response(ProxyError(500, VLLM, code="500")).body)
    assert unrefused["error"]["message"] == VLLM
    assert unrefused["error"].get("code", "500") == "500"


# -- through the real server: llama.cpp's words, which the Responses front once missed -----

LLAMA_CPP = PROMPT_ALONE[4]


@pytest.mark.integration
def test_codex_and_claude_code_are_told_alike_by_the_server(fake, start_proxy):
    proxy = start_proxy(commit_window_seconds=0)
    fake.answer(vllm_error(400, LLAMA_CPP))
    with pytest.raises(openai.BadRequestError) as caught:
        proxy.client().responses.create(model="qwen", input="x")
    assert caught.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as caught:
        proxy.client().chat.completions.create(
            model="qwen", messages=[{"role": "user", "content": "x"}], tools=TOOLS)
    assert caught.value.code == "context_length_exceeded"
    claude = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                                 timeout=20)
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model="qwen", max_tokens=64,
                               messages=[{"role": "user", "content": "x"}])
    assert refused.value.body["error"]["message"] == (
        "prompt is too long: 40000 tokens > 32768 maximum")


@pytest.mark.integration
def test_codex_s_started_stream_fails_with_context_length_exceeded(fake, start_proxy):
    proxy = start_proxy(commit_window_seconds=0)
    answer = vllm_error(400, LLAMA_CPP)
    fake.answer(Answer(status=answer.status, body=answer.body, delay=0.3))
    stream = proxy.client().responses.create(model="qwen", input="x", stream=True)
    failed = [event for event in stream if event.type == "response.failed"]
    assert [event.response.error.code for event in failed] == ["context_length_exceeded"]
