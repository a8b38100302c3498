"""What Open WebUI 0.12.4 sends the Ollama front and what it reads of the answers, read from
its source (`open_webui/utils/payload.py` `convert_payload_openai_to_ollama` and
`apply_model_params_to_body_ollama`, `routers/ollama.py`, `utils/response.py`), through the
real proxy before the fake vLLM, without Open WebUI (tests/e2e/test_open_webui.py runs it):

- its tool loop's second request: the assistant's calls with `index`, `id` and `arguments`
  as an object beside an empty `content`, the result as `role: tool` with `tool_call_id`;
- a model's advanced params: `options` with what only Ollama takes (`num_ctx`, `use_mmap`,
  `num_thread`, `num_gpu`, `mirostat`, ...), `keep_alive` as a duration, `think`, `format`
  as a schema, and `system` copied to the top (which Ollama's chat has no field for);
- an image-only user message: `images` and no `content` at all;
- the reads: each streamed call's `function.index` (Open WebUI's streamed index, 0 when
  missing, so that two calls without one would merge into one), the calls' `id`s, `/api/ps`'s
  `expires_at` as `datetime.fromisoformat` reads it, `/api/tags`' `model` as the model's id."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

import orjson
import pytest
import requests

from tests.conftest import WEATHER_TOOL
from tests.fake_vllm import MODEL, Received, vllm_answer, vllm_completion

pytestmark = pytest.mark.integration

TWO_CALLS = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
             '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo",}}</tool_call>')
# A 1x1 PNG, as Open WebUI sends an image: the data URL's base64 part alone.
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()


def _chat(proxy: Any, body: dict[str, Any]) -> requests.Response:
    return requests.post(proxy.url + "/api/chat", json=body, timeout=20,
                         stream=bool(body.get("stream")))


def _lines(answer: requests.Response) -> list[dict[str, Any]]:
    """An NDJSON answer's objects, as Open WebUI's stream wrapper reads them (a line each)."""
    return [orjson.loads(line) for line in answer.iter_lines() if line]


def _tools_answer(received: Received) -> Any:
    if received.json.get("tools") and received.json["messages"][-1]["role"] == "user":
        return vllm_answer(vllm_completion(TWO_CALLS))(received)
    return vllm_answer(vllm_completion("Sunny in both."))(received)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_two_calls_each_have_an_index_and_an_id_open_webui_reads(fake, proxy, stream):
    """`convert_ollama_tool_call_to_openai`: `index` from the call (or its function), else
    0; `id` from the call, else one minted. Streamed, Open WebUI merges the deltas by index."""
    fake.answer(_tools_answer)
    answer = _chat(proxy, {"model": MODEL, "stream": stream, "tools": [WEATHER_TOOL],
                           "messages": [{"role": "user", "content": "Paris and Oslo?"}]})
    assert answer.status_code == 200, answer.text
    objects = _lines(answer) if stream else [answer.json()]
    calls = [call for line in objects for call in line["message"].get("tool_calls") or ()]
    assert [call["function"]["index"] for call in calls] == [0, 1]
    assert [call["function"]["arguments"] for call in calls] == [{"city": "Paris"},
                                                                 {"city": "Oslo"}]
    assert all(call["id"] for call in calls)
    assert calls[0]["id"] != calls[1]["id"]
    assert objects[-1]["done"] is True
    assert objects[-1]["done_reason"] == "stop"
    assert all(line["message"]["content"] == "" for line in objects if
               line["message"].get("tool_calls"))


def test_its_tool_loop_answers_each_call_by_its_id(fake, proxy):
    """The request Open WebUI sends after running the tools: the assistant's message as
    `convert_messages_openai_to_ollama` writes it (`content: ""`, calls with `index`, `id`,
    `arguments` an object), each result a `tool` message naming its call."""
    fake.answer(_tools_answer)
    answer = _chat(proxy, {"model": MODEL, "stream": True, "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Paris and Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"index": 0, "id": "call_a", "function": {"name": "get_weather",
                                                       "arguments": {"city": "Paris"}}},
            {"index": 1, "id": "call_b", "function": {"name": "get_weather",
                                                       "arguments": {"city": "Oslo"}}}]},
        {"role": "tool", "content": "Sunny in Oslo", "tool_call_id": "call_b"},
        {"role": "tool", "content": "Sunny in Paris", "tool_call_id": "call_a"}]})
    assert answer.status_code == 200, answer.text
    assert "".join(line["message"]["content"] for line in _lines(answer)) == "Sunny in both."
    sent = fake.chat_requests()[-1].json["messages"]
    assert [(c["id"], orjson.loads(c["function"]["arguments"])) for c in sent[1]["tool_calls"]
            ] == [("call_a", {"city": "Paris"}), ("call_b", {"city": "Oslo"})]
    assert sent[1]["content"] is None
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [
        ("call_b", "Sunny in Oslo"), ("call_a", "Sunny in Paris")]


def test_a_models_advanced_params_are_taken(fake, proxy, log_lines):
    """`apply_model_params_to_body_ollama` and the options a chat's controls set: the chat's
    own fields reach the upstream; what only Ollama takes is left out (and noted), the
    duration `keep_alive`, `think` and the top-level `system` do not make the turn fail."""
    fake.answer(vllm_answer(vllm_completion('{"sky": "clear"}')))
    schema = {"type": "object", "properties": {"sky": {"type": "string"}},
              "required": ["sky"]}
    answer = _chat(proxy, {
        "model": MODEL, "stream": False, "keep_alive": "5m", "think": False, "format": schema,
        "system": "You are terse.",
        "options": {"temperature": 0.2, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 7,
                    "num_predict": 64, "stop": ["\n\n"], "repeat_penalty": 1.1,
                    "num_ctx": 8192, "num_batch": 512, "num_keep": 4, "repeat_last_n": 64,
                    "mirostat": 0, "mirostat_eta": 0.1, "mirostat_tau": 5.0, "num_gpu": 1,
                    "use_mmap": True, "use_mlock": False, "num_thread": 4},
        "messages": [{"role": "user", "content": "Sky?"}]})
    assert answer.status_code == 200, answer.text
    assert orjson.loads(answer.json()["message"]["content"]) == {"sky": "clear"}
    sent = fake.chat_requests()[-1].json
    assert {key: sent[key] for key in ("temperature", "top_p", "top_k", "min_p", "seed",
                                       "max_tokens", "stop", "repetition_penalty")} == {
        "temperature": 0.2, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 7,
        "max_tokens": 64, "stop": ["\n\n"], "repetition_penalty": 1.1}
    assert sent["response_format"]["json_schema"]["schema"] == schema
    assert not {"num_ctx", "num_gpu", "use_mmap", "num_thread", "mirostat", "keep_alive",
                "system"} & set(sent)
    (line,) = [line for line in log_lines(1) if line["path"] == "/api/chat"]
    assert "ollama_options_left_out" in line["rewrites"]


def test_an_image_only_message_has_no_content_field(fake, proxy):
    """An image with no text: Open WebUI's message carries `images` and no `content`."""
    fake.answer(vllm_answer(vllm_completion("A dot.")))
    answer = _chat(proxy, {"model": MODEL, "stream": False,
                           "messages": [{"role": "user", "images": [PNG]}]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"]["content"] == "A dot."
    (part,) = fake.chat_requests()[-1].json["messages"][-1]["content"]
    assert part == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}


def test_the_model_list_reads_as_open_webui_reads_it(fake, proxy):
    """`get_all_models`: each model's `model` is its id (and what its chats name);
    `/api/ps`' `expires_at` is read by `datetime.fromisoformat` (Python 3.11 and later)."""
    tags = requests.get(proxy.url + "/api/tags", timeout=10).json()["models"]
    assert [(model["model"], model["name"]) for model in tags] == [(MODEL, MODEL)]
    loaded = requests.get(proxy.url + "/api/ps", timeout=10).json()["models"]
    (expires,) = [model["expires_at"] for model in loaded if model["model"] == MODEL]
    assert datetime.fromisoformat(expires).timestamp() > datetime.now().timestamp()
    assert requests.get(proxy.url + "/api/version", timeout=10).json() == {"version": "0.33.0"}
