"""An upstream's parse failure is not the end of the turn (issue 41, item 4), end to end: the
proxy as a real HTTP server before the faithful fakes of llama.cpp (the builds whose chat
parser throws with the output, and the newest, whose error holds none) and Ollama (a builtin
parser's error), read by the official SDKs on every front, buffered and in the streamed mode.
The exact shapes, and the source lines they come from, are the fakes'."""

from __future__ import annotations

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
from tests.conftest import RunningProxy
from tests.fakes.base import FakeServer
from tests.fakes.helpers import TOOLS, USER
from tests.fakes.llamacpp import NEWEST_BUILD, PEG_BUILD, FakeLlamaCpp
from tests.fakes.models import says
from tests.fakes.ollama import FakeOllama
from tests.serving import wait_for

PROSE = "Let me read the hosts file."
# A call the template's wrapper holds in another family's markup: llama.cpp's parser for the
# template (JSON in <tool_call>) cannot read it; the proxy reads Qwen3-Coder's XML.
CALL = ("<tool_call>\n<function=read>\n<parameter=path>\n/etc/hosts\n</parameter>\n"
        "</function>\n</tool_call>")
STREAMED = {"stream_mode": "stream", "thinking_opened_by_template": "false"}
MODES = {"buffer": {}, "stream": STREAMED}


@pytest.fixture
def running() -> Iterator[Callable[..., RunningProxy]]:
    """`running(fake, text, **settings)`: `fake` answering `text`, and a proxy before it."""
    started: list[Any] = []

    def start(fake: FakeServer, text: str, **settings: Any) -> RunningProxy:
        fake.behave(says(text))
        started.append(fake)
        proxy = RunningProxy(build_config({"upstream": fake.url, "log_level": "warning",
                                           **settings}))
        proxy.fake = fake  # type: ignore[attr-defined]
        started.append(proxy)
        return proxy

    yield start
    for thing in reversed(started):
        thing.close()


def _model(proxy: RunningProxy) -> str:
    fake = proxy.fake  # type: ignore[attr-defined]
    return fake.models[0] if isinstance(fake, FakeOllama) else "m"


Read = tuple[str, list[tuple[str, dict[str, Any]]]]  # the text, and each call's name and input


def _chat(proxy: RunningProxy, stream: bool) -> Read:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=20)
    if not stream:
        message = client.chat.completions.create(model=_model(proxy), messages=USER,
                                                 tools=TOOLS).choices[0].message
        return message.content or "", [(c.function.name, orjson.loads(c.function.arguments))
                                       for c in message.tool_calls or ()]
    text, calls = "", {}
    for chunk in client.chat.completions.create(model=_model(proxy), messages=USER,
                                                tools=TOOLS, stream=True):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                entry = calls.setdefault(call.index, ["", ""])
                entry[0] += call.function.name or ""
                entry[1] += call.function.arguments or ""
    return text, [(name, orjson.loads(arguments)) for name, arguments in calls.values()]


def _responses(proxy: RunningProxy, stream: bool) -> Read:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=20)
    tools = [{"type": "function", "name": t["function"]["name"],
              "parameters": t["function"]["parameters"]} for t in TOOLS]
    if stream:
        with client.responses.stream(model=_model(proxy), input=USER[0]["content"],
                                     tools=tools) as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(model=_model(proxy), input=USER[0]["content"],
                                           tools=tools)
    return response.output_text, [(item.name, orjson.loads(item.arguments))
                                  for item in response.output if item.type == "function_call"]


def _messages(proxy: RunningProxy, stream: bool) -> Read:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                                 timeout=20)
    kwargs = {"model": _model(proxy), "max_tokens": 512, "messages": USER,
              "tools": [{"name": t["function"]["name"],
                         "input_schema": t["function"]["parameters"]} for t in TOOLS]}
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    text = "".join(block.text for block in message.content if block.type == "text")
    return text, [(block.name, block.input) for block in message.content
                  if block.type == "tool_use"]


def _ollama(proxy: RunningProxy, stream: bool) -> Read:
    client = ollama.Client(host=proxy.url, timeout=20)
    if not stream:
        message = client.chat(_model(proxy), USER, tools=TOOLS, stream=False).message
        return message.content or "", [(c.function.name, dict(c.function.arguments))
                                       for c in message.tool_calls or ()]
    text, calls = "", []
    for part in client.chat(_model(proxy), USER, tools=TOOLS, stream=True):
        text += part.message.content or ""
        calls += [(c.function.name, dict(c.function.arguments))
                  for c in part.message.tool_calls or ()]
    return text, calls


FRONTS: dict[str, Callable[[RunningProxy, bool], Read]] = {
    "chat": _chat, "responses": _responses, "messages": _messages, "ollama": _ollama}


def _rescued(proxy: RunningProxy) -> dict[str, float]:
    """/proxy/metrics's rescues, by server."""
    text = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
    return {sample.labels["server"]: sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name == "toolcall_proxy_upstream_errors_rescued_total"}


def _chats(proxy: RunningProxy) -> list[Any]:
    """The chat requests the fake received."""
    fake = proxy.fake  # type: ignore[attr-defined]
    return [r for r in fake.received if "chat" in r.path]


@pytest.mark.parametrize("client_streams", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("front", sorted(FRONTS))
def test_a_call_llama_cpp_s_parser_threw_on_is_delivered(running, front, mode, client_streams):
    """llama.cpp answers 500 (buffered; streamed, the error event after the prose it sent):
    the client gets the call, as if llama.cpp had read it, on one generation."""
    proxy = running(FakeLlamaCpp(build=PEG_BUILD), f"{PROSE}\n{CALL}", **MODES[mode])
    text, calls = FRONTS[front](proxy, client_streams)
    assert calls == [("read", {"path": "/etc/hosts"})]
    # The prose before the call: streamed, sent before the error event; asked unstreamed,
    # llama.cpp's message holds the output from the call on only, and the prose is lost.
    streamed = mode == "stream" and client_streams
    assert text.strip() == (PROSE if streamed else "")
    assert len(_chats(proxy)) == 1  # no re-ask: the output was read
    # (a turn is counted as its answer ends, just after the client read its last byte)
    wait_for(lambda: _rescued(proxy) == {"llama.cpp": 1})


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_whole_output_without_a_call_is_delivered_as_its_text(running, mode):
    """The parse stopped at the first byte: the error holds all the model wrote."""
    answer = "<tool_call> tags are how I would call a tool; none fits this."
    proxy = running(FakeLlamaCpp(build=PEG_BUILD), answer, **MODES[mode])
    text, calls = _chat(proxy, stream=mode == "stream")
    assert (text, calls) == (answer, [])
    # (a turn is counted as its answer ends, just after the client read its last byte)
    wait_for(lambda: _rescued(proxy) == {"llama.cpp": 1})


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("fake", ["llama.cpp newest", "ollama builtin parser"])
def test_where_the_error_holds_no_output_today_s_error_stands(running, fake, mode):
    """llama.cpp from b9769 keeps the output in its log; Ollama's parser errors never hold
    it: the client gets the upstream's error, as today, and nothing is counted rescued."""
    server = (FakeLlamaCpp(build=NEWEST_BUILD) if fake.startswith("llama")
              else FakeOllama(builtin_parser="qwen3-coder"))
    proxy = running(server, CALL, **MODES[mode])
    with pytest.raises(openai.APIError) as raised:
        _chat(proxy, stream=mode == "stream")
    if isinstance(raised.value, openai.APIStatusError):
        assert raised.value.status_code in (500, 502)
    assert _rescued(proxy) == {}


def test_a_call_llama_cpp_read_itself_is_not_a_rescue(running):
    proxy = running(FakeLlamaCpp(build=PEG_BUILD),
                    f'{PROSE}\n<tool_call>\n{{"name": "read", "arguments": {{"path": "/a"}}}}'
                    "\n</tool_call>")
    text, calls = _chat(proxy, stream=False)
    assert text.strip() == PROSE  # llama.cpp read it: its content, as it is
    assert calls == [("read", {"path": "/a"})]
    assert _rescued(proxy) == {}
