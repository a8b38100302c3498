"""Planning a chat completion request: buffered or passthrough, and the upstream body."""

from __future__ import annotations

import orjson
import pytest

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.toolcalls import extract
from proxy.turn.plan import plan_chat
from tests.conftest import TOOLS

CONFIG = Config()


def _plan(**body):
    body.setdefault("model", "m")
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return plan_chat(orjson.dumps(body), CONFIG)


def test_tools_make_the_request_buffered_with_stream_off():
    plan = _plan(tools=TOOLS, stream=True, stream_options={"include_usage": True})
    assert plan.mode == "buffered"
    assert plan.client_stream
    assert plan.include_usage
    upstream = orjson.loads(plan.upstream_body)
    assert upstream["stream"] is False
    assert "stream_options" not in upstream
    assert upstream["tools"] == TOOLS
    assert set(plan.extraction.tools) == {"get_weather", "read"}


@pytest.mark.parametrize("body", [
    {},
    {"tools": TOOLS, "tool_choice": "none"},
    {"tools": None},
])
def test_passthrough_keeps_the_body_byte_for_byte(body):
    raw = orjson.dumps({"model": "m", "messages": [], "stream": True, **body})
    plan = plan_chat(raw, CONFIG)
    assert plan.mode == "passthrough"
    assert plan.upstream_body is raw


def test_named_tool_choice_limits_extraction():
    plan = _plan(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "read"}})
    assert plan.extraction.only == "read"


def test_include_usage_needs_a_streaming_client():
    assert not _plan(tools=TOOLS, stream_options={"include_usage": True}).include_usage


@pytest.mark.parametrize(("raw", "param"), [
    (b"not json", None),
    (b"[1, 2]", None),
    (orjson.dumps({"messages": "hi", "tools": TOOLS}), "messages"),
    (orjson.dumps({"messages": [], "tools": [{"type": "function"}]}), "tools[0].function.name"),
    (orjson.dumps({"messages": [], "tools": [{"function": {"name": "a", "parameters": [1]}}]}),
     "tools[0].function.parameters"),
    (orjson.dumps({"messages": [], "tools": TOOLS,
                   "tool_choice": {"type": "function", "function": {"name": "zzz"}}}),
     "tool_choice"),
    (orjson.dumps({"messages": [], "tools": "read"}), "tools"),
])
def test_bad_requests_are_400_naming_the_param(raw, param):
    with pytest.raises(ProxyError) as caught:
        plan_chat(raw, CONFIG)
    assert caught.value.status == 400
    assert caught.value.param == param
    assert set(caught.value.body()["error"]) == {"message", "type", "param", "code"}


def _history(calls):
    return [{"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        for i in range(calls)]}]


def test_loop_guard_counts_history_tool_calls():
    assert _plan(tools=TOOLS, messages=_history(500)).history_tool_calls == 500
    with pytest.raises(ProxyError) as caught:
        _plan(tools=TOOLS, messages=_history(501))
    assert caught.value.code == "tool_call_loop_guard"


def test_the_history_counts_assistant_calls_and_function_calls_only():
    messages = [*_history(2),
                {"role": "assistant", "content": None,
                 "function_call": {"name": "read", "arguments": "{}"}},
                {"role": "user", "content": "x", "tool_calls": [{"id": "not a call"}]}]
    assert _plan(tools=TOOLS, messages=messages).history_tool_calls == 3


def test_loop_guard_zero_disables_it():
    config = Config(loop_guard_max_tool_calls=0)
    raw = orjson.dumps({"messages": _history(5000), "tools": TOOLS})
    assert plan_chat(raw, config).mode == "buffered"


# Kimi K3: tools declared inside messages[] (issue 41, item 3). ai-dynamo/dynamo's native K3
# renderer (lib/renderer, a port of the checkpoint's encoding_k3.py; K3 ships no Jinja
# template) renders a `system` or `developer` message's own non-empty `tools` as "New Tools
# Available", where the message stands: those tools are offered as `tools` are.
_K3_CALL = ('<|open|>tools<|sep|><|open|>call tool="search_docs" index="1"<|sep|><|open|>'
            'argument key="query" type="string"<|sep|>xtml<|close|>argument<|sep|>'
            '<|close|>call<|sep|><|close|>tools<|sep|>')
_SEARCH = {"name": "search_docs", "description": "Search the docs.",
           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                          "required": ["query"]}}


@pytest.mark.parametrize("declared", [
    {"role": "system", "content": "Tools were loaded.", "tools": [
        {"type": "function", "function": _SEARCH}]},
    {"role": "developer", "content": None, "tools": [_SEARCH]},  # flat, as K3's renderer reads
])
def test_tools_a_system_message_declares_are_offered(declared):
    plan = _plan(messages=[{"role": "user", "content": "Find xtml."}, declared])
    assert plan.mode == "buffered"
    assert set(plan.extraction.tools) == {"search_docs"}
    assert plan.extraction.tools["search_docs"] == _SEARCH["parameters"]
    upstream = orjson.loads(plan.upstream_body)
    assert upstream["messages"][1]["tools"] == declared["tools"]  # the upstream renders them
    assert "tools" not in upstream
    assert "tool_choice" not in upstream
    found = extract(_K3_CALL, plan.extraction.tools, formats=("kimi_k3",))
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [
        ("search_docs", {"query": "xtml"})]


def test_tools_of_the_request_and_of_its_messages_are_offered_together():
    other = {**_SEARCH, "parameters": {"type": "object"}}
    plan = _plan(tools=TOOLS, messages=[
        {"role": "system", "content": "", "tools": [_SEARCH, {"function": {"name": "read",
                                                                         **other}}]},
        {"role": "user", "content": "hi"}])
    assert list(plan.extraction.tools) == ["get_weather", "read", "search_docs"]
    assert plan.extraction.tools["read"] == TOOLS[1]["function"]["parameters"]  # `tools` first


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "hi", "tools": [_SEARCH]}],  # a user's message declares none
    [{"role": "tool", "content": "{}", "tools": [_SEARCH]}],
    [{"role": "system", "content": "hi", "tools": []}],
    [{"role": "system", "content": "hi", "tools": [{"description": "no name"}, "search_docs",
                                                   {"name": ""}]}],
    [{"role": "system", "content": "hi", "tools": {"name": "search_docs"}}],  # not a list
])
def test_what_no_message_declares_as_tools_is_no_tool(messages):
    plan = _plan(messages=messages)
    assert plan.mode == "passthrough"


def test_on_a_tool_turn_only_system_messages_declare_tools():
    plan = _plan(tools=TOOLS, messages=[
        {"role": "user", "content": "hi", "tools": [_SEARCH]},
        {"role": "developer", "content": "", "tools": [{"name": "exec"}]}])
    assert list(plan.extraction.tools) == ["get_weather", "read", "exec"]


def test_tool_choice_none_leaves_message_declared_tools_unasked():
    plan = _plan(tool_choice="none", messages=[
        {"role": "system", "content": "", "tools": [_SEARCH]},
        {"role": "user", "content": "hi"}])
    assert plan.mode == "passthrough"
