"""A Responses API request as the chat completion the turn runs: `input` items to messages,
`instructions` to the system message, tools and options to their chat names.

Unknown fields are ignored (clients send many: `include`, `prompt_cache_key`, …); a known
field of the wrong type is a 400 naming it. Ids on items are tolerated and not sent on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ...base.errors import ProxyError, bad_request
from .tools import Toolset, custom_arguments, flat_name, read_tool_choice, read_tools

ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
_TEXT_PARTS = ("input_text", "output_text", "text")
_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_SKIPPED = ("reasoning",)  # replayed by clients; its text is never re-sent as content


@dataclass
class Translation:
    """The chat body for the turn, with what the Responses side needs to answer."""

    body: dict[str, Any]
    toolset: Toolset
    items: list[dict[str, Any]]  # this request's own input, as items (what a store keeps)
    notes: list[str] = field(default_factory=list)  # for the log line


def _typed(body: dict[str, Any], key: str, types: tuple[type, ...], what: str) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise bad_request(f"{key} must be {what}.", key)
    return value


def input_items(value: Any) -> list[dict[str, Any]]:
    """The request's `input` as a list of items (a string is one user message)."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": value}]}]
    if not isinstance(value, list):
        raise bad_request("input must be a string or a list of items.", "input")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise bad_request(f"input[{i}] must be an object.", f"input[{i}]")
    return value


def _part(part: Any, where: str) -> dict[str, Any] | None:
    """One content part as a chat part (None: a part with nothing for the model)."""
    if not isinstance(part, dict):
        raise bad_request(f"{where} must be an object.", where)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        text = part.get("text")
        if not isinstance(text, str):
            raise bad_request(f"{where}.text must be a string.", f"{where}.text")
        return {"type": "text", "text": text}
    if kind == "refusal":
        return None
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str) or not url:
            raise bad_request(
                f"{where} needs an image_url (images by file_id need OpenAI's Files API, "
                "which a chat completions server does not have).", f"{where}.image_url")
        image: dict[str, Any] = {"url": url}
        if isinstance(part.get("detail"), str):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    raise bad_request(
        f"{where}.type {kind!r} is not supported (text and images are).", f"{where}.type")


def content_of(content: Any, where: str, *, text_only: bool = False,
               joiner: str = "\n") -> Any:
    """A message's (or a tool output's) content for chat: a string, or a list of parts when
    it holds an image."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"{where} must be a string or a list of parts.", where)
    parts = [p for j, part in enumerate(content) if (p := _part(part, f"{where}[{j}]"))]
    if all(p["type"] == "text" for p in parts):
        return joiner.join(p["text"] for p in parts)
    if text_only:
        raise bad_request(f"{where} may hold text only.", where)
    return parts


class _Conversation:
    """Chat messages built item by item: calls join the assistant message before them."""

    def __init__(self, toolset: Toolset) -> None:
        self.toolset = toolset
        self.messages: list[dict[str, Any]] = []

    def message(self, item: dict[str, Any], where: str) -> None:
        role = ROLES.get(item["role"]) if isinstance(item.get("role"), str) else None
        if role is None:
            raise bad_request(f"{where}.role must be one of {', '.join(ROLES)}.", f"{where}.role")
        content = content_of(item.get("content"), f"{where}.content",
                             text_only=role != "user", joiner="" if role == "assistant" else "\n")
        last = self.messages[-1] if self.messages else None
        if role == "assistant" and last and last["role"] == "assistant" and not last["content"]:
            last["content"] = content  # text written after this turn's calls
            return
        self.messages.append({"role": role, "content": content})

    def call(self, item: dict[str, Any], where: str) -> None:
        call_id = _field(item, "call_id", where)
        name = _field(item, "name", where)
        namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else None
        if item["type"] == "custom_tool_call":
            arguments = custom_arguments(_field(item, "input", where, empty=True))
        else:
            raw = item.get("arguments")
            raw = orjson.dumps(raw).decode() if isinstance(raw, dict) else raw
            if not isinstance(raw, str):
                raise bad_request(f"{where}.arguments must be a string.", f"{where}.arguments")
            arguments = raw
        call = {"id": call_id, "type": "function",
                "function": {"name": flat_name(name, namespace), "arguments": arguments}}
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] != "assistant":
            last = {"role": "assistant", "content": None}
            self.messages.append(last)
        last.setdefault("tool_calls", []).append(call)

    def output(self, item: dict[str, Any], where: str) -> None:
        call_id = _field(item, "call_id", where)
        content = content_of(item.get("output"), f"{where}.output")
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


def _field(item: dict[str, Any], key: str, where: str, *, empty: bool = False) -> str:
    value = item.get(key)
    if not isinstance(value, str) or (not value and not empty):
        raise bad_request(f"{where}.{key} must be a {'' if empty else 'non-empty '}string.",
                          f"{where}.{key}")
    return value


def to_messages(items: list[dict[str, Any]], toolset: Toolset, first: int,
                notes: list[str]) -> list[dict[str, Any]]:
    """Chat messages for the conversation's items; those from `first` on are the request's
    own `input` (named `input[i]` in errors), those before it a kept conversation."""
    talk = _Conversation(toolset)
    skipped: list[str] = []
    for i, item in enumerate(items):
        where = f"input[{i - first}]" if i >= first else "previous_response_id"
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            talk.message(item, where)
        elif kind in _CALLS:
            talk.call(item, where)
        elif kind in _OUTPUTS:
            talk.output(item, where)
        elif kind not in _SKIPPED:
            skipped.append(str(kind)[:40])  # another API's item (a hosted tool's call, …)
    if skipped:
        notes.append("input_items_left_out:" + ",".join(sorted(set(skipped))))
    return talk.messages


def _with_system(messages: list[dict[str, Any]], instructions: str | None,
                 notes: list[str]) -> list[dict[str, Any]]:
    """`instructions` and the system (developer) messages that open the conversation, as
    one first system message: chat templates refuse a second one at the start."""
    texts = [instructions] if instructions else []
    lead = 0
    while lead < len(messages) and messages[lead]["role"] == "system":
        texts.append(messages[lead]["content"])
        lead += 1
    if len(texts) > 1:
        notes.append("system_messages_merged")
    head = [{"role": "system", "content": "\n\n".join(texts)}] if texts else []
    return head + messages[lead:]


def _text_format(text: Any) -> dict[str, Any] | None:
    """`text.format` as the chat `response_format` (None: plain text)."""
    if text is None:
        return None
    if not isinstance(text, dict):
        raise bad_request("text must be an object.", "text")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object",
                                                             "json_schema"):
        raise bad_request("text.format.type must be 'text', 'json_object' or 'json_schema'.",
                          "text.format")
    if fmt["type"] == "text":
        return None
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    if not isinstance(fmt.get("schema"), dict):
        raise bad_request("text.format.schema must be a JSON object.", "text.format.schema")
    schema = {key: fmt[key] for key in ("name", "schema", "strict", "description")
              if fmt.get(key) is not None}
    schema.setdefault("name", "response")
    return {"type": "json_schema", "json_schema": schema}


def _options(body: dict[str, Any], chat: dict[str, Any]) -> None:
    """The sampling and output options, under their chat names."""
    limit = _typed(body, "max_output_tokens", (int,), "an integer")
    if limit is not None:
        if limit < 1:
            raise bad_request("max_output_tokens must be at least 1.", "max_output_tokens")
        chat["max_tokens"] = limit
    for key in ("temperature", "top_p"):
        value = _typed(body, key, (int, float), "a number")
        if value is not None:
            chat[key] = value
    if _typed(body, "parallel_tool_calls", (bool,), "true or false") is not None:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    response_format = _text_format(body.get("text"))
    if response_format is not None:
        chat["response_format"] = response_format
    reasoning = _typed(body, "reasoning", (dict,), "an object")
    if reasoning and reasoning.get("effort") is not None:
        if not isinstance(reasoning["effort"], str):
            raise bad_request("reasoning.effort must be a string.", "reasoning.effort")
        chat["reasoning_effort"] = reasoning["effort"]


def check_fields(body: dict[str, Any]) -> None:
    """The types of the fields the front reads but does not translate."""
    for key, types, what in (("model", (str,), "a string"), ("stream", (bool,), "true or false"),
                             ("store", (bool,), "true or false"),
                             ("instructions", (str,), "a string"),
                             ("previous_response_id", (str,), "a string"),
                             ("metadata", (dict,), "an object")):
        _typed(body, key, types, what)
    if body.get("conversation") is not None:
        raise bad_request(
            "conversation (OpenAI's Conversations API) is not supported by this proxy; "
            "send the items as input, or continue with previous_response_id.",
            "conversation")


def translate(body: dict[str, Any], history: list[dict[str, Any]]) -> Translation:
    """The chat body for a Responses request continuing `history` (the items of a kept
    conversation, or [])."""
    check_fields(body)
    if body.get("input") is None and not history:
        raise bad_request("input is required.", "input")
    own = input_items(body["input"]) if body.get("input") is not None else []
    toolset = read_tools(body.get("tools"))
    notes = [f"hosted_tools_left_out:{','.join(toolset.left_out)}"] if toolset.left_out else []
    choice = read_tool_choice(body.get("tool_choice"), toolset)
    messages = to_messages([*history, *own], toolset, len(history), notes)
    chat: dict[str, Any] = {"messages": _with_system(messages, body.get("instructions"),
                                                     notes)}
    if isinstance(body.get("model"), str):
        chat["model"] = body["model"]
    if toolset.functions:
        chat["tools"] = toolset.functions
        if choice is not None:
            chat["tool_choice"] = choice
    _options(body, chat)
    return Translation(chat, toolset, own, notes)


def previous_missing(response_id: str) -> ProxyError:
    """`previous_response_id` names a response the store does not hold."""
    return ProxyError(404, f"Previous response with id '{response_id}' not found.",
                      param="previous_response_id", code="previous_response_not_found")
