"""A fake SGLang server on loopback: its identity endpoints (`/get_server_info` and
`/server_info`, `/get_model_info`, `/v1/models`, `/health`), the checks it applies to a chat
request, its constraint fields (`response_format` json_schema / json_object / structural_tag,
`regex`, `ebnf`), its own constraint for tool calls, and its answer shapes (`matched_stop`,
`reasoning_content`, `metadata`; errors flat, not under "error").

Sources, sgl-project/sglang at the newest snapshot read: `python/sglang/srt/entrypoints/openai/`
`protocol.py` (PROTOCOL: ChatCompletionRequest, its validators and to_sampling_params;
ErrorResponse), `serving_chat.py` (SERVING: _validate_request, _process_messages),
`serving_base.py` (handle_request: a refusal is create_error_response, 400 BadRequestError),
`python/sglang/srt/function_call/function_call_parser.py` (PARSER: get_structure_constraint,
get_legacy_structural_tag), `function_call/utils.py` (UTILS: get_json_schema_constraint),
`python/sglang/srt/sampling/sampling_params.py` (SAMPLING: verify), `entrypoints/http_server.py`
(HTTP: get_server_info = server args + scheduler info + internal_states + version).
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

MODEL = "Qwen/Qwen3.6-27B"
VERSION = "0.5.9"

# PROTOCOL: ChatCompletionRequest is a plain pydantic BaseModel, so any other field is dropped
# without a word (among them vLLM's structured_outputs and the guided_* fields).
CHAT_FIELDS = frozenset({
    "messages", "model", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "max_tokens", "max_completion_tokens", "n", "presence_penalty", "response_format", "seed",
    "stop", "stream", "stream_options", "temperature", "top_p", "user", "tools", "tool_choice",
    "parallel_tool_calls", "return_hidden_states", "return_routed_experts",
    "routed_experts_start_len", "return_cached_tokens_details", "return_prompt_token_ids",
    "return_token_ids", "return_meta_info", "reasoning_effort", "reasoning", "task", "top_k",
    "min_p", "min_tokens", "regex", "ebnf", "repetition_penalty", "stop_token_ids",
    "stop_regex", "no_stop_trim", "ignore_eos", "continue_final_message",
    "skip_special_tokens", "lora_path", "session_id", "session_params", "separate_reasoning",
    "stream_reasoning", "chat_template_kwargs", "max_dynamic_patch", "min_dynamic_patch",
    "use_audio_in_video", "images_config", "custom_logit_processor", "custom_params",
    "input_ids", "rid", "extra_key", "cache_salt", "ngram_corpus_id", "priority",
    "bootstrap_host", "bootstrap_port", "bootstrap_room", "routed_dp_rank",
    "disagg_prefill_dp_rank", "data_parallel_rank"})
EOS_TOKEN = 151645  # `matched_stop` when the model ended on its end-of-turn token


def sglang_error(status: int, message: str, type_: str = "BadRequestError") -> Answer:
    """SGLang's error body (PROTOCOL: ErrorResponse), flat: object, message, type, param,
    code."""
    return Answer(status=status, body={"object": "error", "message": message, "type": type_,
                                       "param": None, "code": status})


def sglang_validation_error(location: str, reason: str) -> Answer:
    """SGLang's 400 for a body its pydantic model refuses (HTTP: the RequestValidationError
    handler turns FastAPI's 422 into a 400 ErrorResponse of type "Bad Request"; that handler
    was not re-read at the newest snapshot, and the message's wording is the fake's)."""
    return sglang_error(400, f"1 validation error for ChatCompletionRequest\n{location}\n  "
                        f"{reason}", "Bad Request")


def sglang_completion(content: str | None, *, tool_calls: list[dict[str, Any]] | None = None,
                      reasoning: str | None = None, finish_reason: str = "stop",
                      model: str = MODEL) -> dict[str, Any]:
    """A chat completion as SGLang serialises it (PROTOCOL: ChatCompletionResponse, ChatMessage,
    UsageInfo): `reasoning_content` and `tool_calls` always present (null when unused),
    `matched_stop` the end-of-turn token (null with calls), `metadata` its weight version."""
    return {
        "id": uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0,
                     "message": {"role": "assistant", "content": content,
                                 "reasoning_content": reasoning, "tool_calls": tool_calls},
                     "logprobs": None, "finish_reason": finish_reason,
                     "matched_stop": None if tool_calls else EOS_TOKEN}],
        "usage": {"prompt_tokens": 31, "total_tokens": 52, "completion_tokens": 21,
                  "prompt_tokens_details": None, "reasoning_tokens": 0},
        "metadata": {"weight_version": "default"},
    }


def sglang_tool_call(name: str, arguments: str, index: int = 0) -> dict[str, Any]:
    """A tool call as SGLang returns it: `call_` and 24 hex digits, its index."""
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "index": index, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def sglang_stream_of(completion: dict[str, Any], size: int = 4,
                     usage: bool = False) -> list[bytes]:
    """The stream SGLang sends for `completion`: the role chunk, content in pieces, each call
    as its detectors stream it (serving_chat.py: _process_tool_call_stream over
    base_format_detector.py's parse_streaming_increment: the id, index and name with empty
    arguments, then the arguments in pieces with a null id and name), the finish chunk, the
    usage chunk when asked, `[DONE]`."""
    head = {"id": completion["id"], "object": "chat.completion.chunk",
            "created": completion["created"], "model": completion["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish, "matched_stop": None}],
                    "usage": None})

    choice = completion["choices"][0]
    message = choice["message"]
    parts = [chunk({"role": "assistant", "content": ""})]
    for key in ("reasoning_content", "content"):
        text = message.get(key) or ""
        parts += [chunk({key: text[i:i + size]}) for i in range(0, len(text), size)]
    for call in message.get("tool_calls") or ():
        function, index = call["function"], call["index"]
        parts.append(chunk({"tool_calls": [{"id": call["id"], "index": index, "type": "function",
                                            "function": {"name": function["name"],
                                                         "arguments": ""}}]}))
        arguments = function["arguments"]
        parts += [chunk({"tool_calls": [{"id": None, "index": index, "type": "function",
                                         "function": {"name": None,
                                                      "arguments": arguments[i:i + size]}}]})
                  for i in range(0, len(arguments), size)]
    parts.append(chunk({}, choice["finish_reason"]))
    if usage:
        parts.append(sse({**head, "choices": [], "usage": completion["usage"]}))
    return [*parts, b"data: [DONE]\n\n"]


def _choice_name(choice: Any) -> str | None:
    return (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None


def validate_like_sglang(body: Any) -> Answer | None:
    """The refusal SGLang answers `body` with before generating, or None."""
    if not isinstance(body, dict):
        return sglang_validation_error("body", "Input should be a valid dictionary")
    if "messages" not in body:
        return sglang_validation_error("messages", "Field required")
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        kind = response_format.get("type")
        # PROTOCOL: ResponseFormat (text|json_object|json_schema) | StructuralTagResponseFormat
        if kind not in ("text", "json_object", "json_schema", "structural_tag"):
            return sglang_validation_error("response_format", "Input tag does not match any "
                                           "of the expected tags")
        wrapper = response_format.get("json_schema")
        if kind == "json_schema" and isinstance(wrapper, dict) and "name" not in wrapper:
            return sglang_validation_error("response_format.json_schema.name",
                                           "Field required")
        if kind == "structural_tag" and "structures" not in response_format \
                and "format" not in response_format:
            return sglang_validation_error("response_format.structural_tag",
                                           "Field required")
    choice = body.get("tool_choice")
    if isinstance(choice, str) and choice not in ("auto", "required", "none"):
        return sglang_validation_error("tool_choice", "Input should be 'auto', 'required' or "
                                       "'none'")
    return _serving_rejection(body)


def _serving_rejection(body: dict[str, Any]) -> Answer | None:
    """SERVING: _validate_request, then SAMPLING: verify (both 400 BadRequestError)."""
    if not body["messages"]:
        return sglang_error(400, "Messages cannot be empty.")
    tools, choice = body.get("tools"), body.get("tool_choice")
    if isinstance(choice, str) and choice.lower() == "required" and not tools:
        return sglang_error(400, "Tools cannot be empty if tool choice is set to required.")
    if isinstance(choice, dict):
        if not tools:
            return sglang_error(400, "Tools cannot be empty if tool choice is set to a "
                                "specific tool.")
        name = _choice_name(choice)
        if not any((t.get("function") or {}).get("name") == name for t in tools):
            return sglang_error(400, f"Tool '{name}' not found in tools list.")
    response_format = body.get("response_format") or {}
    schema = response_format.get("json_schema") or {}
    if response_format.get("type") == "json_schema" and (
            not isinstance(schema, dict) or schema.get("schema") is None):
        return sglang_error(400, "schema_ is required for json_schema response format request.")
    grammars = [body.get("regex"), body.get("ebnf"),
                response_format if response_format.get("type") in ("json_schema",
                                                                   "json_object") else None]
    if sum(g is not None for g in grammars) > 1:
        return sglang_error(400, "Only one of regex, json_schema, or ebnf can be set.")
    return None


def request_constraint(body: dict[str, Any]) -> Constraint | None:
    """PROTOCOL: to_sampling_params — the constraint the request itself asks for."""
    response_format = body.get("response_format") or {}
    kind = response_format.get("type")
    if kind == "json_schema":
        return Constraint("json_schema", response_format["json_schema"]["schema"])
    if kind == "json_object":
        return Constraint("json_schema", {"type": "object"})
    if body.get("regex") is not None:
        return Constraint("regex", body["regex"])
    if body.get("ebnf") is not None:
        return Constraint("grammar", body["ebnf"])
    if kind == "structural_tag":
        return Constraint("structural_tag", response_format)
    return None


def calls_schema(tools: list[dict[str, Any]], named: str | None,
                 parallel: bool) -> dict[str, Any]:
    """UTILS: get_json_schema_constraint — an array of `{name, parameters}`, of the named tool
    or any tool (at most one item without parallel calls)."""
    def item(tool: dict[str, Any]) -> dict[str, Any]:
        function = tool["function"]
        return {"properties": {"name": {"type": "string", "enum": [function["name"]]},
                               "parameters": function.get("parameters")
                               or {"type": "object", "properties": {}}},
                "required": ["name", "parameters"]}
    if named is not None:
        items: dict[str, Any] = item(next(t for t in tools if t["function"]["name"] == named))
    else:
        items = {"type": "object", "anyOf": [item(t) for t in tools]}
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": items}
    return schema | ({} if parallel else {"maxItems": 1})


class FakeSGLang(ModelServer):
    """The fake SGLang server. `tool_call_parser`: its `--tool-call-parser` (None: started
    without one); the parser reads and (for demanded calls) writes calls in the template's
    wrapper, as SGLang's `qwen25`/`hermes` detectors do."""

    def __init__(self, tool_call_parser: str | None = "qwen25", model: str = MODEL,
                 template: ChatTemplate | None = None, context_length: int = 32768,
                 version: str = VERSION, reasoning_parser: str | None = None,
                 grammar_backend: str = "xgrammar") -> None:
        self.tool_call_parser = tool_call_parser
        self.model = model
        self.template = template or ChatTemplate()
        self.context_length = context_length
        self.version = version
        self.reasoning_parser = reasoning_parser
        self.grammar_backend = grammar_backend
        self.ignored: list[set[str]] = []  # per chat request: the fields pydantic dropped
        super().__init__()

    def server_info(self) -> dict[str, Any]:
        """HTTP: get_server_info — the server args (a few of many), the scheduler's info, the
        internal states, the version. `context_length` is the argument (None: the model's)."""
        return {"model_path": self.model, "tokenizer_path": self.model,
                "served_model_name": self.model, "context_length": None,
                "tool_call_parser": self.tool_call_parser,
                "reasoning_parser": self.reasoning_parser,
                "grammar_backend": self.grammar_backend, "chat_template": None,
                "host": "127.0.0.1", "port": 30000, "tp_size": 1, "dp_size": 1,
                "max_total_num_tokens": 412000, "max_req_input_len": self.context_length - 5,
                "internal_states": [{"last_gen_throughput": 0.0, "memory_usage": {}}],
                "version": self.version}

    def _route(self, received: Received) -> Answer:
        path = received.path.split("?")[0]
        if received.method == "GET" and path in ("/get_server_info", "/server_info"):
            return Answer(body=self.server_info())
        if received.method == "GET" and path in ("/get_model_info", "/model_info"):
            return Answer(body={"model_path": self.model, "tokenizer_path": self.model,
                                "is_generation": True, "preferred_sampling_params": None,
                                "weight_version": "default", "has_image_understanding": False,
                                "has_audio_understanding": False, "model_type": "qwen3",
                                "architectures": ["Qwen3ForCausalLM"]})
        if received.method == "GET" and path == "/v1/models":
            # PROTOCOL: ModelCard.max_model_len = the model's context length
            return Answer(body={"object": "list", "data": [
                {"id": self.model, "object": "model", "created": int(time.time()),
                 "owned_by": "sglang", "root": self.model, "parent": None,
                 "max_model_len": self.context_length}]})
        if received.method == "GET" and path in ("/health", "/health_generate"):
            return Answer(body=b"")
        if received.method == "POST" and path == "/v1/chat/completions":
            try:
                body = received.json
            except orjson.JSONDecodeError:
                return sglang_validation_error("body", "JSON decode error")
            rejection = validate_like_sglang(body)
            if rejection is not None:
                return rejection
            with self._lock:
                self.ignored.append(set(body) - CHAT_FIELDS)
            assert self._answer is not None
            return self._answer(received)
        return Answer(status=404, body={"detail": "Not Found"})

    def tool_constraint(self, body: dict[str, Any]) -> Constraint | None:
        """SERVING: _process_messages — the constraint for the tools. With a parser
        (PARSER: get_structure_constraint): `required` or a named choice get its legacy
        structural tag with at_least_one, over every tool, each tool's schema only when it is
        `strict`; `auto` is constrained only when a tool is strict. Without one, `required` and
        named choices get the JSON array (UTILS)."""
        tools, choice = body.get("tools") or [], body.get("tool_choice", "auto")
        if not tools or choice == "none":
            return None
        demanded = choice == "required" or isinstance(choice, dict)
        strict = any((t.get("function") or {}).get("strict") for t in tools)
        if self.tool_call_parser is not None and (demanded or strict):
            open_, close = self.template.call_open, self.template.call_close
            return Constraint("structural_tag", {
                "type": "structural_tag", "at_least_one": demanded,
                "triggers": [open_],
                # function_call/qwen25_detector.py: structure_info (begin, end, trigger)
                "structures": [{"begin": f'{open_}\n{{"name":"{t["function"]["name"]}", '
                                         '"arguments":',
                                "schema": t["function"].get("parameters") or {}
                                if t["function"].get("strict") else {},
                                "end": f"}}\n{close}"} for t in tools]})
        if demanded:
            return Constraint("json_schema", calls_schema(tools, _choice_name(choice),
                                                          body.get("parallel_tool_calls",
                                                                   True)))
        return None

    def _generated(self, received: Received) -> Answer:
        body = received.json
        # PROTOCOL: to_sampling_params — a request constraint wins; the tools' is dropped
        constraint = request_constraint(body) or self.tool_constraint(body)
        tools, named = body.get("tools") or [], _choice_name(body.get("tool_choice"))
        if named is not None:  # SERVING: _process_messages shows the template the named tool only
            tools = [t for t in tools if t["function"]["name"] == named]
        try:
            generation = self._behaviour(Turn(body["messages"], tools, constraint))
        except UnscriptedConstraint as error:
            return sglang_error(500, f"Internal server error: {error}", "InternalServerError")
        completion = self._completion(body, generation, constraint)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return Answer(chunks=sglang_stream_of(completion, usage=usage))
        return Answer(body=completion)

    def _completion(self, body: dict[str, Any], generation: Generation,
                    constraint: Constraint | None) -> dict[str, Any]:
        """The message SGLang makes of the generated text: the JSON array's calls when the
        array schema constrained it, else the calls its parser reads in the wrapper."""
        text, reasoning = generation.text, generation.reasoning
        tools, choice = body.get("tools") or [], body.get("tool_choice", "auto")
        if tools and choice != "none":
            calls = None
            if constraint is not None and constraint.kind == "json_schema" \
                    and constraint.value.get("type") == "array":
                calls = [sglang_tool_call(item["name"], orjson.dumps(item["parameters"]).decode(),
                                          index) for index, item in enumerate(orjson.loads(text))]
                text = ""
            elif self.tool_call_parser is not None:
                calls, text = self._parsed(text)
            if calls:
                return sglang_completion(text or None, tool_calls=calls, reasoning=reasoning,
                                         finish_reason="tool_calls", model=self.model)
        return sglang_completion(text, reasoning=reasoning,
                                 finish_reason=generation.finish_reason, model=self.model)

    def _parsed(self, text: str) -> tuple[list[dict[str, Any]], str]:
        """What the qwen25 detector reads (function_call/qwen25_detector.py: detect_and_parse):
        each call in the wrapper whose JSON reads — one that does not is logged and skipped, so
        a botched call vanishes — and the text before the first call."""
        open_, close = self.template.call_open, self.template.call_close
        start = text.find(open_)
        if start < 0:
            return [], text
        calls = []
        for piece in text[start:].split(open_)[1:]:
            try:
                call = orjson.loads(piece.split(close)[0].strip())
                calls.append(sglang_tool_call(call["name"],
                                              orjson.dumps(call["arguments"]).decode(),
                                              len(calls)))
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
        return calls, text[:start].strip()
