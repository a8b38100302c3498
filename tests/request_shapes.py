"""Valid requests of each front, built from the APIs' own shapes, and hypothesis strategies
that break them: any value (a field, an item, a whole list or object) replaced by a value of
every wrong type, or left out. For the wrong-type properties (issue 30, item 5)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"},
                                            "days": {"type": "integer"}},
           "required": ["city"]}
_IMAGE = "data:image/png;base64,iVBORw0KGgo="

# --- chat completions -------------------------------------------------------------------------

_CHAT_MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
    {"role": "user", "name": "ann", "content": [
        {"type": "text", "text": "Weather?"},
        {"type": "image_url", "image_url": {"url": _IMAGE, "detail": "auto"}}]},
    {"role": "assistant", "content": "<think>plan</think>Checking.", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "assistant", "content": None, "reasoning_content": "more",
     "function_call": {"name": "read", "arguments": "{'path': 'a'}"}},
    {"role": "function", "name": "read", "content": "text"},
    {"role": "assistant", "content": [{"type": "text", "text": "Done."}], "refusal": None},
]
_CHAT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                      "parameters": _SCHEMA, "strict": True}},
    {"type": "function", "function": {"name": "read",
                                      "parameters": {"type": "object", "properties": {
                                          "path": {"type": "string"}}}}},
]
_CHAT_BASE = {
    "model": "m", "messages": _CHAT_MESSAGES, "tools": _CHAT_TOOLS, "stream": True,
    "stream_options": {"include_usage": True}, "parallel_tool_calls": False,
    "max_tokens": 50, "max_completion_tokens": 60, "temperature": 0.2, "top_p": 0.9,
    "n": 1, "seed": 7, "stop": ["END"], "logprobs": True, "top_logprobs": 2, "store": True,
    "reasoning_effort": "low", "chat_template_kwargs": {"enable_thinking": False},
    "metadata": {"k": "v"}, "user": "u",
}
CHAT_REQUESTS = [
    {**_CHAT_BASE, "tool_choice": "auto"},
    {**_CHAT_BASE, "tool_choice": "required", "stream": False},
    {**_CHAT_BASE, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    {**_CHAT_BASE, "tool_choice": "none",
     "response_format": {"type": "json_schema",
                         "json_schema": {"name": "w", "schema": _SCHEMA, "strict": True}}},
    {"model": "m", "messages": [{"role": "user", "content": "hi"}],
     "response_format": {"type": "json_object"}},  # no tools: relayed
]

# --- responses --------------------------------------------------------------------------------

_RESPONSES_INPUT = [
    {"type": "message", "role": "developer", "content": "Use tools."},
    {"role": "system", "content": [{"type": "input_text", "text": "Be brief."}]},
    {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Weather?"},
        {"type": "input_image", "image_url": _IMAGE, "detail": "low"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}],
     "encrypted_content": "x"},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [
        {"type": "output_text", "text": "Checking.", "annotations": []},
        {"type": "refusal", "refusal": "no"}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city": "Oslo"}', "status": "completed"},
    {"type": "function_call", "call_id": "call_2", "name": "lookup", "namespace": "crm",
     "arguments": {"q": "x"}},
    {"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch",
     "input": "*** Begin Patch"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {"type": "function_call_output", "call_id": "call_2",
     "output": [{"type": "input_text", "text": "found"},
                {"type": "input_image", "image_url": _IMAGE}]},
    {"type": "custom_tool_call_output", "call_id": "call_3",
     "output": [{"type": "input_text", "text": "ok"}]},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
]
_RESPONSES_TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Weather",
     "parameters": _SCHEMA, "strict": True},
    {"type": "custom", "name": "apply_patch", "description": "Patch",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
    {"type": "namespace", "name": "crm", "description": "CRM", "tools": [
        {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
        {"type": "custom", "name": "note", "format": {"type": "text"}}]},
    {"type": "web_search", "search_context_size": "low"},
]
_RESPONSES_BASE = {
    "model": "m", "instructions": "Be kind.", "input": _RESPONSES_INPUT,
    "tools": _RESPONSES_TOOLS, "parallel_tool_calls": True, "stream": True, "store": True,
    "max_output_tokens": 100, "temperature": 0.5, "top_p": 0.9, "metadata": {"k": "v"},
    "reasoning": {"effort": "low", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
    "text": {"format": {"type": "json_schema", "name": "w", "schema": _SCHEMA, "strict": True},
             "verbosity": "low"},
    "user": "u", "prompt_cache_key": "k", "truncation": "auto", "service_tier": "auto",
}
RESPONSES_REQUESTS = [
    {**_RESPONSES_BASE, "tool_choice": "auto", "previous_response_id": "resp_kept"},
    {**_RESPONSES_BASE, "tool_choice": {"type": "function", "name": "get_weather"},
     "text": {"format": {"type": "json_object"}}},
    {**_RESPONSES_BASE, "tool_choice": {"type": "function", "name": "lookup",
                                        "namespace": "crm"}, "text": {"format": {"type": "text"}}},
    {**_RESPONSES_BASE, "tool_choice": {"type": "custom", "name": "apply_patch"}},
    {**_RESPONSES_BASE, "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [
        {"type": "function", "name": "get_weather"},
        {"type": "function", "name": "lookup", "namespace": "crm"}]}},
    {"model": "m", "input": "hi", "stream": False, "store": False},
]
# What the store holds for `previous_response_id: resp_kept` (items as the front keeps them).
KEPT_ITEMS = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Before"}]},
    {"type": "function_call", "call_id": "call_0", "name": "get_weather", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_0", "output": "rain"},
]

# --- messages ---------------------------------------------------------------------------------

_PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
_MESSAGES = [
    {"role": "user", "content": [
        {"type": "text", "text": "Weather?", "cache_control": {"type": "ephemeral"}},
        {"type": "image", "source": _PNG},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {"type": "document", "title": "Notes",
         "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Let me see.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "xx"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False, "content": [
            {"type": "text", "text": "sunny"}, {"type": "image", "source": _PNG}]},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "failed", "is_error": True},
        {"type": "text", "text": "Go on."}]},
    {"role": "assistant", "content": "Sure"},
]
_MESSAGES_TOOLS = [
    {"name": "get_weather", "description": "Weather", "input_schema": _SCHEMA,
     "cache_control": {"type": "ephemeral"}},
    {"type": "custom", "name": "read", "input_schema": {"type": "object"}, "defer_loading": False},
    {"name": "later", "input_schema": {"type": "object"}, "defer_loading": True},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
]
_MESSAGES_BASE = {
    "model": "m", "max_tokens": 100, "messages": _MESSAGES, "tools": _MESSAGES_TOOLS,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "temperature": 1, "top_p": 0.9, "top_k": 5, "stop_sequences": ["END"], "stream": True,
    "metadata": {"user_id": "u"}, "service_tier": "auto",
}
MESSAGES_REQUESTS = [
    {**_MESSAGES_BASE, "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
     "thinking": {"type": "enabled", "budget_tokens": 1024}},
    {**_MESSAGES_BASE, "tool_choice": {"type": "tool", "name": "get_weather"},
     "thinking": {"type": "disabled"}, "system": "Be brief."},
    {**_MESSAGES_BASE, "tool_choice": {"type": "any"}, "thinking": {"type": "adaptive"}},
    {**_MESSAGES_BASE, "tool_choice": {"type": "none"}, "stream": False},
    {"model": "m", "max_tokens": 5, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]},
]
COUNT_REQUESTS = [{k: v for k, v in body.items() if k not in ("max_tokens", "stream")}
                  for body in MESSAGES_REQUESTS]

# --- Ollama ---------------------------------------------------------------------------------

_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"
_OLLAMA_MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather?", "images": [_PNG]},
    {"role": "assistant", "content": "", "thinking": "plan", "tool_calls": [
        {"function": {"index": 0, "name": "get_weather", "arguments": {"city": "Oslo"}}},
        {"id": "call_x", "function": {"name": "read", "arguments": {"path": "a"}}}]},
    {"role": "tool", "tool_name": "get_weather", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_x", "content": "text"},
    {"role": "tool", "content": "Home Assistant's"},
    {"role": "assistant", "content": "Done."},
]
_OLLAMA_BASE = {
    "model": "m:latest", "messages": _OLLAMA_MESSAGES, "tools": _CHAT_TOOLS[:2],
    "stream": True, "keep_alive": "5m", "think": True,
    "options": {"num_predict": 50, "temperature": 0.2, "top_p": 0.9, "top_k": 20,
                "min_p": 0.05, "seed": 7, "stop": ["END"], "repeat_penalty": 1.1,
                "num_ctx": 8192},
}
OLLAMA_REQUESTS = [
    _OLLAMA_BASE,
    {**_OLLAMA_BASE, "stream": False, "think": "high", "format": "json"},
    {**_OLLAMA_BASE, "think": False, "format": _SCHEMA},
]
OLLAMA_GENERATE_REQUESTS = [
    {"model": "m", "prompt": "Why?", "system": "Be brief.", "images": [_PNG], "stream": False,
     "think": "low", "format": "json", "keep_alive": 0, "options": {"num_predict": 5}},
    {"model": "m", "prompt": "def f(", "suffix": "    return 1", "raw": True, "stream": True,
     "format": _SCHEMA, "options": {"num_predict": 5, "temperature": 0, "stop": ["\n"]}},
]

# --- breaking them ----------------------------------------------------------------------------

MISSING = object()  # the field left out


def nested(levels: int) -> list[Any]:
    """Arrays `levels` deep."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


WRONG_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
    st.sampled_from(["", "function", "user", "text", "auto", "tool", "get_weather"]),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=3)), max_size=2),
    st.dictionaries(st.sampled_from(["type", "name", "text", "x"]),
                    st.one_of(st.none(), st.integers(), st.text(max_size=3)), max_size=2),
    st.just([{}]), st.just([[]]), st.just({"type": "text"}), st.just({"type": None}),
    st.just(nested(40)), st.just(nested(200)), st.just(MISSING),
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in `value` (itself first)."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths(child, (*prefix, index))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """`value` with the place at `path` holding `new` (left out when MISSING); `value`
    unchanged when the path no longer leads anywhere (an earlier change removed it)."""
    if not path:
        return {} if new is MISSING else new
    out = json.loads(json.dumps(value))  # a copy sharing nothing (deepcopy keeps sharing)
    parent = out
    for step in path[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return value
    last = path[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        if new is MISSING:
            parent.pop(last, None)
        else:
            parent[last] = new
    elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        if new is MISSING:
            del parent[last]
        else:
            parent[last] = new
    return out


@st.composite
def broken(draw: st.DrawFn, requests: list[dict[str, Any]]) -> tuple[dict[str, Any], list]:
    """One of `requests` with one to three of its places given a wrong value; with the
    paths changed."""
    body = draw(st.sampled_from(requests))
    places = list(paths(body))[1:]  # the body itself replaced is only "not an object"
    changes = draw(st.lists(st.tuples(st.sampled_from(places), WRONG_VALUES),
                            min_size=1, max_size=3))
    for path, new in changes:
        body = replaced(body, path, new)
    return body, [path for path, _ in changes]
