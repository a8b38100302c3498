"""Constrained re-asks against the faithful fakes (tests/fakes/): vLLM 0.33 with and without a
tool parser, llama.cpp and SGLang, whose models never call unless constrained or botch their
arguments; through every front and both modes, read by the official SDKs. What each server
does with a demanded call, and what it refuses, is the fake's (its source in comments there);
the proxy must end every demanded turn with a call that fits, mend every frame it cannot read,
and deliver a call the model wrote whole as it wrote it, never asking it to invent what it left
out."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import ollama
import openai
import orjson
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from proxy.shell.config_load import build_config
from proxy.toolcalls.validity import check
from tests.conftest import RunningProxy
from tests.fakes.base import FakeServer
from tests.fakes.helpers import TOOLS, USER, parameters_of
from tests.fakes.llamacpp import FakeLlamaCpp
from tests.fakes.models import (
    botches_arguments,
    constrained_after,
    cut_by_length,
    never_calls_unless_constrained,
    says,
    thinks,
)
from tests.fakes.ollama import FakeOllama
from tests.fakes.sglang import FakeSGLang
from tests.fakes.vllm import FakeVLLM
from tests.serving import wait_for

# Each server as an operator runs it, and the proxy's settings for it.
SERVERS: dict[str, tuple[Callable[[], FakeServer], dict[str, Any]]] = {
    "vllm": (lambda: FakeVLLM(tool_parser=None), {"upstream_tool_parser": False}),
    "vllm+parser": (lambda: FakeVLLM(tool_parser="hermes"), {}),
    "llama.cpp": (FakeLlamaCpp, {}),
    "sglang": (lambda: FakeSGLang(tool_call_parser=None), {}),
    "sglang+parser": (FakeSGLang, {}),
    "ollama": (FakeOllama, {}),
}


def _model_of(proxy: RunningProxy) -> str:
    """The model the fake behind `proxy` serves (Ollama answers 404 for any other)."""
    fake = proxy.fake  # type: ignore[attr-defined]
    return fake.models[0] if isinstance(fake, FakeOllama) else "m"


@pytest.fixture
def running() -> Iterator[Callable[..., tuple[FakeServer, RunningProxy]]]:
    """`running(server, model)`: the fake started with `model`, and a proxy before it."""
    started: list[Any] = []

    def start(server: str, model: Any, **settings: Any) -> tuple[FakeServer, RunningProxy]:
        make, proxy_settings = SERVERS[server]
        fake = make()
        fake.behave(model)
        started.append(fake)
        proxy = RunningProxy(build_config({"upstream": fake.url, "log_level": "warning",
                                           **proxy_settings, **settings}))
        proxy.fake = fake  # type: ignore[attr-defined]
        started.append(proxy)
        return fake, proxy

    yield start
    for thing in reversed(started):
        thing.close()


def _fits(name: str, arguments: str) -> bool:
    return check(orjson.loads(arguments), parameters_of(name)).problems == ()


def _chat(proxy: RunningProxy, stream: bool, **extra: Any) -> list[tuple[str, str]]:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=20)
    if not stream:
        message = client.chat.completions.create(model=_model_of(proxy), messages=USER,
                                                 tools=TOOLS, **extra).choices[0].message
        return [(c.function.name, c.function.arguments) for c in message.tool_calls or ()]
    calls: dict[int, list[str]] = {}
    for chunk in client.chat.completions.create(model=_model_of(proxy), messages=USER,
                                                tools=TOOLS, stream=True, **extra):
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or ():
                entry = calls.setdefault(call.index, ["", ""])
                entry[0] += call.function.name or ""
                entry[1] += call.function.arguments or ""
    return [(name, arguments) for name, arguments in calls.values()]


def _responses(proxy: RunningProxy, stream: bool) -> list[tuple[str, str]]:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=20)
    tools = [{"type": "function", "name": t["function"]["name"],
              "parameters": t["function"]["parameters"]} for t in TOOLS]
    if stream:
        with client.responses.stream(model=_model_of(proxy), input="Find the parser.",
                                     tools=tools, tool_choice="required") as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(model=_model_of(proxy), input="Find the parser.",
                                           tools=tools, tool_choice="required")
    return [(item.name, item.arguments) for item in response.output
            if item.type == "function_call"]


def _messages(proxy: RunningProxy, stream: bool) -> list[tuple[str, str]]:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                                 timeout=20)
    tools = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
             for t in TOOLS]
    kwargs = {"model": _model_of(proxy), "max_tokens": 512, "messages": USER, "tools": tools,
              "tool_choice": {"type": "any"}}
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    return [(block.name, orjson.dumps(block.input).decode()) for block in message.content
            if block.type == "tool_use"]


FRONTS = {"chat": lambda proxy, stream: _chat(proxy, stream, tool_choice="required"),
          "responses": _responses, "messages": _messages}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("front", sorted(FRONTS))
@pytest.mark.parametrize("server", sorted(SERVERS))
def test_a_demanded_call_always_comes(running, server, front, stream):
    _, proxy = running(server, never_calls_unless_constrained())
    calls = FRONTS[front](proxy, stream)
    assert len(calls) >= 1, (server, front)
    assert all(_fits(name, arguments) for name, arguments in calls), calls


@pytest.mark.parametrize("server", ["vllm", "vllm+parser"])
def test_a_frame_whose_arguments_cannot_be_read_comes_out_valid(running, server):
    """(SGLang's parser drops a call it cannot read: nothing reaches the proxy.)"""
    fake, proxy = running(server, botches_arguments("broken"))
    [(name, arguments)] = _chat(proxy, stream=False)
    assert name == "search"
    assert _fits(name, arguments)
    assert len(_chats(fake)) == 2
    _reasks_come_to(proxy, {("unreadable", "recovered"): 1})


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("server", ["vllm", "vllm+parser", "sglang+parser"])
def test_a_call_written_whole_off_its_schema_is_delivered_as_written_on_an_auto_turn(
        running, server, stream):
    """The model left out a required key: asked again under a grammar it would have to
    invent one. The call goes out as written, counted `schema_invalid`, and nothing more is
    asked of the upstream."""
    fake, proxy = running(server, botches_arguments("violating"))
    [(name, arguments)] = _chat(proxy, stream=stream)
    assert name == "search"
    assert not _fits(name, arguments)
    assert "query" not in orjson.loads(arguments)  # the key the model left out stays out
    assert len(_chats(fake)) == 1
    assert _reasks(proxy) == {}
    assert _schema_invalid(proxy) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("front", sorted(FRONTS))
def test_a_demanded_call_off_its_schema_is_asked_again_under_the_demand(running, front,
                                                                          stream):
    """`tool_choice` demands a call (chat's `required`, Responses' `required`, Messages'
    `any`): one that does not fit is asked for once more, constrained, as vLLM itself does
    with a parser."""
    fake, proxy = running("vllm", botches_arguments("violating"))
    [(name, arguments)] = FRONTS[front](proxy, stream)
    assert name == "search"
    assert _fits(name, arguments)
    assert len(_chats(fake)) == 2
    _reasks_come_to(proxy, {("demanded", "recovered"): 1})


@pytest.mark.parametrize(("server", "field"), [
    ("vllm", "response_format"), ("llama.cpp", "json_schema"), ("vllm+parser", None),
    ("sglang+parser", None), ("sglang", None), ("ollama", "response_format"),
])
def test_each_server_is_re_asked_in_its_own_dialect_only_when_it_did_not_constrain(
        running, server, field):
    """A server that constrains a demanded call itself (vLLM and SGLang with a parser,
    SGLang's own array without one) is asked once; the others twice, the second time with
    their own constraint field and `tool_choice: "none"` (vLLM: the structural tag of the
    wrapper its template showed the profile; llama.cpp: its `json_schema`)."""
    fake, proxy = running(server, never_calls_unless_constrained())
    assert _chat(proxy, stream=False, tool_choice="required")
    chats = [r for r in fake.received if r.path.startswith("/v1/chat/completions")]
    if field is None:
        assert len(chats) == 1
        return
    first, second = chats
    assert field not in first.json
    assert field in second.json
    assert second.json["tool_choice"] == "none"
    if server == "vllm":
        fmt = second.json["response_format"]["format"]
        assert (fmt["type"], fmt["at_least_one"]) == ("triggered_tags", True)


@pytest.mark.parametrize("server", ["vllm", "llama.cpp", "ollama"])
def test_without_the_re_ask_the_same_servers_leave_the_demanded_call_unmet(running, server):
    _, proxy = running(server, never_calls_unless_constrained(),
                          constrained_reask="off", required_call_retries=1)
    with pytest.raises(openai.APIStatusError) as raised:
        _chat(proxy, stream=False, tool_choice="required")
    assert raised.value.status_code == 502
    assert raised.value.body["code"] == "tool_call_required_unmet"


# -- the streamed mode: an unread frame held back is re-asked before it goes out -------------

STREAMED = {"stream_mode": "stream", "thinking_opened_by_template": "false"}
PROSE = "Let me search the code base for the parser first."
MENTION = "I will use <tool_call> tags when I call search. The parser is in proxy/toolcalls."

# What a streaming client reads, live: ("text", piece) as each piece comes, then ("calls",
# [(name, arguments as JSON text)]) once the answer is whole.
Read = Iterator[tuple[str, Any]]


def _chat_live(proxy: RunningProxy) -> Read:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=20)
    calls: dict[int, list[str]] = {}
    for chunk in client.chat.completions.create(model=_model_of(proxy), messages=USER,
                                                tools=TOOLS, stream=True):
        for choice in chunk.choices:
            if choice.delta.content:
                yield "text", choice.delta.content
            for call in choice.delta.tool_calls or ():
                entry = calls.setdefault(call.index, ["", ""])
                entry[0] += call.function.name or ""
                entry[1] += call.function.arguments or ""
    yield "calls", [(name, arguments) for name, arguments in calls.values()]


def _responses_live(proxy: RunningProxy) -> Read:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=20)
    tools = [{"type": "function", "name": t["function"]["name"],
              "parameters": t["function"]["parameters"]} for t in TOOLS]
    with client.responses.stream(model=_model_of(proxy), input=USER[0]["content"],
                                 tools=tools) as events:
        response = None
        for event in events:
            if event.type == "response.output_text.delta":
                yield "text", event.delta
            elif event.type in ("response.completed", "response.incomplete"):
                response = event.response  # `incomplete`: cut by max_output_tokens
    assert response is not None
    yield "calls", [(item.name, item.arguments) for item in response.output
                    if item.type == "function_call"]


def _messages_live(proxy: RunningProxy) -> Read:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                                 timeout=20)
    tools = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
             for t in TOOLS]
    with client.messages.stream(model=_model_of(proxy), max_tokens=512, messages=USER,
                                tools=tools) as events:
        for event in events:
            if event.type == "text":
                yield "text", event.text
        message = events.get_final_message()
    yield "calls", [(block.name, orjson.dumps(block.input).decode())
                    for block in message.content if block.type == "tool_use"]


def _ollama_live(proxy: RunningProxy) -> Read:
    calls = []
    for part in ollama.Client(host=proxy.url, timeout=20).chat(
            proxy.fake.model, USER, tools=TOOLS, stream=True):  # type: ignore[attr-defined]
        if part.message.content:
            yield "text", part.message.content
        calls += [(call.function.name, orjson.dumps(call.function.arguments).decode())
                  for call in part.message.tool_calls or ()]
    yield "calls", calls


LIVE_FRONTS: dict[str, Callable[[RunningProxy], Read]] = {
    "chat": _chat_live, "responses": _responses_live, "messages": _messages_live,
    "ollama": _ollama_live}


def _read_live(read: Read, gate: threading.Event | None = None) -> tuple[str, list[Any]]:
    """The text the client read (the gate set at its first piece) and the calls."""
    text, calls = "", []
    for kind, value in read:
        if kind == "text":
            text += value
            if gate is not None:
                gate.set()
        else:
            calls = value
    return text, calls


def _reasks(proxy: RunningProxy) -> dict[tuple[str, str], float]:
    """/proxy/metrics's re-asks, by (reason, result), over every dialect."""
    text = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
    counted: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "toolcall_proxy_reasks_total":
                key = (sample.labels["reason"], sample.labels["result"])
                counted[key] = counted.get(key, 0) + sample.value
    return counted


def _reasks_come_to(proxy: RunningProxy, expected: dict[tuple[str, str], float]) -> None:
    """The re-asks counted come to `expected` (a turn's metrics are written as its stream
    ends, which may be just after the client read its last line)."""
    seen: dict[tuple[str, str], float] = {}

    def counted() -> bool:
        seen.clear()
        seen.update(_reasks(proxy))
        return seen == expected

    try:
        wait_for(counted, 5.0)
    except AssertionError:
        assert seen == expected


def _schema_invalid(proxy: RunningProxy) -> float:
    """/proxy/metrics's calls delivered off their schema, over every tool and format."""
    text = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name == "toolcall_proxy_calls_schema_invalid_total")


def _fits_sent(body: dict[str, Any], name: str, arguments: str) -> bool:
    """Whether `arguments` fit the tool `name` as the proxy offered it upstream (the `ollama`
    client keeps less of a schema than the others: its Tool model drops `minimum`, …)."""
    [tool] = [t for t in body["tools"] if t["function"]["name"] == name]
    return check(orjson.loads(arguments), tool["function"]["parameters"]).problems == ()


def _chats(fake: FakeServer) -> list[Any]:
    return [r for r in fake.received if r.path.startswith("/v1/chat/completions")]


@pytest.mark.parametrize("front", sorted(LIVE_FRONTS))
def test_an_unreadable_frame_held_back_in_the_streamed_mode_is_re_asked_before_it_goes_out(
        running, front):
    """The prose flows live (the re-ask waits until the client has it), once; the unread
    frame, held back, never goes out: the re-ask's call comes in its place, whole and valid,
    after one re-ask, counted `unreadable`."""
    gate, waited = threading.Event(), []
    model = constrained_after(gate, botches_arguments("broken", prose=PROSE + "\n"), waited)
    fake, proxy = running("vllm", model, **STREAMED)
    text, calls = _read_live(LIVE_FRONTS[front](proxy), gate)
    assert text == PROSE
    assert waited == [True]  # the live text reached the client before the re-ask answered
    [(name, arguments)] = calls
    assert name == "search"
    first, second = _chats(fake)
    assert _fits_sent(first.json, name, arguments)
    assert first.json["stream"] is True
    assert second.json["stream"] is True
    assert second.json["tool_choice"] == "none"  # constrained in vLLM's own dialect
    _reasks_come_to(proxy, {("unreadable", "recovered"): 1})


@pytest.mark.parametrize("front", sorted(LIVE_FRONTS))
@pytest.mark.parametrize("server", ["vllm", "vllm+parser", "sglang+parser"])
def test_a_call_off_its_schema_goes_out_as_written_in_the_streamed_mode(running, server,
                                                                         front):
    """Read by the proxy or passed on by a tool parser as its own (llama.cpp's lazy tool
    grammar never lets the model write one): the prose live, then the call as the model
    wrote it, one generation, nothing re-asked."""
    fake, proxy = running(server, botches_arguments("violating", prose=PROSE + "\n"),
                          **STREAMED)
    text, calls = _read_live(LIVE_FRONTS[front](proxy))
    assert text.rstrip("\n") == PROSE  # a parser's content keeps the newline before a call
    [(name, arguments)] = calls
    assert name == "search"
    assert not _fits(name, arguments)
    assert len(_chats(fake)) == 1
    assert _reasks(proxy) == {}


@pytest.mark.parametrize("front", sorted(LIVE_FRONTS))
@pytest.mark.parametrize("model", ["cut", "mention"])
def test_a_call_cut_by_length_or_a_mention_in_prose_is_never_re_asked_in_the_streamed_mode(
        running, front, model):
    """As today: the text, the cut frame or the mention included, and nothing asked again."""
    behaviour = (cut_by_length(botches_arguments("broken", prose=PROSE + "\n"))
                 if model == "cut" else says(MENTION))
    fake, proxy = running("vllm", behaviour, **STREAMED)
    text, calls = _read_live(LIVE_FRONTS[front](proxy))
    assert calls == []
    if model == "mention":
        assert text == MENTION
    else:
        assert text.startswith(PROSE + "\n<tool_call>")
    assert len(_chats(fake)) == 1
    assert _reasks(proxy) == {}


def test_an_unreadable_frame_is_not_re_asked_in_the_streamed_mode_where_the_setting_forbids(
        running):
    fake, proxy = running("vllm", botches_arguments("broken", prose=PROSE + "\n"),
                          constrained_reask="demanded", **STREAMED)
    text, calls = _read_live(_chat_live(proxy))
    assert calls == []
    assert text.startswith(PROSE + "\n<tool_call>")
    assert len(_chats(fake)) == 1


def test_the_kept_answer_of_a_streamed_re_ask_is_the_one_the_client_read(running):
    """The answer a Responses client streamed (the live prose, the re-ask's call: one
    answer) is the one kept for `previous_response_id`, not the re-ask's own."""
    _, proxy = running("vllm", botches_arguments("broken", prose=PROSE + "\n"), **STREAMED)
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=20)
    tools = [{"type": "function", "name": t["function"]["name"],
              "parameters": t["function"]["parameters"]} for t in TOOLS]
    with client.responses.stream(model=_model_of(proxy), input=USER[0]["content"],
                                 tools=tools) as events:
        streamed = events.get_final_response()
    kept = client.responses.retrieve(streamed.id)
    for response in (streamed, kept):
        assert [item.type for item in response.output] == ["message", "function_call"]
        assert response.output_text == PROSE
    assert kept.output[1].arguments == streamed.output[1].arguments


def test_heartbeats_keep_the_stream_alive_while_the_re_ask_is_under_way(running):
    """The re-ask begins only once a heartbeat (chat's empty delta) has come after the live
    text: the client's watchdog is fed while upstream works on it, and nothing else flows."""
    gate, waited = threading.Event(), []
    model = constrained_after(gate, botches_arguments("broken", prose=PROSE + "\n"), waited)
    _, proxy = running("vllm", model, heartbeat_seconds=0.2, **STREAMED)
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=30)
    text, kinds = "", []
    for chunk in client.chat.completions.create(model=_model_of(proxy), messages=USER,
                                                tools=TOOLS, stream=True):
        delta = chunk.choices[0].delta.model_dump(exclude_none=True) if chunk.choices else {}
        text += delta.get("content") or ""
        kinds.append("call" if delta.get("tool_calls") else "text" if delta.get("content")
                     else "beat" if not delta and not chunk.choices[0].finish_reason
                     else "other")
        if kinds[-1] == "beat" and text:
            gate.set()
    assert waited == [True]
    assert text == PROSE
    calls_at = kinds.index("call")
    assert "beat" in kinds[kinds.index("text"):calls_at]
    assert "text" not in kinds[calls_at:]


@pytest.mark.parametrize("front", sorted(LIVE_FRONTS))
def test_a_streamed_re_ask_that_brings_no_call_leaves_the_unread_frame_as_text(
        running, front):
    """A model that writes the same botched frame however it is asked (as a server that
    ignores the constraint would let it): the client gets what it would without the re-ask,
    the live text once and the frame after it as text; the re-ask is counted `unmet`."""
    botched = PROSE + '\n<tool_call>\n{"name": "search", "arguments": {"query": "pars'
    fake, proxy = running("vllm", says(botched + "\n</tool_call>"), **STREAMED)
    text, calls = _read_live(LIVE_FRONTS[front](proxy))
    assert calls == []
    assert text == botched + "\n</tool_call>"
    assert len(_chats(fake)) == 2
    _reasks_come_to(proxy, {("unreadable", "unmet"): 1})


def test_the_reasoning_that_flowed_is_kept_once_and_the_re_ask_s_own_is_dropped(running):
    """A model that thinks before its botched call and again before the re-ask's: the client
    (Messages, thinking shown) has the first thinking and prose, once each, then the call."""
    thinking = "The parser lives under proxy; search for it."
    model = thinks(thinking, botches_arguments("broken", prose=PROSE + "\n"))
    _, proxy = running("vllm", model, **STREAMED)
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                                 timeout=20)
    tools = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
             for t in TOOLS]
    live: list[tuple[str, str]] = []
    with client.messages.stream(model=_model_of(proxy), max_tokens=512, messages=USER,
                                tools=tools) as events:
        for event in events:
            if event.type in ("thinking", "text"):
                live.append((event.type, getattr(event, event.type)))
        message = events.get_final_message()
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert (message.content[0].thinking, message.content[1].text) == (thinking, PROSE)
    assert "".join(text for kind, text in live if kind == "thinking") == thinking
    assert "".join(text for kind, text in live if kind == "text") == PROSE
    _reasks_come_to(proxy, {("unreadable", "recovered"): 1})
