"""A fake llama.cpp server (`llama-server --jinja`) on loopback: its identity endpoints
(`/props`, `/apply-template`, `/v1/models`, `/health`), the checks `oaicompat_chat_params_parse`
applies, its constraint fields (`json_schema`, `grammar`, `response_format`), its tool-call
grammar, and its answer shapes (`timings`, `system_fingerprint` = the build).

Sources, ggml-org/llama.cpp at the newest snapshot read: `tools/server/server-common.cpp`
(COMMON: oaicompat_chat_params_parse), the server's `ex_wrapper` and `format_error_response`
(invalid_argument → 400 invalid_request_error, any other exception → 500 server_error),
`tools/server/server-context.cpp` (CONTEXT: the props and models JSON),
`tools/server/server-task.cpp` (TASK: to_json_oaicompat_chat), `common/chat.cpp` (CHAT: the
tool_choice parse, the lazy tool-call grammar, the generic handler for tools + json_schema).
A tool turn whose output the chat parser cannot read, by build (CHAT: common_chat_peg_parse;
the builds from llama.rn's vendored copies, cpp/common/chat.cpp at its syncs to b8475 and
b9204, then b9769): before the PEG parser (< b8475) the output is the content; b8475–b9768
throw "Failed to parse input at pos N: " + the output from N (N: where the parse stopped, the
call's opener, as issues #24644 and #23838 show it), from b9769 "The model produced output
that does not match the expected <format> format" (the output in the log only). The server
(`format_error_response`, ERROR_TYPE_SERVER; `handle_completions_impl`) answers it 500
`{"error": {code, message, type: server_error}}`, or, once a stream has sent its first result,
`data: {"error": {…}}` and no `[DONE]`.
Known bugs copied on purpose: `required` accepted and not enforced (#27217, #27767); an
object-form (named) `tool_choice` silently read as "auto" (#26535; PR #28806 not merged).
"""

from __future__ import annotations

import random
import string
import time
import uuid
from typing import Any

import orjson

from tests.fakes.base import Answer, ModelServer, Received, sse
from tests.fakes.constraints import Constraint, UnscriptedConstraint
from tests.fakes.models import Generation, Turn
from tests.fakes.template import ChatTemplate

MODEL = "Qwen3.6-27B-Q4_K_M.gguf"
BUILD = "b7316-4c8a2f1e"
PEG_BUILD = "b9204-557e7511"  # the PEG chat parser, its failure's message holding the output
NEWEST_BUILD = "b9769-6d85189e"  # the PEG chat parser, its failure's message without it
_PEG_FROM, _WITHOUT_OUTPUT_FROM = 8475, 9769


def build_number(build: str) -> int:
    """`b9204-557e7511` → 9204 (0 when unread)."""
    head = build.split("-", 1)[0].lstrip("b")
    return int(head) if head.isdigit() else 0


def parse_failure(build: str, text: str, opener: str) -> str | None:
    """CHAT: the message common_chat_peg_parse throws for `text`, an output holding a call
    (`opener`) its parser cannot read, on `build`; None where the build reads it as content
    (before the PEG parser). The generation prompt (empty for this template) comes first."""
    number = build_number(build)
    if number < _PEG_FROM:
        return None
    if number >= _WITHOUT_OUTPUT_FROM:
        return ("The model produced output that does not match the expected peg-native "
                "format")
    at = max(0, text.find(opener))
    return f"Failed to parse input at pos {at}: {text[at:]}"

# The fields oaicompat_chat_params_parse and params_from_json_cmpl (TASK) read; the rest of a
# body is copied into llama_params and never looked at (COMMON: "Copy remaining properties").
READ_FIELDS = frozenset({
    "messages", "model", "tools", "tool_choice", "stream", "stream_options", "stop",
    "json_schema", "grammar", "response_format", "parallel_tool_calls", "add_generation_prompt",
    "reasoning_format", "chat_template_kwargs", "logprobs", "top_logprobs", "max_tokens",
    "max_completion_tokens", "n_predict", "temperature", "top_k", "top_p", "min_p",
    "typical_p", "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty",
    "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "mirostat",
    "mirostat_tau", "mirostat_eta", "seed", "n_probs", "min_keep", "ignore_eos", "logit_bias",
    "samplers", "cache_prompt", "n_keep", "n_indent", "id_slot", "t_max_predict_ms",
    "return_tokens", "timings_per_token", "post_sampling_probs", "lora", "n", "user",
    "reasoning_effort", "thinking_forced_open", "xtc_probability", "xtc_threshold",
    "dynatemp_range", "dynatemp_exponent", "top_n_sigma", "preserved_tokens"})


def llamacpp_error(status: int, message: str) -> Answer:
    """llama.cpp's error envelope (format_error_response): code, message, type by status."""
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            500: "server_error", 501: "not_supported_error", 503: "unavailable_error"}[status]
    return Answer(status=status, body={"error": {"code": status, "message": message,
                                                 "type": kind}})


def _call_id() -> str:
    """A tool call id as llama.cpp generates one (gen_tool_call_id: 32 random alphanumerics)."""
    return "".join(random.choices(string.ascii_letters + string.digits, k=32))


def llamacpp_completion(content: str | None, *, tool_calls: list[dict[str, Any]] | None = None,
                        reasoning: str | None = None, finish_reason: str = "stop",
                        model: str = MODEL, build: str = BUILD) -> dict[str, Any]:
    """A chat completion as llama.cpp serialises it (TASK: to_json_oaicompat_chat; CHAT:
    common_chat_msg::to_json_oaicompat): content null when only calls came,
    `reasoning_content` only when there is some, `timings` beside `usage`."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": None if tool_calls and not content else content or ""}
    if reasoning:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "choices": [{"finish_reason": finish_reason, "index": 0, "message": message}],
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": build,
        "object": "chat.completion",
        "usage": {"completion_tokens": 21, "prompt_tokens": 31, "total_tokens": 52,
                  "prompt_tokens_details": {"cached_tokens": 0}},
        "id": f"chatcmpl-{uuid.uuid4().hex[:32]}",
        "timings": {"cache_n": 0, "prompt_n": 31, "prompt_ms": 48.2,
                    "prompt_per_token_ms": 1.55, "prompt_per_second": 643.2,
                    "predicted_n": 21, "predicted_ms": 402.7, "predicted_per_token_ms": 19.2,
                    "predicted_per_second": 52.1},
    }


def llamacpp_stream_of(completion: dict[str, Any], size: int = 4,
                       usage: bool = False) -> list[bytes]:
    """The stream llama.cpp sends for `completion`: the role chunk (content null), content and
    reasoning diffs, each call's head (index, id, name, empty arguments) then its arguments
    in pieces, the finish chunk with `timings`, the usage chunk when asked, `[DONE]`."""
    head = {"created": completion["created"], "id": completion["id"],
            "model": completion["model"], "system_fingerprint": completion["system_fingerprint"],
            "object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        return sse({"choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
                    **head, **extra})

    message = completion["choices"][0]["message"]
    parts = [chunk({"role": "assistant", "content": None})]
    for key in ("reasoning_content", "content"):
        text = message.get(key) or ""
        parts += [chunk({key: text[i:i + size]}) for i in range(0, len(text), size)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        parts.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                            "function": {"name": call["function"]["name"],
                                                         "arguments": ""}}]}))
        arguments = call["function"]["arguments"]
        parts += [chunk({"tool_calls": [{"index": index,
                                         "function": {"arguments": arguments[i:i + size]}}]})
                  for i in range(0, len(arguments), size)]
    parts.append(chunk({}, completion["choices"][0]["finish_reason"],
                       timings=completion["timings"]))
    if usage:
        parts.append(sse({"choices": [], **head, "usage": completion["usage"],
                          "timings": completion["timings"]}))
    return [*parts, b"data: [DONE]\n\n"]


def _tool_choice(body: dict[str, Any]) -> str:
    """COMMON: json_value(body, "tool_choice", "auto"): a value that is not a string (a named
    choice) is read as the default, "auto", with only a warning in the server's log."""
    choice = body.get("tool_choice", "auto")
    return choice if isinstance(choice, str) else "auto"


def _response_schema(body: dict[str, Any]) -> Any:
    """COMMON: the JSON schema asked for: `json_schema`, replaced by `response_format`'s."""
    schema = body.get("json_schema")
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        kind = response_format.get("type") or ""
        if kind == "json_object":
            schema = response_format.get("schema", {})
        elif kind == "json_schema":
            schema = (response_format.get("json_schema") or {}).get("schema", {})
    return schema


def _messages_rejection(body: dict[str, Any]) -> Answer | None:
    """COMMON: the messages' checks (std::invalid_argument: 400)."""
    if "messages" not in body:
        return llamacpp_error(400, "'messages' is required")
    if not isinstance(body["messages"], list):
        return llamacpp_error(400, "Expected 'messages' to be an array")
    for message in body["messages"]:
        message = message if isinstance(message, dict) else {}
        role = message.get("role")
        if role != "assistant" and "content" not in message:
            return llamacpp_error(400, "All non-assistant messages must contain 'content'")
        if role == "assistant" and "content" not in message and "tool_calls" not in message:
            return llamacpp_error(400, "Assistant message must contain either 'content' or "
                                  "'tool_calls'!")
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            return llamacpp_error(400, "Expected 'content' to be a string or an array")
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in ("text", "image_url", "input_audio"):
                return llamacpp_error(400, "unsupported content[].type")
    return None


def validate_like_llamacpp(body: Any, jinja: bool) -> Answer | None:
    """The refusal llama-server answers `body` with before generating, or None."""
    if not isinstance(body, dict):
        return llamacpp_error(500, "[json.exception.type_error.302] type must be object")
    tools = body.get("tools")
    has_tools = isinstance(tools, list) and bool(tools)
    raw_choice = body.get("tool_choice", "auto")
    choice = _tool_choice(body)
    # COMMON: std::runtime_error, so a 500
    if not jinja and has_tools:
        return llamacpp_error(500, "tools param requires --jinja flag")
    if not jinja and choice != "auto":
        return llamacpp_error(500, "tool_choice param requires --jinja flag")
    if body.get("json_schema") is not None and body.get("grammar"):
        return llamacpp_error(500, "Cannot use both json_schema and grammar")
    response_format = body.get("response_format")
    if response_format is not None:
        kind = (response_format.get("type") if isinstance(response_format, dict) else "") or ""
        if kind not in ("", "text", "json_object", "json_schema"):
            return llamacpp_error(400, 'response_format type must be one of "text" or '
                                  f'"json_object", but got: {kind}')
    rejection = _messages_rejection(body)
    if rejection is not None:
        return rejection
    # CHAT: common_chat_tool_choice_parse_oaicompat
    if isinstance(raw_choice, str) and raw_choice not in ("auto", "none", "required"):
        return llamacpp_error(400, f"Invalid tool_choice: {raw_choice}")
    if has_tools and choice != "none" and "grammar" in body:
        return llamacpp_error(400, "Cannot use custom grammar constraints with tools.")
    if body.get("logprobs") and has_tools and body.get("stream"):
        return llamacpp_error(400, "logprobs is not supported with tools + stream")
    if not body.get("logprobs") and body.get("top_logprobs") is not None:
        return llamacpp_error(400, "top_logprobs requires logprobs to be set to true")
    return None


def tool_grammar(tools: list[dict[str, Any]], template: ChatTemplate,
                 at_least_one: bool) -> Constraint:
    """CHAT: the grammar llama.cpp builds for tools — lazy, armed by the call opener, each call
    `{"name": …, "arguments": <the tool's parameters>}` in the template's wrapper — as an
    xgrammar-style triggered structural tag (at_least_one: the grammar is eager)."""
    tags = [{"type": "tag",
             "begin": f'{template.call_open}\n{{"name": "{t["function"]["name"]}", "arguments": ',
             "content": {"type": "json_schema",
                         "json_schema": t["function"].get("parameters") or {}},
             "end": f"}}\n{template.call_close}"} for t in tools]
    return Constraint("structural_tag", {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": [template.call_open], "tags": tags,
        "at_least_one": at_least_one}})


def generic_schema(tools: list[dict[str, Any]], response: Any, required: bool) -> dict[str, Any]:
    """CHAT: common_chat_params_init_generic, used when tools come with a JSON schema: the
    model writes `{"tool_call": {name, arguments}}` or (unless required) `{"response": …}`.
    Read in older snapshots of common/chat.cpp ("Use generic handler when mixing tools + JSON
    schema"); the newest builds' auto-parser path was not read for this case."""
    calls = [{"type": "object",
              "properties": {"name": {"type": "string", "const": t["function"]["name"]},
                             "arguments": t["function"].get("parameters") or {}},
              "required": ["name", "arguments"]} for t in tools]
    call = calls[0] if len(calls) == 1 else {"anyOf": calls}
    wrapped = {"type": "object", "properties": {"tool_call": call}, "required": ["tool_call"]}
    if required:
        return wrapped
    return {"anyOf": [wrapped, {"type": "object", "properties": {"response": response or {
        "type": "string"}}, "required": ["response"]}]}


def _read_calls(text: str, template: ChatTemplate) -> tuple[str, list[dict[str, Any]]] | None:
    """The calls llama.cpp's chat parser reads from `text` in the template's wrapper: content
    before the first call, and the calls; None when there is none or one cannot be read."""
    start = text.find(template.call_open)
    if start < 0:
        return None
    calls = []
    for piece in text[start:].split(template.call_open)[1:]:
        body = piece.split(template.call_close)[0].strip()
        try:
            call = orjson.loads(body)
            calls.append({"type": "function", "id": _call_id(), "function": {
                "name": call["name"], "arguments": orjson.dumps(call["arguments"]).decode()}})
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None
    return text[:start].strip(), calls


class FakeLlamaCpp(ModelServer):
    """The fake llama-server. `jinja`: started with `--jinja` (tools need it). `enforces_required`:
    whether `tool_choice: "required"` makes the tool grammar eager (False: the newest builds'
    bug, #27217)."""

    def __init__(self, jinja: bool = True, model: str = MODEL,
                 template: ChatTemplate | None = None, n_ctx: int = 32768, build: str = BUILD,
                 enforces_required: bool = False) -> None:
        self.jinja = jinja
        self.model = model
        self.template = template or ChatTemplate()
        self.n_ctx = n_ctx
        self.build = build
        self.enforces_required = enforces_required
        self.ignored: list[set[str]] = []  # per chat request: fields copied and never read
        super().__init__()

    def _route(self, received: Received) -> Answer:
        path = received.path.split("?")[0]
        if received.method == "GET" and path in ("/health", "/v1/health"):
            return Answer(body={"status": "ok"})
        if received.method == "GET" and path in ("/props", "/v1/props"):
            return Answer(body=self.props())
        if received.method == "GET" and path in ("/models", "/v1/models"):
            return Answer(body=self.models())
        if received.method == "POST" and path in ("/apply-template", "/v1/apply-template",
                                                  "/chat/completions", "/v1/chat/completions"):
            try:
                body = received.json
            except orjson.JSONDecodeError:
                return llamacpp_error(500, "[json.exception.parse_error.101] parse error")
            rejection = validate_like_llamacpp(body, self.jinja)
            if rejection is not None:
                return rejection
            if path.endswith("apply-template"):
                tools = body.get("tools") if self.jinja else None
                return Answer(body={"prompt": self.template.render(
                    body["messages"], tools, body.get("add_generation_prompt", True))})
            with self._lock:
                self.ignored.append(set(body) - READ_FIELDS)
            assert self._answer is not None
            return self._answer(received)
        return llamacpp_error(404, "File Not Found")

    def props(self) -> dict[str, Any]:
        """CONTEXT: the /props JSON (n_ctx per slot under default_generation_settings)."""
        return {
            "default_generation_settings": {"params": {
                "n_predict": -1, "seed": 4294967295, "temperature": 0.8, "top_k": 40,
                "top_p": 0.95, "min_p": 0.05, "grammar": "", "stream": True,
                "reasoning_format": "deepseek"}, "n_ctx": self.n_ctx},
            "total_slots": 1,
            "model_alias": self.model,
            "model_path": f"/models/{self.model}",
            "modalities": {"vision": False, "video": False, "audio": False},
            "endpoint_slots": True, "endpoint_props": False, "endpoint_metrics": False,
            "chat_template": self.template.source,
            "chat_template_caps": {"supports_object_arguments": True,
                                   "supports_parallel_tool_calls": True,
                                   "supports_preserve_reasoning": True,
                                   "supports_string_content": True,
                                   "supports_system_role": True, "supports_tool_calls": True,
                                   "supports_tools": True, "supports_typed_content": False},
            "bos_token": "", "eos_token": "<|im_end|>",
            "build_info": self.build,
            "is_sleeping": False,
        }

    def models(self) -> dict[str, Any]:
        """CONTEXT: the models JSON (Ollama's `models` and OpenAI's `data`)."""
        return {"models": [{"name": self.model, "model": self.model, "modified_at": "",
                            "size": "", "digest": "", "type": "model", "description": "",
                            "tags": [""], "capabilities": ["completion"], "parameters": "",
                            "details": {"parent_model": "", "format": "gguf", "family": "",
                                        "families": [""], "parameter_size": "",
                                        "quantization_level": ""}}],
                "object": "list",
                "data": [{"id": self.model, "aliases": [], "tags": [], "object": "model",
                          "created": int(time.time()), "owned_by": "llamacpp",
                          "meta": {"vocab_type": 2, "n_vocab": 151936, "n_ctx": self.n_ctx,
                                   "n_ctx_train": 262144, "n_embd": 5120,
                                   "n_params": 27_000_000_000, "size": 16_400_000_000}}]}

    def constraint(self, body: dict[str, Any]) -> Constraint | None:
        """What llama.cpp constrains `body`'s answer with: with tools (and a choice other than
        none), the tool grammar — the generic JSON when a schema comes too; else the schema,
        else the grammar."""
        tools, choice = body.get("tools") or [], _tool_choice(body)
        schema = _response_schema(body)
        if tools and choice != "none":
            if isinstance(schema, dict):
                return Constraint("json_schema",
                                  generic_schema(tools, schema, choice == "required"))
            return tool_grammar(tools, self.template,
                                choice == "required" and self.enforces_required)
        if schema is not None:
            return Constraint("json_schema", schema)
        if body.get("grammar"):
            return Constraint("grammar", body["grammar"])
        return None

    def _generated(self, received: Received) -> Answer:
        body = received.json
        constraint = self.constraint(body)
        try:
            generation = self._behaviour(Turn(body["messages"], body.get("tools") or [],
                                              constraint))
        except UnscriptedConstraint as error:
            return llamacpp_error(500, str(error))
        failure = self._parse_failure(body, generation)
        if failure is not None:
            return failure
        completion = self._completion(body, generation, constraint)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return Answer(chunks=llamacpp_stream_of(completion, usage=usage))
        return Answer(body=completion)

    def _parse_failure(self, body: dict[str, Any], generation: Generation) -> Answer | None:
        """The server's answer where its chat parser throws on the output (see the module):
        500 unstreamed, or when nothing came before the failing call (the first result is
        the error); else the content before the call streamed, then the error event."""
        text, opener = generation.text, self.template.call_open
        if (not body.get("tools") or _tool_choice(body) == "none" or opener not in text
                or _read_calls(text, self.template) is not None):
            return None
        message = parse_failure(self.build, text, opener)
        if message is None:
            return None
        error = llamacpp_error(500, message)
        before = text[:text.find(opener)]
        if not body.get("stream") or not (before or generation.reasoning):
            return error
        shape = {"model": self.model, "build": self.build, "reasoning": generation.reasoning}
        sent = llamacpp_stream_of(llamacpp_completion(before, **shape))[:-2]  # no finish
        return Answer(chunks=[*sent, sse(error.body)])

    def _completion(self, body: dict[str, Any], generation: Generation,
                    constraint: Constraint | None) -> dict[str, Any]:
        """The message the chat parser makes of the generated text (finish "tool_calls" when
        it read calls)."""
        text, reasoning = generation.text, generation.reasoning
        shape = {"model": self.model, "build": self.build, "reasoning": reasoning}
        if body.get("tools") and _tool_choice(body) != "none":
            try:
                answer = orjson.loads(text) if constraint is not None \
                    and constraint.kind == "json_schema" else None
            except orjson.JSONDecodeError:
                answer = None
            if isinstance(answer, dict):
                if "tool_call" in answer:
                    call = answer["tool_call"]
                    return llamacpp_completion(None, tool_calls=[{
                        "type": "function", "id": _call_id(), "function": {
                            "name": call["name"],
                            "arguments": orjson.dumps(call["arguments"]).decode()}}],
                        finish_reason="tool_calls", **shape)
                response = answer.get("response")
                return llamacpp_completion(response if isinstance(response, str)
                                           else orjson.dumps(response).decode(), **shape)
            parsed = _read_calls(text, self.template)
            if parsed is not None:
                return llamacpp_completion(parsed[0], tool_calls=parsed[1],
                                           finish_reason="tool_calls", **shape)
        return llamacpp_completion(text, finish_reason=generation.finish_reason, **shape)
