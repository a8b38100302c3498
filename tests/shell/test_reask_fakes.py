"""Constrained re-asks against the faithful fakes (tests/fakes/): vLLM 0.33 with and without a
tool parser, llama.cpp and SGLang, whose models never call unless constrained or botch their
arguments; through every front and both modes, read by the official SDKs. What each server
does with a demanded call, and what it refuses, is the fake's (its source in comments there);
the proxy must end every demanded turn with the call and mend every botched call it can see."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import orjson
import pytest

from proxy.shell.config_load import build_config
from proxy.toolcalls.validity import check
from tests.conftest import RunningProxy
from tests.fakes.base import FakeServer
from tests.fakes.helpers import TOOLS, USER, parameters_of
from tests.fakes.llamacpp import FakeLlamaCpp
from tests.fakes.models import botches_arguments, never_calls_unless_constrained
from tests.fakes.ollama import FakeOllama
from tests.fakes.sglang import FakeSGLang
from tests.fakes.vllm import FakeVLLM

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


@pytest.mark.parametrize("how", ["broken", "violating"])
@pytest.mark.parametrize("server", ["vllm", "vllm+parser", "sglang+parser"])
def test_a_botched_call_comes_out_valid(running, server, how):
    _, proxy = running(server, botches_arguments(how))
    if server == "sglang+parser" and how == "broken":
        pytest.skip("SGLang's parser drops a call it cannot read: nothing reaches the proxy")
    [(name, arguments)] = _chat(proxy, stream=False)
    assert name == "search"
    assert _fits(name, arguments)


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
