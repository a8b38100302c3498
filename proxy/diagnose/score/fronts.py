"""The ways through the proxy the score asks a turn: each front's client's request for a
suite turn (None where its API cannot say the turn) and how that client reads the answer,
buffered and streamed. Chat's is the suite's own request; the others say the same turn in
the Responses, Messages and Ollama wire shapes (`--fronts`), and read each answer into the
chat terms the checks judge (`stop_reason` `tool_use` is `tool_calls`, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from .reading import Call, Reading, error_text, read_completion, read_stream
from .suite import SuiteTurn
from .tools import TOOLS


@dataclass(frozen=True)
class FrontWay:
    """A front as the score drives it: its name, the path its turns are posted to, the
    client's request for a turn (model, max_tokens, stream), and the client's reading of
    the answer (status, body, streamed, cost → Reading)."""

    name: str
    path: str
    request: Callable[[SuiteTurn, str, int, bool], dict[str, Any] | None]
    read: Callable[..., Reading]


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _sse_data(body: bytes) -> Iterator[Any]:
    """The JSON of each `data:` line of an event stream (`[DONE]` and comments skipped)."""
    for line in body.splitlines():
        if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
            yield _json(line[5:].strip())


def _refused(status: int, body: bytes, cost: dict[str, Any]) -> Reading:
    return Reading(status, error_text(_json(body), body), **cost)


# -- chat ------------------------------------------------------------------------------------


def _chat_read(status: int, body: bytes, stream: bool, **cost: Any) -> Reading:
    return (read_stream if stream and status < 400 else read_completion)(status, body, **cost)


CHAT = FrontWay("chat", "/v1/chat/completions",
                lambda turn, model, max_tokens, stream: turn.request(model, max_tokens, stream),
                _chat_read)


# -- Responses (Codex) ---------------------------------------------------------------------


def _responses_request(turn: SuiteTurn, model: str, max_tokens: int,
                       stream: bool) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    instructions = None
    for message in turn.messages:
        role = message["role"]
        if role == "system":
            instructions = message["content"]
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
        elif message.get("tool_calls"):
            items += [{"type": "function_call", "call_id": call["id"],
                       "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]}
                      for call in message["tool_calls"]]
        else:
            items.append({"type": "message", "role": role, "content": message["content"]})
    body: dict[str, Any] = {
        "model": model, "input": items, "max_output_tokens": max_tokens, "store": False,
        "stream": stream, "temperature": 0,
        "tools": [{"type": "function", **TOOLS[name]["function"]} for name in turn.tools]}
    if instructions is not None:
        body["instructions"] = instructions
    choice = turn.tool_choice
    if isinstance(choice, dict):
        body["tool_choice"] = {"type": "function", "name": choice["function"]["name"]}
    elif choice is not None:
        body["tool_choice"] = choice
    if turn.thinking:
        body["reasoning"] = {"effort": "medium"}
    return body


def _response_reading(status: int, response: Any, cost: dict[str, Any]) -> Reading:
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, list):
        return Reading(status, "the answer is not a response", **cost)
    content, reasoning, calls = [], [], []
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            content += [part.get("text", "") for part in item.get("content") or ()
                        if isinstance(part, dict) and part.get("type") == "output_text"]
        elif kind == "function_call":
            calls.append(Call(str(item.get("name")), str(item.get("arguments"))))
        elif kind == "reasoning":
            reasoning += [part.get("text", "") for part in item.get("content") or ()
                          if isinstance(part, dict)]
    state = response.get("status")
    finish = ("length" if state == "incomplete" else
              "tool_calls" if calls and state == "completed" else
              "stop" if state == "completed" else state)
    return Reading(status, None, "".join(content), "".join(reasoning), tuple(calls), finish,
                   **cost)


def _responses_read(status: int, body: bytes, stream: bool, **cost: Any) -> Reading:
    if status >= 400:
        return _refused(status, body, cost)
    if not stream:
        return _response_reading(status, _json(body), cost)
    for event in _sse_data(body):
        kind = event.get("type") if isinstance(event, dict) else None
        if kind in ("response.completed", "response.incomplete"):
            return _response_reading(status, event.get("response"), cost)
        if kind in ("error", "response.failed"):
            return Reading(status, error_text(event.get("response", event).get("error")
                                              or event, b""), **cost)
    return Reading(status, "the stream ended without response.completed", **cost)


RESPONSES = FrontWay("responses", "/v1/responses", _responses_request, _responses_read)


# -- Anthropic Messages (Claude Code) ------------------------------------------------------


def _messages_request(turn: SuiteTurn, model: str, max_tokens: int,
                      stream: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    system = None
    for message in turn.messages:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "tool":
            messages.append({"role": "user", "content": [{
                "type": "tool_result", "tool_use_id": message["tool_call_id"],
                "content": message["content"]}]})
        elif message.get("tool_calls"):
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                 "input": orjson.loads(call["function"]["arguments"])}
                for call in message["tool_calls"]]})
        else:
            messages.append({"role": role, "content": message["content"]})
    body: dict[str, Any] = {
        "model": model, "max_tokens": max_tokens, "messages": messages, "stream": stream,
        "temperature": 0,
        "tools": [{"name": name, "description": TOOLS[name]["function"]["description"],
                   "input_schema": TOOLS[name]["function"]["parameters"]}
                  for name in turn.tools]}
    if system is not None:
        body["system"] = system
    choice = turn.tool_choice
    if isinstance(choice, dict):
        body["tool_choice"] = {"type": "tool", "name": choice["function"]["name"]}
    elif choice is not None:
        body["tool_choice"] = {"type": {"required": "any"}.get(choice, choice)}
    if turn.thinking:
        body["thinking"] = {"type": "enabled", "budget_tokens": max(1024, max_tokens // 2)}
        body.pop("temperature")  # Anthropic's API takes no temperature with thinking
    return body


_STOPS = {"tool_use": "tool_calls", "end_turn": "stop", "stop_sequence": "stop",
          "max_tokens": "length"}


def _message_reading(status: int, message: Any, cost: dict[str, Any]) -> Reading:
    blocks = message.get("content") if isinstance(message, dict) else None
    if not isinstance(blocks, list):
        return Reading(status, "the answer is not a message", **cost)
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    thinking = "".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking")
    calls = tuple(Call(str(b.get("name")), orjson.dumps(b.get("input")).decode())
                  for b in blocks if b.get("type") == "tool_use")
    stop = message.get("stop_reason")
    return Reading(status, None, text, thinking, calls, _STOPS.get(stop, stop), **cost)


def _messages_read(status: int, body: bytes, stream: bool, **cost: Any) -> Reading:
    if status >= 400:
        return _refused(status, body, cost)
    if not stream:
        return _message_reading(status, _json(body), cost)
    blocks: dict[int, dict[str, Any]] = {}
    stop = None
    for event in _sse_data(body):
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "error":
            return Reading(status, error_text(event, b""), **cost)
        if kind == "content_block_start":
            block = dict(event["content_block"])
            block["json"] = ""
            blocks[event["index"]] = block
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta.get("type") == "input_json_delta":
                block["json"] += delta["partial_json"]
        elif kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason", stop)
    for block in blocks.values():
        if block.get("type") == "tool_use" and block["json"]:
            block["input"] = _json(block["json"].encode())
    message = {"content": [blocks[i] for i in sorted(blocks)], "stop_reason": stop}
    return _message_reading(status, message, cost)


MESSAGES = FrontWay("messages", "/v1/messages", _messages_request, _messages_read)


# -- Ollama (Home Assistant, Open WebUI) ----------------------------------------------------


def _ollama_request(turn: SuiteTurn, model: str, max_tokens: int,
                    stream: bool) -> dict[str, Any] | None:
    if turn.tool_choice is not None:
        return None  # Ollama's API has no tool_choice
    messages: list[dict[str, Any]] = []
    for message in turn.messages:
        if message.get("tool_calls"):
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": call["function"]["name"],
                              "arguments": orjson.loads(call["function"]["arguments"])}}
                for call in message["tool_calls"]]})
        elif message["role"] == "tool":
            messages.append({"role": "tool", "content": message["content"]})
        else:
            messages.append({"role": message["role"], "content": message["content"]})
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": stream,
                            "tools": [TOOLS[name] for name in turn.tools],
                            "options": {"num_predict": max_tokens, "temperature": 0}}
    if turn.thinking:
        body["think"] = True
    return body


def _ollama_reading(status: int, parts: list[Any], cost: dict[str, Any]) -> Reading:
    content, thinking, calls, finish = [], [], [], None
    for part in parts:
        if not isinstance(part, dict):
            return Reading(status, "an answer line is not JSON", **cost)
        if part.get("error"):
            return Reading(status, str(part["error"]), **cost)
        message = part.get("message") or {}
        content.append(message.get("content") or "")
        thinking.append(message.get("thinking") or "")
        calls += [Call(str(c["function"]["name"]), orjson.dumps(c["function"]["arguments"])
                       .decode()) for c in message.get("tool_calls") or ()]
        if part.get("done"):
            finish = part.get("done_reason")
    if finish == "stop" and calls:
        finish = "tool_calls"  # Ollama says stop with calls too: its clients read the calls
    return Reading(status, None, "".join(content), "".join(thinking), tuple(calls), finish,
                   **cost)


def _ollama_read(status: int, body: bytes, stream: bool, **cost: Any) -> Reading:
    if status >= 400:
        return _refused(status, body, cost)
    lines = [_json(line) for line in body.splitlines() if line.strip()] if stream \
        else [_json(body)]
    return _ollama_reading(status, lines, cost)


OLLAMA = FrontWay("ollama", "/api/chat", _ollama_request, _ollama_read)

WAYS: dict[str, FrontWay] = {way.name: way for way in (CHAT, RESPONSES, MESSAGES, OLLAMA)}
