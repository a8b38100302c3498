"""The Ollama front's two pure halves: an `/api/chat` or `/api/generate` body as the turn's
chat body, and the turn's result as Ollama's object or NDJSON lines (each line read as the
official `ollama` client reads it); its model endpoints made of the upstream's model cards,
and its embeddings."""

from __future__ import annotations

import base64
import re
from typing import Any

import ollama
import orjson
import pytest

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.fronts import Ask, Incoming, ModelCard, Reply
from proxy.fronts import ollama as front
from proxy.fronts.ollama import catalog, embed
from proxy.turn.plan import TurnPlan
from proxy.turn.result import Call, Choice, TurnResult, Usage
from tests.fake_vllm import vllm_text_completion

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object",
                                          "properties": {"city": {"type": "string"}}}}}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\0" * 16).decode()


def plan_of(body: dict[str, Any], path: str = front.CHAT_PATH, **settings: Any) -> TurnPlan:
    raw = orjson.dumps({"model": "qwen3", **body})
    return front.parse(Incoming.post(path, raw), Config(**settings))


def upstream(body: dict[str, Any], path: str = front.CHAT_PATH, **settings: Any) -> dict:
    return orjson.loads(plan_of(body, path, **settings).upstream_body)


def refusal(body: dict[str, Any], path: str = front.CHAT_PATH) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        plan_of(body, path)
    assert caught.value.status == 400
    return caught.value


HI = [{"role": "user", "content": "hi"}]


# --- the request ------------------------------------------------------------------------------


def test_a_chat_is_a_turn_that_streams_unless_told_not_to():
    plan = plan_of({"messages": HI})
    assert (plan.client_stream, plan.model) == (True, "qwen3")
    assert plan.front_data.model == "qwen3"
    assert upstream({"messages": HI})["stream"] is False  # buffered upstream, as every turn
    assert plan_of({"messages": HI, "stream": False}).client_stream is False


def test_the_latest_tag_is_the_bare_name_and_other_tags_stay():
    plan = plan_of({"model": "qwen3:latest", "messages": HI})
    assert orjson.loads(plan.upstream_body)["model"] == "qwen3"
    assert plan.front_data.model == "qwen3:latest"  # echoed as the client named it
    assert "ollama_latest_tag_dropped" in plan.rewrites
    assert upstream({"model": "qwen3:32b", "messages": HI})["model"] == "qwen3:32b"


def test_images_thinking_and_calls_of_the_history_in_chat_terms():
    messages = [
        {"role": "SYSTEM", "content": "Be brief."},
        {"role": "user", "content": "What is this?", "images": [PNG, JPEG]},
        {"role": "assistant", "content": "", "thinking": "A picture.",
         "tool_calls": [{"function": {"name": "get_weather",
                                      "arguments": {"city": "Oslo", "days": 2}}}]},
        {"role": "tool", "tool_name": "get_weather", "content": "sunny"},
    ]
    sent = upstream({"messages": messages, "tools": [WEATHER]})["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert [part["type"] for part in sent[1]["content"]] == ["image_url", "image_url", "text"]
    assert sent[1]["content"][0]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert sent[1]["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    url = f"data:image/webp;base64,{PNG}"  # a data URL already: as it is
    (part,) = upstream({"messages": [{"role": "user", "content": "", "images": [url]}]})[
        "messages"][0]["content"]
    assert part["image_url"]["url"] == url
    assert sent[2] == {"role": "assistant", "content": None, "reasoning": "A picture.",
                       "tool_calls": [{"id": "call_2_0", "type": "function", "function": {
                           "name": "get_weather", "arguments": '{"city":"Oslo","days":2}'}}]}
    assert sent[3] == {"role": "tool", "tool_call_id": "call_2_0", "content": "sunny"}


def test_tool_results_find_their_calls_by_id_by_name_or_in_order():
    calls = [{"id": "call_a", "function": {"name": "read", "arguments": {}}},
             {"function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
             {"function": {"name": "read", "arguments": {"path": "b"}}}]
    messages = [*HI, {"role": "assistant", "content": "", "tool_calls": calls},
                {"role": "tool", "content": "weather", "tool_name": "get_weather"},
                {"role": "tool", "content": "first"},  # Home Assistant: neither name nor id
                {"role": "tool", "content": "named", "tool_call_id": "call_1_2"},
                {"role": "tool", "content": "late"}]  # no open call is left
    sent = upstream({"messages": messages})["messages"]
    assert [call["id"] for call in sent[1]["tool_calls"]] == ["call_a", "call_1_1", "call_1_2"]
    assert sent[1]["tool_calls"][1]["function"]["arguments"] == '{"city":"Rome"}'
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [
        ("call_1_1", "weather"), ("call_a", "first"), ("call_1_2", "named"), ("call_5", "late")]


def test_the_same_history_goes_upstream_the_same_way_every_time():
    """Minted ids depend on the place in the conversation only: the prefix cache holds."""
    history = [*HI, {"role": "assistant", "content": "",
                     "tool_calls": [{"function": {"name": "read", "arguments": {}}}]},
               {"role": "tool", "content": "x"}]
    assert plan_of({"messages": history}).upstream_body == plan_of(
        {"messages": history}).upstream_body


@pytest.mark.parametrize(("value", "response_format"), [
    ("json", {"type": "json_object"}),
    ({"type": "object", "properties": {"a": {"type": "integer"}}},
     {"type": "json_schema", "json_schema": {"name": "format", "schema": {
         "type": "object", "properties": {"a": {"type": "integer"}}}}}),
    ("", None),
    (None, None),
])
def test_format_is_the_upstreams_structured_output(value, response_format):
    sent = upstream({"messages": HI, "format": value})
    assert sent.get("response_format") == response_format


@pytest.mark.parametrize("value", ["yaml", 3, ["json"], True])
def test_a_format_that_is_neither_json_nor_a_schema_is_refused(value):
    assert refusal({"messages": HI, "format": value}).param == "format"


def test_options_as_sampling_fields():
    sent = upstream({"messages": HI, "keep_alive": "5m", "options": {
        "num_predict": 64, "temperature": 0.2, "top_p": 0.9, "top_k": 20, "min_p": 0.05,
        "seed": 7, "stop": ["END", ""], "repeat_penalty": 1.1, "presence_penalty": 0.5,
        "frequency_penalty": 0.1, "num_ctx": 8192, "num_thread": 8}})
    assert {key: sent[key] for key in sent if key not in ("model", "messages", "stream")} == {
        "max_tokens": 64, "temperature": 0.2, "top_p": 0.9, "top_k": 20, "min_p": 0.05,
        "seed": 7, "stop": ["END"], "repetition_penalty": 1.1, "presence_penalty": 0.5,
        "frequency_penalty": 0.1}
    plan = plan_of({"messages": HI, "options": {"num_ctx": 8192, "num_thread": 8}})
    assert "ollama_options_left_out" in plan.rewrites
    assert plan.context_asked == 8192  # the upstream's window is its own: compared, not sent
    assert plan_of({"messages": HI}).context_asked is None


@pytest.mark.parametrize(("options", "absent"), [
    ({"num_predict": -1}, "max_tokens"), ({"num_predict": -2}, "max_tokens"),
    ({"seed": -1}, "seed"), ({"stop": []}, "stop"),
])
def test_ollamas_no_limit_and_random_seed_send_nothing(options, absent):
    assert absent not in upstream({"messages": HI, "options": options})


def test_a_single_stop_string_is_a_list():
    assert upstream({"messages": HI, "options": {"stop": "END"}})["stop"] == ["END"]


@pytest.mark.parametrize(("options", "param"), [
    ({"temperature": "hot"}, "options.temperature"), ({"top_k": 2.5}, "options.top_k"),
    ({"num_predict": True}, "options.num_predict"), ({"stop": [1]}, "options.stop"),
    ({"num_ctx": "big"}, "options.num_ctx"),
])
def test_an_option_of_the_wrong_type_is_a_400_naming_it(options, param):
    error = refusal({"messages": HI, "options": options})
    assert error.param == param
    assert error.message.startswith(param)


@pytest.mark.parametrize(("think", "switch", "effort"), [
    (True, True, None), (False, False, None), ("low", True, "low"), ("high", True, "high"),
    ("max", True, "high"),
])
def test_think_is_the_templates_switch_and_its_level_the_effort(think, switch, effort):
    plan = plan_of({"messages": HI, "think": think})
    sent = orjson.loads(plan.upstream_body)
    assert sent["chat_template_kwargs"] == {"enable_thinking": switch}
    assert sent.get("reasoning_effort") == effort
    assert plan.extraction.reasoning_shown  # thinking is Ollama's own field


@pytest.mark.parametrize("think", ["very", 1, [True]])
def test_another_think_is_refused(think):
    assert refusal({"messages": HI, "think": think}).param == "think"


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "bot", "content": "x"}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": ["x"]}]}, "messages.0.content"),
    ({"messages": [{"role": "user", "content": "x", "images": "abc"}]}, "messages.0.images"),
    ({"messages": [{"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": "a", "arguments": [1]}}]}]},
     "messages.0.tool_calls.0.function.arguments"),
    ({"messages": [{"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": "a", "arguments": "{oops"}}]}]},
     "messages.0.tool_calls.0.function.arguments"),
    ({"messages": [{"role": "tool", "content": "x", "tool_name": 3}]}, "messages.0.tool_name"),
    ({"messages": HI, "stream": "yes"}, "stream"),
    ({"messages": HI, "tools": {"a": 1}}, "tools"),
    ({"model": "", "messages": HI}, "model"),
])
def test_a_wrong_shape_is_a_400_naming_the_field(body, param):
    assert refusal(body).param == param


@pytest.mark.parametrize(("path", "body", "reason"), [
    (front.CHAT_PATH, {"messages": []}, "load"),
    (front.CHAT_PATH, {}, "load"),
    (front.CHAT_PATH, {"messages": [], "keep_alive": 0}, "unload"),
    (front.GENERATE_PATH, {}, "load"),
    (front.GENERATE_PATH, {"prompt": "", "keep_alive": "0s"}, "unload"),
])
def test_a_request_that_only_loads_the_model_is_answered_at_once(path, body, reason):
    """Ollama's way to load (or unload) a model: answered done, nothing asked upstream (the
    upstream keeps its model loaded)."""
    reply = front.parse(Incoming.post(path, orjson.dumps({"model": "qwen3", **body})),
                        Config())
    assert isinstance(reply, Reply)
    answer = orjson.loads(reply.body)
    assert (answer["done"], answer["done_reason"], answer["model"]) == (True, reason, "qwen3")
    kind = ollama.ChatResponse if path == front.CHAT_PATH else ollama.GenerateResponse
    assert kind(**answer).done


def test_generate_is_the_system_and_the_prompt_as_a_chat():
    plan = plan_of({"system": "Be brief.", "prompt": "Why?", "images": [PNG], "think": False,
                    "stream": False}, front.GENERATE_PATH)
    sent = orjson.loads(plan.upstream_body)
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [part["type"] for part in sent["messages"][1]["content"]] == ["image_url", "text"]
    assert plan.front_data.kind == "generate"


def _raw(body: dict[str, Any]) -> Ask:
    asked = front.parse(Incoming.post(front.GENERATE_PATH, orjson.dumps(
        {"model": "qwen3:latest", **body})), Config())
    assert isinstance(asked, Ask)
    return asked


def test_generate_without_the_template_is_one_call_to_the_upstreams_completions():
    asked = _raw({"prompt": "def f(", "suffix": "    return 1", "stream": False,
                  "options": {"temperature": 0, "stop": ["\n\n"]}})
    assert (asked.method, asked.path, asked.model) == ("POST", "/v1/completions", "qwen3")
    assert orjson.loads(asked.body) == {"model": "qwen3", "prompt": "def f(",
                                        "suffix": "    return 1", "max_tokens": None,
                                        "temperature": 0, "stop": ["\n\n"]}
    reply = asked.then(200, orjson.dumps(vllm_text_completion("x):", "length")))
    answer = orjson.loads(reply.body)
    assert (answer["model"], answer["response"], answer["done"], answer["done_reason"]) == (
        "qwen3:latest", "x):", True, "length")
    assert (answer["prompt_eval_count"], answer["eval_count"]) == (7, 5)
    assert ollama.GenerateResponse(**answer).response == "x):"


def test_a_raw_generate_streams_as_ndjson_lines():
    asked = _raw({"prompt": "<|im_start|>user", "raw": True})
    reply = asked.then(200, orjson.dumps(vllm_text_completion(" hi")))
    assert reply.content_type == "application/x-ndjson"
    parts = [ollama.GenerateResponse(**line) for line in lines(reply.body)]
    assert [(p.response, p.done) for p in parts] == [(" hi", False), ("", True)]
    assert "max_tokens" in orjson.loads(asked.body)  # null: as far as the window allows


@pytest.mark.parametrize(("status", "body", "code"), [
    (404, b'{"detail":"Not Found"}', "completions_unavailable"),
    (400, b'{"error": {"message": "suffix is not currently supported", "type": '
          b'"BadRequestError", "param": null, "code": 400}}', "400"),
    (200, b'{"choices": []}', "upstream_bad_shape"),
])
def test_an_upstream_without_completions_says_so(status, body, code):
    with pytest.raises(ProxyError) as caught:
        _raw({"prompt": "x", "raw": True}).then(status, body)
    assert caught.value.code == code


@pytest.mark.parametrize(("body", "param"), [
    ({"prompt": "x", "raw": True, "system": "Be brief."}, "system"),
    ({"prompt": "x", "raw": True, "context": [1, 2]}, "context"),
    ({"prompt": 3, "raw": True}, "prompt"),
    ({"prompt": "x", "suffix": ["y"]}, "suffix"),
    ({"prompt": "x", "raw": True, "images": [PNG]}, "images"),
    ({"prompt": "x", "raw": True, "stream": "no"}, "stream"),
    ({"prompt": "x", "raw": True, "options": {"top_p": "high"}}, "options.top_p"),
])
def test_a_raw_generate_ollama_refuses_is_refused(body, param):
    assert refusal(body, front.GENERATE_PATH).param == param


# --- the answer -------------------------------------------------------------------------------

CALLS = (Call("call_1", "get_weather", '{"city": "Oslo", "a": [1, 2]}'),
         Call("call_2", "read", "{}"))


def result_of(content: str | None = "Here.", reasoning: str | None = "Hmm.",
              calls: tuple[Call, ...] = CALLS, finish: str = "tool_calls") -> TurnResult:
    return TurnResult("c", 1, "qwen3", (Choice(0, content, reasoning, calls, finish),),
                      Usage(prompt_tokens=31, completion_tokens=9, total_tokens=40))


def test_the_whole_answer_is_ollamas_chat_response():
    plan = plan_of({"messages": HI, "stream": False})
    raw = front.render_json(plan, result_of())
    answer = orjson.loads(raw)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", answer.pop("created_at"))
    assert answer.pop("total_duration") == answer.pop("eval_duration") > 0
    assert answer == {"model": "qwen3", "done": True, "done_reason": "stop",
                      "prompt_eval_count": 31, "eval_count": 9, "message": {
                          "role": "assistant", "content": "Here.", "thinking": "Hmm.",
                          "tool_calls": [
                              {"id": "call_1", "function": {"index": 0, "name": "get_weather",
                                                            "arguments": {"city": "Oslo",
                                                                          "a": [1, 2]}}},
                              {"id": "call_2", "function": {"index": 1, "name": "read",
                                                            "arguments": {}}}]}}
    # The arguments are the call's own JSON text, byte for byte.
    assert b'"arguments":{"city": "Oslo", "a": [1, 2]}' in raw
    parsed = ollama.ChatResponse(**answer)
    assert parsed.message.tool_calls[0].function.arguments == {"city": "Oslo", "a": [1, 2]}


@pytest.mark.parametrize(("finish", "reason"), [("stop", "stop"), ("length", "length"),
                                                 ("tool_calls", "stop"),
                                                 ("content_filter", "stop")])
def test_done_reason_is_stop_or_length(finish, reason):
    plan = plan_of({"messages": HI, "stream": False})
    answer = orjson.loads(front.render_json(plan, result_of(calls=(), finish=finish)))
    assert answer["done_reason"] == reason


def test_no_thinking_no_field_and_no_usage_no_counts():
    plan = plan_of({"messages": HI, "stream": False})
    bare = TurnResult("c", 1, "qwen3", (Choice(0, None),))
    answer = orjson.loads(front.render_json(plan, bare))
    assert answer["message"] == {"role": "assistant", "content": ""}
    assert "prompt_eval_count" not in answer
    assert "eval_count" not in answer


def test_generate_answers_with_response_and_its_calls_at_the_top():
    plan = plan_of({"prompt": "hi", "stream": False}, front.GENERATE_PATH)
    answer = orjson.loads(front.render_json(plan, result_of()))
    assert (answer["response"], answer["thinking"]) == ("Here.", "Hmm.")
    assert [call["function"]["name"] for call in answer["tool_calls"]] == ["get_weather", "read"]
    assert "message" not in answer
    assert ollama.GenerateResponse(**answer).done is True


def lines(raw: bytes) -> list[dict[str, Any]]:
    assert raw.endswith(b"\n")
    return [orjson.loads(line) for line in raw.split(b"\n")[:-1]]


def test_the_stream_is_ndjson_with_the_calls_whole_before_the_done_line():
    writer = front.FRONT.stream_writer(plan_of({"messages": HI}))
    assert writer.content_type == "application/x-ndjson"
    raw = (writer.head() + writer.heartbeat() + writer.reasoning("Hm") + writer.text("He")
           + writer.answer(result_of()))
    parts = [ollama.ChatResponse(**line) for line in lines(raw)]
    assert [part.done for part in parts] == [False] * 7 + [True]
    assert "".join(p.message.thinking or "" for p in parts) == "Hmm."
    assert "".join(p.message.content for p in parts) == "Here."
    calls = [p.message.tool_calls for p in parts if p.message.tool_calls]
    assert calls == [parts[-2].message.tool_calls]  # one line, the one before the last
    assert [call.function.name for call in calls[0]] == ["get_weather", "read"]
    assert parts[-1].done_reason == "stop"
    assert parts[-1].eval_count == 9


def test_a_heartbeat_is_a_line_every_client_reads_as_nothing():
    writer = front.FRONT.stream_writer(plan_of({"messages": HI}))
    (beat,) = lines(writer.heartbeat())
    assert beat["message"] == {"role": "assistant", "content": ""}
    assert beat["done"] is False
    assert ollama.ChatResponse(**beat).message.content == ""
    generate = front.FRONT.stream_writer(plan_of({"prompt": "x"}, front.GENERATE_PATH))
    (line,) = lines(generate.heartbeat())
    assert (line["response"], line["done"]) == ("", False)


def test_an_error_after_the_start_is_ollamas_error_line():
    writer = front.FRONT.stream_writer(plan_of({"messages": HI}))
    raw = writer.head() + writer.error(ProxyError(504, "The upstream went silent."))
    assert lines(raw)[-1] == {"error": "The upstream went silent."}


def test_an_error_before_the_start_is_ollamas_envelope_with_its_status():
    response = front.error_response(ProxyError(429, "Slow down.",
                                               headers={"Retry-After": "3"}))
    assert (response.status, orjson.loads(response.body)) == (429, {"error": "Slow down."})
    assert response.headers == {"Retry-After": "3"}
    with pytest.raises(ollama.ResponseError) as caught:
        raise ollama.ResponseError(response.body.decode(), response.status)
    assert caught.value.error == "Slow down."


# --- the model endpoints ----------------------------------------------------------------------

CARDS = (ModelCard("Qwen/Qwen3.6-27B-FP8", 32768, 1_700_000_000, "vllm"),
         ModelCard("my-model", None, None, "llamacpp"))


def _served(serve: Any, body: dict[str, Any] | None = None, cards: Any = CARDS) -> Any:
    incoming = Incoming("POST", "/", orjson.dumps(body or {}))
    reply = serve(incoming, cards)
    assert isinstance(reply, Reply)
    return orjson.loads(reply.body) if reply.content_type == "application/json" else reply


def test_tags_list_every_model_with_every_field_strict_clients_read():
    models = _served(catalog.tags)["models"]
    assert [model["name"] for model in models] == ["Qwen/Qwen3.6-27B-FP8", "my-model"]
    first = models[0]
    assert first["model"] == first["name"]
    assert first["modified_at"] == "2023-11-14T22:13:20Z"
    assert first["size"] == 0
    assert re.fullmatch(r"[0-9a-f]{64}", first["digest"])
    assert first["details"] == {"parent_model": "", "format": "safetensors", "family": "qwen3",
                                "families": ["qwen3"], "parameter_size": "27B",
                                "quantization_level": "FP8"}
    assert models[1]["details"]["format"] == "gguf"
    assert (models[1]["details"]["parameter_size"],
            models[1]["details"]["quantization_level"]) == ("", "")
    listed = ollama.ListResponse(**_served(catalog.tags))
    assert [model.model for model in listed.models] == [card.id for card in CARDS]


@pytest.mark.parametrize("name", ["Qwen/Qwen3.6-27B-FP8", "Qwen/Qwen3.6-27B-FP8:latest"])
def test_show_says_the_family_and_the_upstreams_context_length(name):
    shown = _served(catalog.show, {"model": name})
    assert shown["model_info"] == {"general.architecture": "qwen3",
                                   "general.basename": "Qwen/Qwen3.6-27B-FP8",
                                   "general.name": "Qwen/Qwen3.6-27B-FP8",
                                   "qwen3.context_length": 32768}
    assert shown["capabilities"] == ["completion", "tools"]
    assert isinstance(shown["parameters"], str)
    assert isinstance(shown["template"], str)
    assert ollama.ShowResponse(**shown).modelinfo["qwen3.context_length"] == 32768


def test_show_says_thinking_only_of_a_model_known_to_reason():
    reasoning = (ModelCard("Qwen/Qwen3.6-27B-FP8", 32768, reasons=True),)
    shown = _served(catalog.show, {"model": "Qwen/Qwen3.6-27B-FP8"}, reasoning)
    assert shown["capabilities"] == ["completion", "tools", "thinking"]
    assert "thinking" not in _served(catalog.show, {"model": "my-model"})["capabilities"]


def test_show_of_a_model_whose_context_is_not_said_says_none():
    shown = _served(catalog.show, {"name": "my-model"})  # the older field
    assert shown["model_info"]["general.architecture"] == "my"
    assert not any(key.endswith(".context_length") for key in shown["model_info"])


@pytest.mark.parametrize(("body", "status"), [({"model": "nope"}, 404), ({}, 400),
                                              ({"model": 3}, 400)])
def test_show_of_no_such_model_is_ollamas_error(body, status):
    with pytest.raises(ProxyError) as caught:
        _served(catalog.show, body)
    assert caught.value.status == status


@pytest.mark.parametrize("body", [{"model": "my-model"}, {"name": "my-model:latest"},
                                  {"model": "Qwen/Qwen3.6-27B-FP8", "stream": True}])
def test_a_pull_of_a_served_model_streams_the_success_ollamas_pull_sends(body):
    reply = _served(catalog.pull, body)
    assert reply.content_type == "application/x-ndjson"
    read = [ollama.ProgressResponse(**orjson.loads(line))
            for line in reply.body.decode().splitlines()]
    assert [line.status for line in read] == ["pulling manifest", "verifying sha256 digest",
                                              "writing manifest", "success"]


def test_a_pull_of_a_served_model_not_streamed_is_its_last_status():
    assert _served(catalog.pull, {"model": "my-model", "stream": False}) == {
        "status": "success"}


def test_a_pull_of_a_model_the_upstream_does_not_serve_is_a_404_naming_the_served_ones():
    with pytest.raises(ProxyError) as caught:
        _served(catalog.pull, {"model": "llama3.2:latest", "stream": False})
    error = caught.value
    assert (error.status, error.code, error.param) == (404, "model_not_found", "model")
    assert "'llama3.2:latest' is not one the upstream serves" in error.message
    assert "Qwen/Qwen3.6-27B-FP8, my-model" in error.message
    long = "x" * 5000
    with pytest.raises(ProxyError) as echoed:
        _served(catalog.pull, {"model": long})
    assert len(echoed.value.message) < 1000  # a client's name is echoed, cut


@pytest.mark.parametrize(("body", "param"), [({}, "model"), ({"model": 3}, "model"),
                                             ({"model": "my-model", "stream": "yes"},
                                              "stream")])
def test_a_wrong_pull_is_a_400_naming_the_field(body, param):
    with pytest.raises(ProxyError) as caught:
        _served(catalog.pull, body)
    assert (caught.value.status, caught.value.param) == (400, param)


def test_ps_says_every_upstream_model_is_loaded_with_its_context():
    models = _served(catalog.ps)["models"]
    assert [(m["name"], m["context_length"]) for m in models] == [
        ("Qwen/Qwen3.6-27B-FP8", 32768), ("my-model", 0)]
    assert ollama.ProcessResponse(**_served(catalog.ps)).models[0].size_vram == 0


def test_version_is_numeric_and_at_least_what_copilot_wants():
    version = _served(catalog.version)["version"]
    assert [int(part) for part in version.split(".")] >= [0, 6, 4]
    root = _served(catalog.root)
    assert (root.status, root.body) == (200, b"Ollama is running")


# --- embeddings -------------------------------------------------------------------------------

VLLM_EMBEDDINGS = {"id": "embd-1", "object": "list", "created": 1, "model": "e5",
                   "data": [{"index": 1, "object": "embedding", "embedding": [0.3, 0.4]},
                            {"index": 0, "object": "embedding", "embedding": [0.1, 0.2]}],
                   "usage": {"prompt_tokens": 5, "total_tokens": 5, "completion_tokens": 0,
                             "prompt_tokens_details": None}}


def _asked(serve: Any, body: dict[str, Any]) -> Ask:
    asked = serve(Incoming("POST", "/api/embed", orjson.dumps(body)), Config())
    assert isinstance(asked, Ask)
    return asked


def test_embed_is_one_call_to_the_upstreams_embeddings():
    asked = _asked(embed.embed, {"model": "e5:latest", "input": ["a", "b"], "dimensions": 2,
                                 "truncate": True, "keep_alive": -1})
    assert (asked.method, asked.path, asked.model) == ("POST", "/v1/embeddings", "e5")
    assert orjson.loads(asked.body) == {"model": "e5", "input": ["a", "b"], "dimensions": 2}
    answer = orjson.loads(asked.then(200, orjson.dumps(VLLM_EMBEDDINGS)).body)
    assert answer["embeddings"] == [[0.1, 0.2], [0.3, 0.4]]  # in input order
    assert (answer["model"], answer["prompt_eval_count"]) == ("e5:latest", 5)
    assert ollama.EmbedResponse(**answer).embeddings[1] == [0.3, 0.4]


def test_the_older_embeddings_endpoint_answers_one_vector():
    asked = _asked(embed.embeddings, {"model": "e5", "prompt": "a"})
    assert orjson.loads(asked.body)["input"] == ["a"]
    one = dict(VLLM_EMBEDDINGS, data=VLLM_EMBEDDINGS["data"][1:])
    assert orjson.loads(asked.then(200, orjson.dumps(one)).body) == {"embedding": [0.1, 0.2]}


@pytest.mark.parametrize(("status", "body", "code"), [
    (404, b'{"detail":"Not Found"}', "embeddings_unavailable"),
    (400, b'{"error": {"message": "not an embedding model", "type": "BadRequestError", '
          b'"param": null, "code": 400}}', "400"),
    (200, b'{"data": "x"}', "upstream_bad_shape"),
    (200, orjson.dumps(dict(VLLM_EMBEDDINGS, data=VLLM_EMBEDDINGS["data"][:1])),
     "upstream_bad_shape"),
])
def test_an_upstream_without_embeddings_says_so(status, body, code):
    asked = _asked(embed.embed, {"model": "m", "input": ["a", "b"]})
    with pytest.raises(ProxyError) as caught:
        asked.then(status, body)
    assert caught.value.code == code


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "a"}, "model"), ({"model": "m", "input": []}, "input"),
    ({"model": "m", "input": [1]}, "input"), ({"model": "m", "input": "a", "dimensions": 0},
                                              "dimensions"),
])
def test_a_wrong_embed_request_is_a_400(body, param):
    with pytest.raises(ProxyError) as caught:
        embed.embed(Incoming("POST", "/api/embed", orjson.dumps(body)), Config())
    assert (caught.value.status, caught.value.param) == (400, param)
