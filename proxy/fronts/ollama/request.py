"""Ollama requests in the turn's language: `/api/chat` and `/api/generate` bodies → a chat
completion body (pure; a wrong shape is a 400 naming the field, as Ollama's own binder
refuses it).

What is translated how:
- `model`: `name:latest` is the bare name (the upstream serves bare names; `/api/tags` lists
  them so), any other tag is part of the name.
- `messages` (roles lower-cased, as Ollama reads them): `content` (a string), `images` (raw
  base64, their type read from their first bytes) → image parts; `thinking` → `reasoning`
  (what vLLM's templates render for interleaved thinking); `tool_calls` with `arguments` an
  object → chat calls (their id, or one minted from the place in the conversation, the same
  on every request so that the upstream's prefix cache holds); a `tool` message answers the
  call its `tool_call_id` names, else the first unanswered call of its `tool_name`, else the
  next unanswered call (Home Assistant sends neither).
- `tools` as they are (Ollama's are chat functions); `format` `"json"` → `json_object`, a
  schema → `json_schema`; `options` (`num_predict` → `max_tokens`, `temperature`, `top_p`,
  `top_k`, `min_p`, `seed`, `stop`, `presence_penalty`, `frequency_penalty`,
  `repeat_penalty` → `repetition_penalty`; the rest, such as `num_ctx`, is the upstream's to
  decide and left out, noted; `num_ctx` is kept as the window the client believes it set);
  `think` → the template's thinking switch, and a level →
  `reasoning_effort`; `keep_alive` accepted and ignored.
- `/api/generate`: `system` and `prompt` (with `images`) as two messages; with `raw` or a
  `suffix` (a prompt without the template, fill-in-the-middle) it is no turn but one call to
  the upstream's `/v1/completions` (`complete`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import bad_request

_THINK_LEVELS = ("low", "medium", "high", "max")
_ROLES = ("system", "user", "assistant", "tool")
# options → chat fields, each a number (Ollama's `Options`, those a chat completion takes).
_NUMBERS = (("temperature", "temperature"), ("top_p", "top_p"), ("min_p", "min_p"),
            ("presence_penalty", "presence_penalty"),
            ("frequency_penalty", "frequency_penalty"),
            ("repeat_penalty", "repetition_penalty"))
_INTEGERS = (("top_k", "top_k"), ("seed", "seed"))
# Image types by their first bytes (Ollama takes raw image bytes, base64 in JSON).
_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"),
          (b"RIFF", "image/webp"), (b"BM", "image/bmp"))


@dataclass
class Translation:
    """An Ollama request as a chat body, with what the translation decided."""

    body: dict[str, Any]
    model: str  # as the client named it (echoed in every answer)
    stream: bool = True
    rewrites: list[str] = field(default_factory=list)
    num_ctx: int | None = None  # the context window the client asked for


def bare_model(name: str) -> str:
    """The upstream's name for a model an Ollama client names: `name:latest` is `name`."""
    return name.removesuffix(":latest") or name


def _string(value: Any, where: str, *, empty: bool = True) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise bad_request(f"{where}: expected a{'' if empty else ' non-empty'} string.", where)
    return value


def _number(value: Any, where: str, *, integer: bool = False) -> int | float:
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise bad_request(f"{where}: expected {'an integer' if integer else 'a number'}.",
                          where)
    return value


def _image_part(data: Any, where: str) -> dict[str, Any]:
    """A base64 image as a chat image part (a data URL with the type its bytes show; one
    sent as a data URL already is taken as it is)."""
    text = _string(data, where, empty=False)
    if text.startswith("data:"):
        return {"type": "image_url", "image_url": {"url": text}}
    try:
        head = base64.b64decode(text[:64] + "=" * (-len(text[:64]) % 4), validate=False)
    except (binascii.Error, ValueError):
        raise bad_request(f"{where}: expected an image as base64.", where) from None
    kind = next((mime for magic, mime in _MAGIC if head.startswith(magic)), "image/png")
    return {"type": "image_url", "image_url": {"url": f"data:{kind};base64,{text}"}}


def _content(text: Any, images: Any, where: str, images_where: str,
             ) -> str | list[dict[str, Any]]:
    """A text, with its images as parts before it when there are any."""
    said = "" if text is None else _string(text, where)
    if images is None or images == []:
        return said
    if not isinstance(images, list):
        raise bad_request(f"{images_where}: expected a list of base64 images.", images_where)
    parts = [_image_part(image, f"{images_where}.{i}") for i, image in enumerate(images)]
    return [*parts, {"type": "text", "text": said}] if said else parts


def _message_content(message: dict[str, Any], where: str) -> str | list[dict[str, Any]]:
    return _content(message.get("content"), message.get("images"), f"{where}.content",
                    f"{where}.images")


def _arguments(value: Any, where: str) -> str:
    """A call's arguments (an object; a JSON object as text is taken too; none is `{}`) as
    JSON text."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise bad_request(f"{where}: expected an object.", where) from None
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise bad_request(f"{where}: expected an object.", where)
    return orjson.dumps(value).decode()


class _Calls:
    """The calls of the conversation so far that no tool message has answered yet."""

    def __init__(self) -> None:
        self.open: list[tuple[str, str]] = []  # (id, name), in the order they were made

    def made(self, raw: Any, at: int, where: str) -> list[dict[str, Any]]:
        """An assistant message's `tool_calls` as chat calls (ids kept or minted)."""
        if not isinstance(raw, list):
            raise bad_request(f"{where}: expected a list of calls.", where)
        self.open = []
        calls = []
        for k, call in enumerate(raw):
            here = f"{where}.{k}"
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                raise bad_request(f"{here}.function: expected an object.", f"{here}.function")
            name = _string(function.get("name"), f"{here}.function.name", empty=False)
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = f"call_{at}_{k}"
            self.open.append((call_id, name))
            calls.append({"id": call_id, "type": "function", "function": {
                "name": name,
                "arguments": _arguments(function.get("arguments"),
                                        f"{here}.function.arguments")}})
        return calls

    def answered(self, message: dict[str, Any], at: int, where: str) -> str:
        """The id of the call a tool message answers: the one it names by id, else the first
        open call of its `tool_name`, else the next open call."""
        call_id = message.get("tool_call_id")
        if call_id is not None:
            call_id = _string(call_id, f"{where}.tool_call_id", empty=False)
            self.open = [(i, n) for i, n in self.open if i != call_id]
            return call_id
        name = message.get("tool_name")
        if name is not None:
            name = _string(name, f"{where}.tool_name")
        match = next(((i, n) for i, n in self.open if n == name), None)
        if match is None and self.open:
            match = self.open[0]
        if match is None:
            return f"call_{at}"
        self.open.remove(match)
        return match[0]


def _messages(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise bad_request("messages: expected a list of messages.", "messages")
    calls = _Calls()
    out: list[dict[str, Any]] = []
    for i, message in enumerate(raw):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise bad_request(f"{where}: expected a message object.", where)
        role = message.get("role")
        role = _string(role, f"{where}.role").lower()
        if role not in _ROLES:
            raise bad_request(f"{where}.role: expected one of {', '.join(_ROLES)}, "
                              f"not {role!r}.", f"{where}.role")
        if role == "tool":
            content = _message_content(message, where)
            out.append({"role": "tool", "tool_call_id": calls.answered(message, i, where),
                        "content": content})
            continue
        converted: dict[str, Any] = {"role": role, "content": _message_content(message, where)}
        if role == "assistant":
            thinking = message.get("thinking")
            if thinking:
                converted["reasoning"] = _string(thinking, f"{where}.thinking")
            if message.get("tool_calls"):
                converted["tool_calls"] = calls.made(message["tool_calls"], i,
                                                     f"{where}.tool_calls")
                converted["content"] = converted["content"] or None
        out.append(converted)
    return out


def _tools(raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad_request("tools: expected a list of tools.", "tools")
    tools = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or not isinstance(tool.get("function"), dict):
            raise bad_request(f"tools.{i}.function: expected an object.", f"tools.{i}.function")
        tools.append({**tool, "type": "function"})
    return tools


def apply_format(raw: Any, body: dict[str, Any]) -> None:
    """`format`: "json" or a JSON schema, as the upstream's structured output."""
    if raw is None or raw == "":
        return
    if raw == "json":
        body["response_format"] = {"type": "json_object"}
    elif isinstance(raw, dict):
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "format", "schema": raw}}
    else:
        raise bad_request('format: expected "json" or a JSON schema object.', "format")


def apply_options(raw: Any, body: dict[str, Any], rewrites: list[str]) -> int | None:
    """Ollama's `options` as chat fields; those the upstream fixes itself (the context
    length, threads, GPUs) are left out and noted. The context window asked (`num_ctx`)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise bad_request("options: expected an object.", "options")
    known = {"num_predict", "stop"} | {o for o, _ in _NUMBERS} | {o for o, _ in _INTEGERS}
    for ours, theirs in _NUMBERS:
        if raw.get(ours) is not None:
            body[theirs] = _number(raw[ours], f"options.{ours}")
    for ours, theirs in _INTEGERS:
        if raw.get(ours) is not None:
            body[theirs] = _number(raw[ours], f"options.{ours}", integer=True)
    if body.get("seed", 0) < 0:
        del body["seed"]  # Ollama's -1: a random seed
    predict = raw.get("num_predict")
    if predict is not None and _number(predict, "options.num_predict", integer=True) > 0:
        body["max_tokens"] = predict  # -1 (no limit) and -2 (fill the context): the window's
    stop = raw.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise bad_request("options.stop: expected a list of strings.", "options.stop")
        if [s for s in stop if s]:
            body["stop"] = [s for s in stop if s]
    if set(raw) - known - {"num_ctx"}:
        rewrites.append("ollama_options_left_out")
    if raw.get("num_ctx") is None:
        return None
    return int(_number(raw["num_ctx"], "options.num_ctx"))


def _think(raw: Any, body: dict[str, Any], switch: str) -> None:
    """`think`: a boolean, or a level ("low", "medium", "high", "max") that also sets the
    effort, as the model's template thinking switch."""
    if raw is None:
        return
    if isinstance(raw, str) and raw in _THINK_LEVELS:
        body["reasoning_effort"] = "high" if raw == "max" else raw
        on = True
    elif isinstance(raw, bool):
        on = raw
    else:
        raise bad_request('think: expected true, false, "low", "medium", "high" or "max".',
                          "think")
    if switch:
        body["chat_template_kwargs"] = {switch: on}


def _common(raw: dict[str, Any], messages: list[dict[str, Any]],
            config: Config) -> Translation:
    """The fields `/api/chat` and `/api/generate` share, around their messages."""
    model = _string(raw.get("model"), "model", empty=False)
    rewrites: list[str] = []
    body: dict[str, Any] = {"model": bare_model(model), "messages": messages}
    if (tools := _tools(raw.get("tools"))):
        body["tools"] = tools
    apply_format(raw.get("format"), body)
    num_ctx = apply_options(raw.get("options"), body, rewrites)
    _think(raw.get("think"), body, config.messages_thinking_switch)
    stream = raw.get("stream", True)
    if stream is None:
        stream = True
    if not isinstance(stream, bool):
        raise bad_request("stream: expected true or false.", "stream")
    if bare_model(model) != model:
        rewrites.append("ollama_latest_tag_dropped")
    return Translation(body, model, stream, rewrites, num_ctx)


def loads_only(raw: dict[str, Any], generate: bool) -> bool:
    """Whether the request only loads (or, `keep_alive: 0`, unloads) the model: a chat
    without messages, a generate without a prompt or images (Ollama answers it at once)."""
    if generate:
        return not raw.get("prompt") and not raw.get("images") and not raw.get("raw")
    return raw.get("messages") in (None, [])


def translate_chat(raw: dict[str, Any], config: Config) -> Translation:
    """The chat body for an `/api/chat` body (`config`: the one in force for its model)."""
    return _common(raw, _messages(raw.get("messages")), config)


def without_template(raw: dict[str, Any]) -> bool:
    """Whether a generate request asks for no template: `raw`, or a `suffix` to fill in
    before (the upstream's completions take both, its chat neither)."""
    return bool(raw.get("raw")) or bool(raw.get("suffix"))


def translate_generate(raw: dict[str, Any], config: Config) -> Translation:
    """The chat body for an `/api/generate` body: its `system` and `prompt` as messages."""
    prompt = _string(raw.get("prompt", ""), "prompt")
    system = raw.get("system")
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": _string(system, "system")})
    messages.append({"role": "user",
                     "content": _content(prompt, raw.get("images"), "prompt", "images")})
    return _common(raw, messages, config)
