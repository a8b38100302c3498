"""Constrained re-asks end to end: the proxy as a real HTTP server before a fake vLLM 0.33
(no tool parser) whose model never calls unless its output is constrained, or writes a
call's arguments unreadably unless constrained; read by the official SDKs on every front.

The model's call wrapper is taken to be one without a structural tag (Qwen3-Coder's XML first
in `formats`), so every re-ask here is vLLM's JSON array of calls; the model is a narrowly
scoped double that honours `structured_outputs.json` as the engine would (an answer that fits
the schema) and, asked to, refuses it as vLLM does beside a named choice. The servers' own
behaviours, wrappers and tags included, are tests/shell/driver/test_reask_fakes.py's."""

from __future__ import annotations

import time

import anthropic
import orjson
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, FakeVLLM, Received, vllm_completion, vllm_error

USER = [{"role": "user", "content": "Read /etc/hosts."}]
PROSE = "I would rather describe the file than read it."
UNREADABLE = '<tool_call>{"name": "read", "arguments": "{path: /etc/hosts"}</tool_call>'


def _fits(schema: dict) -> str:
    """What a constrained engine writes for vLLM's own `required` schema: one call to the
    first tool the schema allows, with the arguments its required fields need."""
    items = schema["items"]
    first = items["anyOf"][0] if "anyOf" in items else items
    name = first["properties"]["name"]["enum"][0]
    params = first["properties"]["arguments"]
    arguments = {key: "/etc/hosts" for key in params.get("required", [])}
    return orjson.dumps([{"name": name, "arguments": arguments}]).decode()


def model(unconstrained: str, *, refuse: bool = False):
    """The fake's model: `unconstrained` text unless `structured_outputs.json` is set (then a
    call that fits it); `refuse`: the server refuses the field, as vLLM does beside a named
    tool_choice."""
    def answer(received: Received) -> Answer:
        body = received.json
        constraint = (body.get("structured_outputs") or {}).get("json")
        if constraint is None:
            return Answer(body=vllm_completion(unconstrained))
        if refuse:
            return vllm_error(400, "You can only either use constraints for structured "
                                   "outputs or tools, not both.")
        return Answer(body=vllm_completion(_fits(constraint)))
    return answer


@pytest.fixture
def parserless():
    fake = FakeVLLM(tool_parser=False)
    yield fake
    fake.close()


NO_TAG = ["qwen_xml", "hermes"]  # a wrapper without a structural tag first: JSON re-asks


def _proxy(start_proxy, fake, **settings):
    return start_proxy(upstream=fake.url, upstream_tool_parser=False, formats=NO_TAG,
                       **settings)


@pytest.mark.parametrize("stream", [False, True])
def test_a_demanded_call_the_model_would_not_write_comes_constrained(start_proxy, parserless,
                                                                     stream):
    parserless.answer(model(PROSE))
    client = _proxy(start_proxy, parserless).client()
    if stream:
        chunks = list(client.chat.completions.create(
            model="qwen", messages=USER, tools=TOOLS, tool_choice="required", stream=True))
        calls = [call for chunk in chunks for choice in chunk.choices
                 for call in choice.delta.tool_calls or ()]
        names = [call.function.name for call in calls if call.function.name]
        finish = [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason]
        assert finish == ["tool_calls"]
    else:
        message = client.chat.completions.create(
            model="qwen", messages=USER, tools=TOOLS, tool_choice="required").choices[0].message
        names = [call.function.name for call in message.tool_calls]
        assert orjson.loads(message.tool_calls[0].function.arguments) == {"city": "/etc/hosts"}
    assert names == ["get_weather"]
    first, second = parserless.chat_requests()
    assert "structured_outputs" not in first.json
    assert second.json["tool_choice"] == "none"
    assert second.json["structured_outputs"]["json"]["minItems"] == 1
    assert second.json["messages"] == first.json["messages"]


def test_a_named_choice_is_constrained_to_that_tool_on_every_front(start_proxy, parserless):
    parserless.answer(model(PROSE))
    proxy = _proxy(start_proxy, parserless)
    chat = proxy.client().chat.completions.create(
        model="qwen", messages=USER, tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "read"}})
    assert [c.function.name for c in chat.choices[0].message.tool_calls] == ["read"]
    schema = parserless.chat_requests()[-1].json["structured_outputs"]["json"]
    assert schema["items"]["properties"]["name"]["enum"] == ["read"]

    responses = proxy.client().responses.create(
        model="qwen", input="Read /etc/hosts.", tool_choice={"type": "function", "name": "read"},
        tools=[{"type": "function", "name": t["function"]["name"],
                "parameters": t["function"]["parameters"]} for t in TOOLS])
    calls = [item for item in responses.output if item.type == "function_call"]
    assert [(c.name, orjson.loads(c.arguments)) for c in calls] == [
        ("read", {"path": "/etc/hosts"})]

    messages = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0
                                   ).messages.create(
        model="qwen", max_tokens=256, messages=USER, tool_choice={"type": "any"},
        tools=[{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
               for t in TOOLS])
    uses = [block for block in messages.content if block.type == "tool_use"]
    assert len(uses) == 1
    assert messages.stop_reason == "tool_use"
    assert len(parserless.chat_requests()) == 6  # each front: the answer, then one re-ask


def _turns_sent(fake: FakeVLLM) -> list[dict]:
    """The chat bodies the turns sent, without the proxy's own checks of a refusal (one
    token, its one empty `probe` tool: no client's schema in it)."""
    return [r.json for r in fake.chat_requests()
            if [t["function"]["name"] for t in r.json.get("tools", ())] != ["probe"]]


def _checks_sent(fake: FakeVLLM) -> list[dict]:
    return [r.json for r in fake.chat_requests()
            if [t["function"]["name"] for t in r.json.get("tools", ())] == ["probe"]]


def _refusals(proxy, blamed: str) -> list[dict]:
    """The refusals /proxy/health shows, once one is blamed on `blamed`."""
    for _ in range(200):
        health = requests.get(proxy.url + "/proxy/health?upstream=1", timeout=15).json()
        refusals = [r for u in health["upstreams"] for r in u["refusals"]]
        if any(r["blamed"] == blamed for r in refusals):
            return refusals
        time.sleep(0.05)
    raise AssertionError(f"no refusal blamed on the {blamed} in health")


def test_a_refused_constraint_gets_today_s_retry_and_is_not_sent_again(start_proxy,
                                                                         parserless):
    parserless.answer(model(PROSE, refuse=True))
    proxy = _proxy(start_proxy, parserless, required_call_retries=1)
    body = {"model": "qwen", "messages": USER, "tools": TOOLS, "tool_choice": "required"}
    response = requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=15)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "tool_call_required_unmet"
    sent = _turns_sent(parserless)
    assert ["structured_outputs" in b for b in sent] == [False, True, False]
    # the server refuses the field with the proxy's own constraint too: it counts
    [refusal] = [r for r in _refusals(proxy, "server") if r["blamed"] == "server"]
    assert (refusal["model"], refusal["field"]) == (parserless.model, "structured_outputs")
    assert time.time() + 60 < refusal["until"] <= time.time() + 601  # minutes, not hours
    [check] = _checks_sent(parserless)
    assert check["max_tokens"] == 1
    assert "structured_outputs" in check

    again = requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=15)
    assert again.status_code == 502
    later = _turns_sent(parserless)[3:]
    # remembered: the field is not sent again, the next dialect (response_format) is tried
    assert all("structured_outputs" not in b for b in later)
    assert later[1]["response_format"]["type"] == "json_schema"


def test_the_log_line_names_the_re_ask_and_its_upstream_time(start_proxy, parserless,
                                                             log_lines):
    parserless.answer(model(PROSE))
    proxy = _proxy(start_proxy, parserless, log_level="info")
    body = {"model": "qwen", "messages": USER, "tools": TOOLS, "tool_choice": "required"}
    assert requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=15).ok
    line = log_lines(1)[-1]
    assert "reask:demanded:structured_outputs" in line["notes"]
    [seen] = line["reasks"]
    assert (seen["reason"], seen["dialect"], seen["result"]) == (
        "demanded", "structured_outputs", "recovered")
    assert 0 < seen["ms"] < 15_000  # the re-ask's own round trip, timed
    assert [r.split(":", 1)[1] for r in line["repairs"]] == ["constrained:get_weather"]


def test_an_unreadable_frame_is_mended_by_a_re_ask_constrained_to_its_tool(start_proxy, parserless):
    parserless.answer(model(UNREADABLE))
    client = _proxy(start_proxy, parserless).client()
    message = client.chat.completions.create(model="qwen", messages=USER,
                                             tools=TOOLS).choices[0].message
    assert [(c.function.name, orjson.loads(c.function.arguments))
            for c in message.tool_calls] == [("read", {"path": "/etc/hosts"})]
    schema = parserless.chat_requests()[-1].json["structured_outputs"]["json"]
    assert schema["maxItems"] == 1
    assert schema["items"]["properties"]["name"]["enum"] == ["read"]


@pytest.mark.parametrize("setting", ["off", "demanded"])
def test_an_unreadable_frame_stays_text_where_the_setting_says_so(start_proxy, parserless, setting):
    parserless.answer(model(UNREADABLE))
    client = _proxy(start_proxy, parserless, constrained_reask=setting).client()
    message = client.chat.completions.create(model="qwen", messages=USER,
                                             tools=TOOLS).choices[0].message
    assert not message.tool_calls
    assert message.content == UNREADABLE
    assert len(parserless.chat_requests()) == 1


def _samples(proxy) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/proxy/metrics's samples, by name and labels."""
    text = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _status(proxy, turns: int) -> dict:
    """/proxy/status.json once it holds `turns` turns (a turn is recorded as it closes)."""
    for _ in range(100):
        doc = requests.get(proxy.url + "/proxy/status.json", timeout=5).json()
        if doc["held"]["turns"] >= turns:
            return doc
        time.sleep(0.05)
    raise AssertionError(f"status.json did not reach {turns} turns")


def test_metrics_and_the_status_page_count_each_re_ask_by_reason_dialect_and_result(
        start_proxy, parserless):
    parserless.answer(model(PROSE, refuse=True))
    proxy = _proxy(start_proxy, parserless)
    body = {"model": "qwen", "messages": USER, "tools": TOOLS, "tool_choice": "required"}
    assert requests.post(proxy.url + "/v1/chat/completions", json=body,
                         timeout=15).status_code == 502
    doc = _status(proxy, 1)
    [row] = doc["models"]
    assert row["reasks"] == {"demanded:structured_outputs:refused": 1,
                             "demanded:unconstrained:unmet": 1}
    assert row["reask_p50_ms"] is not None
    assert 0 < row["reask_p50_ms"] < 15_000
    assert doc["turns"][0]["reasks"] == row["reasks"]
    samples = _samples(proxy)
    labels = (("dialect", "structured_outputs"), ("reason", "demanded"), ("result", "refused"))
    assert samples[("toolcall_proxy_reasks_total", labels)] == 1
    timed = (("dialect", "unconstrained"), ("reason", "demanded"))
    assert samples[("toolcall_proxy_reask_upstream_seconds_count", timed)] == 1


def test_what_one_worker_learned_of_an_upstream_every_worker_knows(start_proxy, parserless,
                                                                   tmp_path):
    """Two proxies on one store (two workers, or a restart): the second asks the upstream's
    info endpoints nothing (its model list once, to see the same server answers there), and
    sends no field the first saw refused."""
    parserless.answer(model(PROSE, refuse=True))
    store = {"responses_store_url": f"sqlite:///{tmp_path}/store.sqlite3"}
    body = {"model": "qwen", "messages": USER, "tools": TOOLS, "tool_choice": "required"}
    first = _proxy(start_proxy, parserless, **store)
    assert requests.post(first.url + "/v1/chat/completions", json=body,
                         timeout=15).status_code == 502
    _refusals(first, "server")  # (checked beside the turn, then kept)
    probes = [r.path for r in parserless.received if r.method == "GET"]
    assert "/version" in probes

    second = _proxy(start_proxy, parserless, **store)
    before = len(parserless.received)
    assert requests.post(second.url + "/v1/chat/completions", json=body,
                         timeout=15).status_code == 502
    after = [r for r in parserless.received[before:]]
    assert [r.path for r in after if r.method == "GET"] == ["/v1/models"]
    chats = [r for r in after if r.method == "POST"]
    assert len(chats) == 2  # the answer, and one re-ask
    assert "structured_outputs" not in chats[1].json
    assert chats[1].json["response_format"]["type"] == "json_schema"


def test_the_health_check_shows_each_model_s_profile(start_proxy, parserless):
    proxy = _proxy(start_proxy, parserless)
    health = requests.get(proxy.url + "/proxy/health?upstream=1", timeout=15).json()
    [upstream] = health["upstreams"]
    profile = upstream["profiles"][parserless.model]
    assert (profile["kind"], profile["version"], profile["context_length"]) == (
        "vllm", "0.33.0", 32768)
    assert profile["tool_parser"] is False  # as configured: upstream_tool_parser false


def _tagged(received: Received) -> Answer:
    """A model under xgrammar's triggered tags: prose, then one call that opens with the
    trigger and is written as the first tag allows (begin, arguments, end)."""
    fmt = received.json["response_format"]["format"]
    tag = fmt["tags"][0]
    required = tag["content"]["json_schema"].get("required", [])
    arguments = orjson.dumps({key: "Paris" for key in required}).decode()
    return Answer(body=vllm_completion("Let me check. " + tag["begin"] + arguments + tag["end"]))


def test_every_call_may_be_constrained_from_its_first_token(start_proxy, fake):
    fake.answer(_tagged)
    proxy = start_proxy(formats=["hermes"], constrain_every_call=True)
    message = proxy.client().chat.completions.create(
        model="qwen", messages=USER, tools=TOOLS).choices[0].message
    assert [(c.function.name, orjson.loads(c.function.arguments))
            for c in message.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert message.content == "Let me check."
    [sent] = fake.chat_requests()
    fmt = sent.json["response_format"]["format"]
    assert (fmt["type"], fmt["at_least_one"], fmt["triggers"]) == (
        "triggered_tags", False, ["<tool_call>"])  # free text untouched: nothing forced
    assert [t["begin"] for t in fmt["tags"]] == [
        '<tool_call>\n{"name": "get_weather", "arguments": ',
        '<tool_call>\n{"name": "read", "arguments": ']
    assert sent.json["skip_special_tokens"] is False


def test_every_call_is_sent_as_it_is_where_the_call_wrapper_is_unknown(start_proxy, fake,
                                                                         log_lines):
    fake.answer(Answer(body=vllm_completion(PROSE)))
    proxy = start_proxy(constrain_every_call=True, log_level="info", formats=NO_TAG)
    proxy.client().chat.completions.create(model="qwen", messages=USER, tools=TOOLS)
    [sent] = fake.chat_requests()
    assert "response_format" not in sent.json
    assert "every_call_not_constrained" in log_lines(1)[-1]["notes"]
