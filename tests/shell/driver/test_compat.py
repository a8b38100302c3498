"""The compatibility contract, checked on the wire: what upstream received, what the client got.

The fake upstream applies vLLM 0.33's request validation (tests/fake_vllm.py), so a row whose
rewrite is switched off shows the refusal a user would meet without the proxy.
"""

from __future__ import annotations

import json
from pathlib import Path

import openai
import orjson
import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, FakeVLLM, vllm_completion, vllm_stream_chunks

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
USER = [{"role": "user", "content": "hi"}]
HERMES = '<tool_call>{"name": "read", "arguments": {"path": "/etc/hosts"}}</tool_call>'
CRON_ADD = ('<tool_call>{"name": "cron_add", "arguments": {"name": "inbox", "schedule": '
            '{"kind": "cron", "expr": "0 7 * * *"}, "payload": {"text": "Summarise my inbox"}, '
            '"enabled": true, "sessionTarget": "main"}}</tool_call>')


def _post(proxy, body):
    return requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=15)


def _stream_text(response) -> list[dict]:
    events = [e for e in response.content.decode().split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    return [json.loads(e.removeprefix("data: ")) for e in events[:-1]]


def _loads_or_none(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


# One row per rewrite: (setting, the request, check on what upstream received).
MATRIX = [
    ("drop_store", {"store": False},
     lambda sent: "store" not in sent),
    ("max_completion_tokens_as_max_tokens", {"max_completion_tokens": 99},
     lambda sent: sent.get("max_tokens") == 99 and "max_completion_tokens" not in sent),
    ("developer_role_as_system",
     {"messages": [{"role": "developer", "content": "Be brief."}, *USER]},
     lambda sent: [m["role"] for m in sent["messages"]] == ["system", "user"]),
    ("repair_history_arguments",
     {"messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [
         {"id": "c1", "type": "function",
          "function": {"name": "read", "arguments": '"{\\"path\\": \\"a\\"}"'}},
         {"id": "c2", "type": "function", "function": {"name": "read", "arguments": ""}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "x"},
      {"role": "tool", "tool_call_id": "c2", "content": "y"}]},
     lambda sent: [_loads_or_none(c["function"]["arguments"])
                   for c in sent["messages"][1]["tool_calls"]] == [{"path": "a"}, {}]),
]


@pytest.mark.parametrize(("setting", "extra", "check"), MATRIX, ids=[m[0] for m in MATRIX])
@pytest.mark.parametrize("with_tools", [True, False], ids=["buffered", "passthrough"])
def test_rewrite_matrix(fake, start_proxy, setting, extra, check, with_tools):
    fake.answer(Answer(body=vllm_completion(HERMES)))
    body = {"model": "qwen", "messages": USER, **extra}
    if with_tools:
        body["tools"] = TOOLS
    proxy = start_proxy()
    response = _post(proxy, body)
    assert response.status_code == 200, response.text
    assert check(fake.chat_requests()[-1].json)
    if with_tools:
        assert response.json()["choices"][0]["finish_reason"] == "tool_calls"

    switched_off = start_proxy(**{setting: False})
    before = len(fake.chat_requests())
    response = _post(switched_off, body)
    sent = fake.chat_requests()[before].json
    assert not check(sent)
    for key, value in extra.items():
        if key != "messages":
            assert sent[key] == value


@pytest.mark.parametrize(("setting", "body"), [
    ("drop_empty_tools", {"tools": [], "stream": True}),
    ("drop_orphan_tool_choice", {"tool_choice": "auto", "stream": True}),
    ("drop_stream_options_without_stream", {"stream_options": {"include_usage": True}}),
])
def test_rewrites_that_vllm_would_refuse(fake, start_proxy, setting, body):
    body = {"model": "qwen", "messages": USER, **body}
    chunks = vllm_stream_chunks("Hello.")
    fake.answer(lambda r: Answer(chunks=chunks) if r.json.get("stream") else Answer(
        body=vllm_completion("Hello.")))
    response = _post(start_proxy(), body)
    assert response.status_code == 200
    sent = fake.chat_requests()[-1].json
    assert sent.get("tools") is None
    assert "tool_choice" not in sent
    assert "stream_options" not in sent or sent.get("stream")
    refused = _post(start_proxy(**{setting: False}), body)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"]


def test_openclaw_default_request_passes_vllm_validation(fake, proxy):
    request = json.loads((FIXTURES / "openclaw_request.json").read_text())
    fake.answer(Answer(body=vllm_completion(CRON_ADD, reasoning="A cron job.",
                                            finish_reason="stop")))
    response = requests.post(proxy.url + "/v1/chat/completions", json=request, timeout=15)
    assert response.status_code == 200
    chunks = _stream_text(response)
    deltas = [ch["choices"][0]["delta"] for ch in chunks if ch["choices"]]
    calls = [c for delta in deltas for c in delta.get("tool_calls") or ()]
    assert calls[0]["function"]["name"] == "cron_add"
    assert json.loads(calls[1]["function"]["arguments"])["schedule"] == {
        "kind": "cron", "expr": "0 7 * * *"}
    finish = [ch["choices"][0]["finish_reason"] for ch in chunks if ch["choices"]]
    assert finish[-1] == "tool_calls"
    assert chunks[-1]["usage"]["completion_tokens"] == 21
    sent = fake.chat_requests()[0].json
    assert {"store", "stream_options", "max_completion_tokens"}.isdisjoint(sent)
    assert sent["max_tokens"] == 8192
    assert sent["messages"][0]["role"] == "system"


def test_openclaw_request_is_refused_by_vllm_without_the_proxy(fake):
    request = json.loads((FIXTURES / "openclaw_request.json").read_text())
    request["stream"] = False
    direct = requests.post(fake.url + "/v1/chat/completions", json=request, timeout=10)
    assert direct.status_code == 400


def test_parser_less_upstream(start_proxy):
    fake = FakeVLLM(tool_parser=False)
    try:
        fake.answer(Answer(body=vllm_completion(HERMES)))
        body = {"model": "qwen", "messages": USER, "tools": TOOLS, "tool_choice": "auto"}
        refused = _post(start_proxy(upstream=fake.url), body)
        assert refused.status_code == 400  # vLLM without a parser refuses tool_choice auto
        proxy = start_proxy(upstream=fake.url, upstream_tool_parser=False)
        completion = _post(proxy, body).json()
        assert completion["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read"
        sent = fake.chat_requests()[-1].json
        assert sent["tool_choice"] == "none"
        assert sent["skip_special_tokens"] is False
        assert sent["tools"] == TOOLS

        named = {**body, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
        before = len(fake.chat_requests())
        refused = _post(proxy, named)  # only get_weather may be extracted, and none came
        assert refused.status_code == 502
        assert refused.json()["error"]["code"] == "tool_call_required_unmet"
        assert len(fake.chat_requests()) - before == 2  # asked again once (the default)
    finally:
        fake.close()


@pytest.mark.parametrize("stream", [False, True])
def test_a_required_call_that_did_not_come_is_asked_for_again(start_proxy, stream):
    fake = FakeVLLM(tool_parser=False)
    try:
        answers = iter([vllm_completion("I'd rather chat."), vllm_completion(HERMES)])
        fake.answer(lambda received: Answer(body=next(answers), delay=0.2))
        proxy = start_proxy(upstream=fake.url, upstream_tool_parser=False,
                            commit_window_seconds=0.1, heartbeat_seconds=0.1,
                            constrained_reask="off")
        client = proxy.client()
        if stream:
            names = [call.function.name for chunk in client.chat.completions.create(
                model="qwen", messages=USER, tools=TOOLS, tool_choice="required", stream=True)
                for choice in chunk.choices for call in choice.delta.tool_calls or ()
                if call.function.name]
        else:
            message = client.chat.completions.create(
                model="qwen", messages=USER, tools=TOOLS, tool_choice="required"
            ).choices[0].message
            names = [call.function.name for call in message.tool_calls]
        assert names == ["read"]
        assert len(fake.chat_requests()) == 2

        fake.answer(Answer(body=vllm_completion("Still chatting."), delay=0.2))
        never = start_proxy(upstream=fake.url, upstream_tool_parser=False,
                            commit_window_seconds=0.1, required_call_retries=2,
                            constrained_reask="off")
        response = requests.post(never.url + "/v1/chat/completions", timeout=10, json={
            "model": "qwen", "messages": USER, "tools": TOOLS, "tool_choice": "required",
            "stream": stream})
        if stream:  # the stream had started: the error arrives in it, then [DONE]
            events = [e for e in response.content.split(b"\n\n") if e]
            assert b"tool_call_required_unmet" in events[-2]
            assert events[-1] == b"data: [DONE]"
        else:
            assert response.status_code == 502
            assert response.json()["error"]["code"] == "tool_call_required_unmet"
        assert len(fake.chat_requests()) == 2 + 3
    finally:
        fake.close()


def test_tool_temperature_and_formats_per_model(fake, start_proxy):
    qwen_xml_only = {"formats": ["qwen_xml"], "tool_temperature": 0.2}
    proxy = start_proxy(models={"*coder*": qwen_xml_only})
    fake.answer(Answer(body=vllm_completion(HERMES)))
    body = {"messages": USER, "tools": TOOLS, "temperature": 0.9}
    coder = _post(proxy, {**body, "model": "qwen3-coder-30b"}).json()
    assert coder["choices"][0]["message"]["content"] == HERMES  # hermes not tried here
    assert fake.chat_requests()[-1].json["temperature"] == 0.2
    other = _post(proxy, {**body, "model": "qwen3-32b"}).json()
    assert other["choices"][0]["finish_reason"] == "tool_calls"
    assert fake.chat_requests()[-1].json["temperature"] == 0.9


def test_one_proxy_fronts_several_upstreams(fake, start_proxy):
    chat = FakeVLLM(model="chat-model")
    try:
        proxy = start_proxy(models={"chat-*": {"upstream": chat.url}})
        chat.answer(Answer(body=vllm_completion(HERMES, model="chat-model")))
        fake.answer(Answer(body=vllm_completion("coder answer")))
        client = proxy.client()
        ids = sorted(m.id for m in client.models.list().data)
        assert ids == ["Qwen/Qwen3.6-27B-FP8", "chat-model"]
        routed = client.chat.completions.create(model="chat-model", messages=USER, tools=TOOLS)
        assert routed.choices[0].finish_reason == "tool_calls"
        assert len(chat.chat_requests()) == 1
        assert not fake.chat_requests()
        default = client.chat.completions.create(model="Qwen/Qwen3.6-27B-FP8", messages=USER)
        assert default.choices[0].message.content == "coder answer"
        completions = requests.post(proxy.url + "/v1/completions", timeout=10,
                                    json={"model": "chat-model", "prompt": "x"})
        assert completions.status_code == 200
        assert chat.received[-1].path == "/v1/completions"
    finally:
        chat.close()


def test_several_upstreams_each_get_their_own_key_and_one_down_leaves_the_others(
        fake, start_proxy):
    chat = FakeVLLM(model="chat-model")
    try:
        proxy = start_proxy(upstream_api_key="sk-coder", models={
            "chat-*": {"upstream": chat.url, "upstream_api_key": "sk-chat"},
            "gone-*": {"upstream": "http://127.0.0.1:9"}})
        ids = sorted(m.id for m in proxy.client().models.list().data)
        assert ids == ["Qwen/Qwen3.6-27B-FP8", "chat-model"]  # :9 is down, the rest listed
        assert fake.received[-1].headers["Authorization"] == "Bearer sk-coder"
        assert chat.received[-1].headers["Authorization"] == "Bearer sk-chat"
        health = requests.get(proxy.url + "/proxy/health?upstream=1", timeout=10)
        assert health.status_code == 503
        assert [r["ok"] for r in health.json()["upstreams"]] == [True, True, False]
        assert chat.received[-1].headers["Authorization"] == "Bearer sk-chat"
    finally:
        chat.close()


def test_health_is_degraded_when_upstream_refuses_the_models_list(fake, start_proxy):
    fake.answer(Answer(status=401, body={"error": "Unauthorized"}))
    original = fake._route
    fake._route = lambda received: fake._answer(received)  # even /v1/models is refused
    try:
        response = requests.get(start_proxy().url + "/proxy/health?upstream=1", timeout=10)
    finally:
        fake._route = original
    assert response.status_code == 503
    report = response.json()["upstreams"][0]
    assert (report["reachable"], report["ok"], report["status"]) == (True, False, 401)


def test_n_choices_are_each_rendered_with_their_index(fake, client):
    fake.answer(Answer(body=vllm_completion(HERMES, choices=3)))
    stream = client.chat.completions.create(model="q", messages=USER, tools=TOOLS, n=3,
                                            stream=True)
    per_choice: dict[int, dict] = {}
    for chunk in stream:
        for choice in chunk.choices:
            slot = per_choice.setdefault(choice.index, {"args": "", "finish": None, "role": None})
            slot["role"] = choice.delta.role or slot["role"]
            for call in choice.delta.tool_calls or ():
                slot["args"] += call.function.arguments or ""
            slot["finish"] = choice.finish_reason or slot["finish"]
    assert sorted(per_choice) == [0, 1, 2]
    for slot in per_choice.values():
        assert slot["role"] == "assistant"
        assert json.loads(slot["args"]) == {"path": "/etc/hosts"}
        assert slot["finish"] == "tool_calls"


def test_parallel_tool_calls_false_keeps_only_the_first(fake, client):
    fake.answer(Answer(body=vllm_completion(HERMES + "\n" + HERMES.replace("hosts", "passwd"))))
    completion = client.chat.completions.create(model="q", messages=USER, tools=TOOLS,
                                                parallel_tool_calls=False)
    calls = completion.choices[0].message.tool_calls
    assert len(calls) == 1
    assert json.loads(calls[0].function.arguments) == {"path": "/etc/hosts"}
    both = client.chat.completions.create(model="q", messages=USER, tools=TOOLS)
    assert len(both.choices[0].message.tool_calls) == 2


def test_reasoning_reaches_the_client_before_content(fake, start_proxy):
    fake.answer(Answer(body=vllm_completion("Done.", reasoning="Think first.")))
    for field, keys in (("reasoning_content", {"reasoning_content"}), ("both",
                        {"reasoning_content", "reasoning"}), ("drop", set())):
        proxy = start_proxy(reasoning_field=field)
        response = _post(proxy, {"model": "q", "messages": USER, "tools": TOOLS,
                                 "stream": True})
        deltas = [c["choices"][0]["delta"] for c in _stream_text(response)]
        seen = [k for d in deltas for k in d if k.startswith("reasoning")]
        assert set(seen) == keys
        content_at = next(i for i, d in enumerate(deltas) if d.get("content"))
        assert all(i < content_at for i, d in enumerate(deltas)
                   if any(k.startswith("reasoning") for k in d))


def test_bad_models_section_is_refused():
    from proxy.shell.config_load import ConfigError, build_config

    with pytest.raises(ConfigError, match="cannot be set per model"):
        build_config({"models": {"*": {"port": 1}}})
    with pytest.raises(ConfigError, match="unknown key"):
        build_config({"models": {"*": {"heartbeat": 1}}})
    with pytest.raises(ConfigError, match="upstream"):
        build_config({"models": {"x*": {"upstream": "ftp://x"}}})
    assert orjson.loads(orjson.dumps(build_config({"models": {"a*": {"formats": ["hermes"]}}})
                                     .as_dict()))["models"] == {"a*": {"formats": ["hermes"]}}


def test_sdk_sees_the_same_error_for_a_refused_request(fake, start_proxy):
    proxy = start_proxy(developer_role_as_system=False)
    with pytest.raises(openai.BadRequestError) as caught:
        proxy.client().chat.completions.create(
            model="q", messages=[{"role": "developer", "content": "x"}], tools=TOOLS)
    assert "Unexpected message role" in caught.value.body["message"]


@pytest.mark.parametrize(("arguments", "repaired"), [
    ('{"path": "a"}', None),  # already a JSON-object string: left byte for byte
    ({"path": "a"}, {"path": "a"}),
    ('"{\\"path\\": \\"a\\"}"', {"path": "a"}),
    (json.dumps(json.dumps(json.dumps({"path": "a"}))), {"path": "a"}),  # encoded three times
    ('{"path": "a"} trailing words', {"path": "a"}),
    ("{'path': 'a', 'all': True}", {"path": "a", "all": True}),
    ('{"path": "a",}', {"path": "a"}),
    ("", {}), (None, {}), ("null", {}), ("[1, 2]", {}), ("not json", {}),
])
def test_history_arguments_become_json_object_strings(arguments, repaired):
    from proxy.turn.compat import repair_history

    messages = [{"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "read", "arguments": arguments}}]}]
    changed = repair_history(messages)
    result = messages[0]["tool_calls"][0]["function"]["arguments"]
    if repaired is None:
        assert not changed
        assert result == arguments
    else:
        assert changed
        assert json.loads(result) == repaired
