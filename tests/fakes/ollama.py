"""A fake Ollama server on loopback: its identity endpoints (`/api/version`, `/api/show`,
`/api/tags`, `/v1/models`), its native `/api/chat` (the `format` field: "json" or a JSON
schema) and its OpenAI-compatible `/v1/chat/completions` (`response_format` turned into
`format`), in its shapes.

Sources, ollama/ollama at the newest snapshot read: `server/routes.go` (ROUTES: the version
route, ShowHandler, the "model '…' not found" 404s), `openai/openai.go` (OPENAI:
ChatCompletionRequest — no `tool_choice` field, so it is ignored; FromChatRequest: only
`json_object` and `json_schema` response formats become `format`, any other type is dropped;
ToChatCompletion and NewError), `middleware/openai.go` (ChatMiddleware: an empty `messages`
refused), `llm/llama_server.go` (a `format` other than "json" or a schema object is an
error), `api/types.go` (ChatResponse, ShowResponse, ToolCall with object arguments).
Ollama's template tool parser (`tools.Parser`) leaves a call it cannot read as text; a model
with a builtin parser (`builtin_parser`, e.g. qwen3-coder) fails the turn (ROUTES: ChatHandler,
`builtinParser.Add` → `parserErr` → `ch <- gin.H{"error": parserErr.Error()}`;
`model/parsers/qwen3coder.go` parseToolCall returns xml.Unmarshal's error; writeChatResponse:
500 `{"error": "…"}` unstreamed, streamResponse: the error as the last NDJSON line once
something was written; `middleware/openai.go` writeError: `openai.NewError(500, …)` on the
OpenAI-compatible route). The message names the parse error, never the model's output.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from tests.fakes.base import Answer, ModelServer, Received, sse
from tests.fakes.constraints import Constraint, UnscriptedConstraint
from tests.fakes.models import Generation, Turn
from tests.fakes.template import ChatTemplate

MODEL = "qwen3.6:27b"
VERSION = "0.13.4"
CREATED_AT = "2026-11-28T09:00:00.000000000Z"


def ollama_openai_error(status: int, message: str) -> Answer:
    """OPENAI: NewError — `{"error": {message, type, param, code}}`, the type by status."""
    kind = {400: "invalid_request_error", 404: "not_found_error"}.get(status, "api_error")
    return Answer(status=status, body={"error": {"message": message, "type": kind,
                                                 "param": None, "code": None}})


def ollama_error(status: int, message: str) -> Answer:
    """The native API's error: `{"error": "…"}` (ROUTES)."""
    return Answer(status=status, body={"error": message})


def _format_constraint(format_: Any) -> Constraint | str | None:
    """What a `format` constrains with (llm/llama_server.go): "json" any object, an object a
    JSON schema; anything else is the error's text."""
    if format_ is None or format_ == "":
        return None
    if format_ == "json":
        return Constraint("json_object")
    if isinstance(format_, dict):
        return Constraint("json_schema", format_)
    quoted = orjson.dumps(orjson.dumps(format_).decode()).decode()  # Go's %q of the raw JSON
    return f'invalid format: {quoted}; expected "json" or a valid JSON Schema object'


def _read_calls(text: str, template: ChatTemplate) -> tuple[str, list[dict[str, Any]]] | None:
    """The calls Ollama's tool parser takes from `text` in the template's wrapper (api
    ToolCall: arguments an object), and the content before them; None without a readable one."""
    start = text.find(template.call_open)
    if start < 0:
        return None
    calls = []
    for index, piece in enumerate(text[start:].split(template.call_open)[1:]):
        try:
            call = orjson.loads(piece.split(template.call_close)[0].strip())
            calls.append({"id": f"call_{uuid.uuid4().hex[:8]}",
                          "function": {"index": index, "name": call["name"],
                                       "arguments": call["arguments"]}})
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None
    return text[:start].strip(), calls


class FakeOllama(ModelServer):
    """The fake Ollama. `models`: the models it has pulled (others are 404s)."""

    def __init__(self, models: tuple[str, ...] = (MODEL,), version: str = VERSION,
                 template: ChatTemplate | None = None, context_length: int = 262144,
                 builtin_parser: str | None = None) -> None:
        self.models = models
        self.builtin_parser = builtin_parser  # a model whose parser fails a call it cannot read
        self.version = version
        self.template = template or ChatTemplate()
        self.context_length = context_length
        super().__init__()

    def chat_requests(self) -> list[Received]:
        """The chat requests received so far, native or OpenAI-compatible."""
        return [r for r in self.received if r.path in ("/api/chat", "/v1/chat/completions")]

    def show(self, model: str) -> dict[str, Any]:
        """ROUTES: ShowHandler's answer (api/types.go ShowResponse): the template, the details,
        model_info with `<architecture>.context_length`, the capabilities."""
        return {"modelfile": f"FROM {model}\n", "parameters": "temperature 0.6",
                "template": self.template.source,
                "details": {"parent_model": "", "format": "gguf", "family": "qwen3",
                            "families": ["qwen3"], "parameter_size": "27B",
                            "quantization_level": "Q4_K_M"},
                "model_info": {"general.architecture": "qwen3",
                               "qwen3.context_length": self.context_length,
                               "general.parameter_count": 27_000_000_000},
                "capabilities": ["completion", "tools", "thinking"],
                "modified_at": CREATED_AT}

    def _route(self, received: Received) -> Answer:
        path, method = received.path.split("?")[0], received.method
        if method in ("GET", "HEAD") and path == "/api/version":
            return Answer(body={"version": self.version})
        if method == "GET" and path == "/api/tags":
            return Answer(body={"models": [{"name": m, "model": m, "modified_at": CREATED_AT,
                                            "size": 16_400_000_000, "digest": "0" * 64,
                                            "details": self.show(m)["details"]}
                                           for m in self.models]})
        if method == "GET" and path == "/v1/models":
            return Answer(body={"object": "list", "data": [
                {"id": m, "object": "model", "created": int(time.time()),
                 "owned_by": "library"} for m in self.models]})
        if method == "POST" and path == "/api/show":
            body = _json_or_none(received)
            model = (body or {}).get("model") or (body or {}).get("name")
            if not model:
                return ollama_error(400, "model is required")
            if model not in self.models:
                return ollama_error(404, f"model '{model}' not found")
            return Answer(body=self.show(model))
        if method == "POST" and path in ("/api/chat", "/v1/chat/completions"):
            assert self._answer is not None
            return self._answer(received)
        return Answer(status=404, body=b"404 page not found",
                      headers={"Content-Type": "text/plain"})

    def _generated(self, received: Received) -> Answer:
        openai = received.path.startswith("/v1/")
        error = ollama_openai_error if openai else ollama_error
        body = _json_or_none(received)
        if not isinstance(body, dict):
            return error(400, "invalid JSON body")
        if openai and not body.get("messages"):
            return error(400, "[] is too short - 'messages'")
        if body.get("model") not in self.models:
            return error(404, f"model '{body.get('model')}' not found")
        format_ = body.get("format")
        if openai:  # OPENAI: FromChatRequest — other response_format types are dropped
            response_format = body.get("response_format") or {}
            kind = str(response_format.get("type", "")).strip().lower()
            schema = (response_format.get("json_schema") or {}).get("schema")
            format_ = "json" if kind == "json_object" else schema if kind == "json_schema" \
                else None
        constraint = _format_constraint(format_)
        if isinstance(constraint, str):
            return error(500, constraint)
        try:
            generation = self._behaviour(Turn(body["messages"], body.get("tools") or [],
                                              constraint))
        except UnscriptedConstraint as failure:
            return error(500, str(failure))
        content, calls = generation.text, None
        if body.get("tools"):
            parsed = _read_calls(generation.text, self.template)
            if parsed is not None:
                content, calls = parsed
            elif self.builtin_parser and self.template.call_open in generation.text:
                # qwen3coder.go parseToolCall: xml.Unmarshal's error, the output not in it
                failure = "XML syntax error on line 1: unexpected EOF"
                before = generation.text[:generation.text.find(self.template.call_open)]
                if openai or body.get("stream") is False or not before:
                    return error(500, failure)
                lines = self._native(body, generation, before, None).chunks or []
                return Answer(chunks=[*lines[:-1], orjson.dumps({"error": failure}) + b"\n"],
                              headers={"Content-Type": "application/x-ndjson"})
        if openai:
            return self._openai(body, generation, content, calls)
        return self._native(body, generation, content, calls)

    def _native(self, body: dict[str, Any], generation: Generation, content: str,
                calls: list[dict[str, Any]] | None) -> Answer:
        """api/types.go ChatResponse; streamed (the default) as NDJSON, one line a piece."""
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if generation.reasoning:
            message["thinking"] = generation.reasoning
        if calls:
            message["tool_calls"] = calls
        final = {"model": body["model"], "created_at": CREATED_AT, "message": message,
                 "done": True, "done_reason": generation.finish_reason,
                 "total_duration": 812000000, "load_duration": 21000000,
                 "prompt_eval_count": 31, "prompt_eval_duration": 48000000,
                 "eval_count": 21, "eval_duration": 402000000}
        if body.get("stream") is False:
            return Answer(body=final)
        pieces = [content[i:i + 4] for i in range(0, len(content), 4)]
        lines = [orjson.dumps({"model": body["model"], "created_at": CREATED_AT,
                               "message": {"role": "assistant", "content": piece},
                               "done": False}) + b"\n" for piece in pieces]
        last = {**final, "message": {**message, "content": ""}}
        return Answer(chunks=[*lines, orjson.dumps(last) + b"\n"],
                      headers={"Content-Type": "application/x-ndjson"})

    def _openai(self, body: dict[str, Any], generation: Generation, content: str,
                calls: list[dict[str, Any]] | None) -> Answer:
        """OPENAI: ToChatCompletion (`reasoning`, `system_fingerprint` "fp_ollama",
        finish "tool_calls" when calls came), or the chunks with a finish chunk of its own."""
        tool_calls = [{"id": c["id"], "index": c["function"]["index"], "type": "function",
                       "function": {"name": c["function"]["name"],
                                    "arguments": orjson.dumps(c["function"]["arguments"]
                                                              ).decode()}}
                      for c in calls or ()]
        finish = "tool_calls" if tool_calls and generation.finish_reason == "stop" \
            else generation.finish_reason
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if generation.reasoning:
            message["reasoning"] = generation.reasoning
        if tool_calls:
            message["tool_calls"] = tool_calls
        head = {"id": f"chatcmpl-{uuid.uuid4().int % 999}", "created": int(time.time()),
                "model": body["model"], "system_fingerprint": "fp_ollama"}
        usage = {"prompt_tokens": 31, "completion_tokens": 21, "total_tokens": 52}
        if not body.get("stream"):
            return Answer(body={**head, "object": "chat.completion", "choices": [
                {"index": 0, "message": message, "finish_reason": finish}], "usage": usage})

        def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
            return sse({**head, "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]})

        parts = [chunk({"role": "assistant", "content": ""})]
        if generation.reasoning:
            parts.append(chunk({"reasoning": generation.reasoning}))
        parts += [chunk({"content": content[i:i + 4]}) for i in range(0, len(content), 4)]
        if tool_calls:
            parts.append(chunk({"tool_calls": tool_calls}))
        parts.append(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            parts.append(sse({**head, "object": "chat.completion.chunk", "choices": [],
                              "usage": usage}))
        return Answer(chunks=[*parts, b"data: [DONE]\n\n"])


def _json_or_none(received: Received) -> Any:
    try:
        return received.json
    except orjson.JSONDecodeError:
        return None
