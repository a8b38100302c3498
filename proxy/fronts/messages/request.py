"""Anthropic Messages requests in the turn's language: a Messages body → a chat completion body.

Pure and strict about shapes (a wrong one is a 400 naming the field), lenient about what a
local model cannot use: `cache_control` marks, `metadata`, thinking signatures and server
tools are left out, never refused. What is translated how:

- `system` (a string or text blocks, joined by a blank line) and any `system`-role message
  of the list → one system message; Claude Code's per-request billing line
  (`x-anthropic-billing-header: …`, a new nonce every request) is dropped so that the
  upstream's prefix cache holds, unless `messages_keep_billing_header`.
- user blocks: `text`, `image` (base64 or URL) and plain-text `document`s → content parts;
  each `tool_result` → a `tool` message, in order, before the rest of its user message (its
  text as content, `is_error` as an "Error: " prefix, its images in a user message after).
- assistant blocks: `text` → content, `tool_use` → `tool_calls` (input as a JSON string),
  `thinking` → `reasoning` (what vLLM's templates render for interleaved thinking);
  `redacted_thinking` is left out. A final assistant message is a prefill: continued.
- `tools` (`defer_loading` ones and server tools left out), `tool_choice` (auto, any →
  required, tool → named, none; `disable_parallel_tool_use` → `parallel_tool_calls: false`),
  `max_tokens`, `temperature`, `top_p`, `top_k`, `stop_sequences` → `stop`; `thinking`
  enabled/adaptive/disabled → `chat_template_kwargs[messages_thinking_switch]` true/false.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import bad_request

BILLING_HEADER = "x-anthropic-billing-header:"
_THINKING_ON = {"enabled": True, "adaptive": True, "between_tools": True, "disabled": False}
_SAMPLING = (("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k"))


@dataclass
class Translation:
    """A Messages request as a chat body, with what the translation decided."""

    body: dict[str, Any]
    model: str
    stream: bool = False
    stop_sequences: tuple[str, ...] = ()
    rewrites: list[str] = field(default_factory=list)


def _string(value: Any, where: str, *, empty: bool = True) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise bad_request(f"{where}: expected a{'' if empty else ' non-empty'} string.", where)
    return value


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """Content as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise bad_request(f"{where}: expected a string or a list of content blocks.", where)
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise bad_request(f"{where}.{i}: expected a content block with a type.",
                              f"{where}.{i}")
    return content


def _drop_billing(text: str) -> str:
    """`text` without its billing-header lines (the line and its line end)."""
    if BILLING_HEADER not in text:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(line for line in lines if not line.lstrip().startswith(BILLING_HEADER))


class _System:
    """The system prompt, gathered from `system` and system-role messages."""

    def __init__(self, keep_billing: bool, rewrites: list[str]) -> None:
        self.parts: list[str] = []
        self._keep_billing = keep_billing
        self._rewrites = rewrites

    def add(self, content: Any, where: str) -> None:
        for i, block in enumerate(_blocks(content, where)):
            if block["type"] != "text":
                raise bad_request(f"{where}.{i}: a system prompt holds text blocks only.",
                                  f"{where}.{i}")
            text = _string(block.get("text"), f"{where}.{i}.text")
            if not self._keep_billing:
                kept = _drop_billing(text)
                if kept != text and "drop_billing_header" not in self._rewrites:
                    self._rewrites.append("drop_billing_header")
                text = kept
            if text.strip():
                self.parts.append(text)

    def message(self) -> dict[str, Any] | None:
        return {"role": "system", "content": "\n\n".join(self.parts)} if self.parts else None


def _image_part(block: dict[str, Any], where: str) -> dict[str, Any]:
    """An `image` block as a chat image part (base64 → a data URL)."""
    source = block.get("source")
    source = source if isinstance(source, dict) else {}
    kind = source.get("type")
    if kind == "base64":
        media = _string(source.get("media_type"), f"{where}.source.media_type", empty=False)
        data = _string(source.get("data"), f"{where}.source.data", empty=False)
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url":
        url = _string(source.get("url"), f"{where}.source.url", empty=False)
        return {"type": "image_url", "image_url": {"url": url}}
    raise bad_request(f"{where}.source: an image source must be base64 or url.", f"{where}.source")


def _document_part(block: dict[str, Any], where: str) -> dict[str, Any]:
    """A plain-text `document` as a text part; other documents are refused (no PDF reader)."""
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "text":
        text = _string(source.get("data"), f"{where}.source.data")
        title = block.get("title")
        return {"type": "text", "text": f"{title}\n\n{text}" if isinstance(title, str) else text}
    raise bad_request(f"{where}: only plain-text documents can be sent to this model "
                      "(PDF and file documents are not supported by the proxy).", where)


def _user_part(block: dict[str, Any], where: str) -> dict[str, Any] | None:
    """One user block as a chat content part (None: a block the model does not see)."""
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": _string(block.get("text"), f"{where}.text")}
    if kind == "image":
        return _image_part(block, where)
    if kind == "document":
        return _document_part(block, where)
    if kind in ("thinking", "redacted_thinking"):
        return None
    raise bad_request(f"{where}: content blocks of type {kind!r} are not supported here.", where)


def _tool_result(block: dict[str, Any], where: str,
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A `tool_result` as a tool message, and the images it held (for a user message)."""
    call_id = _string(block.get("tool_use_id"), f"{where}.tool_use_id", empty=False)
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    content = block.get("content", "")
    for i, part in enumerate(_blocks(content, f"{where}.content") if content else ()):
        converted = _user_part(part, f"{where}.content.{i}")
        if converted is None:
            continue
        if converted["type"] == "text":
            texts.append(converted["text"])
        else:
            images.append(converted)
    text = "\n".join(texts)
    if block.get("is_error") is True:
        text = f"Error: {text}" if text else "Error"
    return {"role": "tool", "tool_call_id": call_id, "content": text}, images


def _user_messages(content: Any, where: str) -> list[dict[str, Any]]:
    """A user turn: its tool results as tool messages first, then what the user wrote."""
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for i, block in enumerate(_blocks(content, where)):
        if block["type"] == "tool_result":
            message, held = _tool_result(block, f"{where}.{i}")
            tools.append(message)
            images.extend(held)
        elif (part := _user_part(block, f"{where}.{i}")) is not None:
            parts.append(part)
    parts = images + parts
    if not parts:
        return tools
    if len(parts) == 1 and parts[0]["type"] == "text":
        return [*tools, {"role": "user", "content": parts[0]["text"]}]
    return [*tools, {"role": "user", "content": parts}]


def _assistant_message(content: Any, where: str) -> dict[str, Any] | None:
    """An assistant turn: text, tool calls and the reasoning it showed."""
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(_blocks(content, where)):
        kind, at = block["type"], f"{where}.{i}"
        if kind == "text":
            texts.append(_string(block.get("text"), f"{at}.text"))
        elif kind == "thinking":
            thinking.append(_string(block.get("thinking"), f"{at}.thinking"))
        elif kind == "tool_use":
            arguments = block.get("input", {})
            if not isinstance(arguments, dict):
                raise bad_request(f"{at}.input: expected an object.", f"{at}.input")
            calls.append({"id": _string(block.get("id"), f"{at}.id", empty=False),
                          "type": "function",
                          "function": {"name": _string(block.get("name"), f"{at}.name",
                                                       empty=False),
                                       "arguments": orjson.dumps(arguments).decode()}})
        elif kind != "redacted_thinking":
            raise bad_request(f"{at}: content blocks of type {kind!r} are not supported in an "
                              "assistant message.", at)
    if not (texts or calls or thinking):
        return None
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["reasoning"] = "".join(thinking)
    return message


def _messages(raw: Any, system: _System) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise bad_request("messages: expected a non-empty list.", "messages")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(raw):
        where = f"messages.{i}"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant", "system"):
            raise bad_request(f"{where}.role: expected 'user' or 'assistant'.", f"{where}.role")
        if "content" not in message:
            raise bad_request(f"{where}.content: field required.", f"{where}.content")
        if role == "system":
            system.add(message["content"], f"{where}.content")
        elif role == "user":
            out.extend(_user_messages(message["content"], f"{where}.content"))
        elif (assistant := _assistant_message(message["content"], f"{where}.content")):
            out.append(assistant)
    return out


def _tools(raw: Any, rewrites: list[str]) -> list[dict[str, Any]]:
    """Custom tools as chat functions; deferred ones and server tools are left out."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad_request("tools: expected a list.", "tools")
    tools = []
    for i, tool in enumerate(raw):
        where = f"tools.{i}"
        if not isinstance(tool, dict):
            raise bad_request(f"{where}: expected a tool object.", where)
        name = _string(tool.get("name"), f"{where}.name", empty=False)
        if tool.get("type") not in (None, "custom") and "input_schema" not in tool:
            if "server_tool_left_out" not in rewrites:
                rewrites.append("server_tool_left_out")
            continue
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise bad_request(f"{where}.input_schema: expected a JSON Schema object.",
                              f"{where}.input_schema")
        if tool.get("defer_loading") is True:
            continue
        function: dict[str, Any] = {"name": name, "parameters": schema}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(raw: Any, body: dict[str, Any]) -> None:
    if raw is None:
        return
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "tool":
        name = _string(raw.get("name"), "tool_choice.name", empty=False)
        body["tool_choice"] = {"type": "function", "function": {"name": name}}
    elif kind in ("auto", "any", "none"):
        body["tool_choice"] = {"any": "required"}.get(kind, kind)
    else:
        raise bad_request("tool_choice.type: expected 'auto', 'any', 'tool' or 'none'.",
                          "tool_choice.type")
    if raw.get("disable_parallel_tool_use") is True and kind != "none":
        body["parallel_tool_calls"] = False


def _sampling(raw: dict[str, Any], body: dict[str, Any], *, need_max_tokens: bool) -> None:
    max_tokens = raw.get("max_tokens")
    if max_tokens is not None or need_max_tokens:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise bad_request("max_tokens: expected a positive integer.", "max_tokens")
        body["max_tokens"] = max_tokens
    for ours, theirs in _SAMPLING:
        value = raw.get(ours)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad_request(f"{ours}: expected a number.", ours)
        body[theirs] = value
    stops = raw.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise bad_request("stop_sequences: expected a list of non-empty strings.",
                              "stop_sequences")
        if stops:
            body["stop"] = list(stops)


def _thinking(raw: Any, body: dict[str, Any], switch: str) -> None:
    if raw is None:
        return
    kind = raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(kind, str) or kind not in _THINKING_ON:
        raise bad_request("thinking.type: expected 'enabled', 'adaptive' or 'disabled'.",
                          "thinking.type")
    if switch:
        body["chat_template_kwargs"] = {switch: _THINKING_ON[kind]}


def translate(raw: dict[str, Any], config: Config, *, for_count: bool = False) -> Translation:
    """The chat body for a Messages request body (`for_count`: a count_tokens body, which
    has no max_tokens). `config` is the one in force for the request's model."""
    model = _string(raw.get("model"), "model", empty=False)
    rewrites: list[str] = []
    system = _System(config.messages_keep_billing_header, rewrites)
    if raw.get("system") is not None:
        system.add(raw["system"], "system")
    messages = _messages(raw.get("messages"), system)
    head = system.message()
    body: dict[str, Any] = {"model": model, "messages": [head, *messages] if head else messages}
    if (tools := _tools(raw.get("tools"), rewrites)):
        body["tools"] = tools
        _tool_choice(raw.get("tool_choice"), body)
    elif raw.get("tool_choice") is not None:
        _tool_choice(raw["tool_choice"], {})  # checked, then dropped with the tools
    _sampling(raw, body, need_max_tokens=not for_count)
    _thinking(raw.get("thinking"), body, config.messages_thinking_switch)
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and not last.get("tool_calls"):
        body["continue_final_message"] = True  # a prefill: the answer continues it
        body["add_generation_prompt"] = False
        rewrites.append("assistant_prefill")
    stream = raw.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request("stream: expected true or false.", "stream")
    stops = tuple(body.get("stop", ()))
    return Translation(body, model, stream, stops, rewrites)


def estimate_tokens(body: dict[str, Any]) -> int:
    """A tokenizer-free estimate of a chat body's prompt: a token per 4 UTF-8 bytes of its
    text (messages, reasoning, tool calls, tool schemas), 4 per message for the template's
    framing, and 1,600 per image (Anthropic's cost of an image at its largest)."""
    size, images = 0, 0
    for message in body.get("messages", ()):
        size += 16
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for part in parts:
            if part.get("type") == "image_url":
                images += 1
            elif isinstance(part.get("text"), str):
                size += len(part["text"].encode())
        size += len(message.get("reasoning", "").encode())
        for call in message.get("tool_calls", ()):
            size += len(call["function"]["name"]) + len(call["function"]["arguments"].encode())
    size += sum(len(orjson.dumps(tool)) for tool in body.get("tools", ()))
    return -(-size // 4) + 1600 * images


def tokenize_body(chat: dict[str, Any]) -> dict[str, Any]:
    """vLLM's `/tokenize` request for the prompt a chat body renders (same messages, tools
    and template switches, with the generation prompt the turn would add)."""
    body: dict[str, Any] = {"model": chat["model"], "messages": chat["messages"]}
    for key in ("tools", "chat_template_kwargs", "continue_final_message",
                "add_generation_prompt"):
        if key in chat:
            body[key] = chat[key]
    return body

