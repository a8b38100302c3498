"""A fake vLLM 0.33 server on loopback: real HTTP, vLLM's exact shapes, its request checks, its
identity endpoints, and (with `tool_parser`) its own constrained path for demanded calls.

Tests script what it answers (`FakeVLLM.answer`, or a model behaviour with `FakeVLLM.model`)
and read what it received (`.received`). Sources are vLLM's at the newest snapshot read
(vllm-project/vllm: `vllm/entrypoints/openai/chat_completion/protocol.py` = PROTOCOL,
`vllm/renderers/online_renderer.py` = RENDERER, `chat_completion/serving.py` = SERVING,
`vllm/entrypoints/generate/base/protocol.py` = BASE, `vllm/tool_parsers/utils.py` = TOOLS);
each rule below names the one it copies.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from tests.fakes.base import Answer, FakeServer, Received
from tests.fakes.constraints import Constraint, UnscriptedConstraint
from tests.fakes.models import Generation, Model, Turn, says
from tests.fakes.template import ChatTemplate

MODEL = "Qwen/Qwen3.6-27B-FP8"
VERSION = "0.33.0"

# PROTOCOL: ChatCompletionRequest's fields; anything else is logged and ignored
# (vllm/entrypoints/openai/engine/protocol.py: OpenAIBaseModel, extra="allow" +
# __log_extra_fields__ "The following fields were present in the request but ignored").
# The `guided_*` fields were removed with 0.12 (structured_outputs replaced them): ignored.
CHAT_FIELDS = frozenset({"messages", "model", "frequency_penalty", "logit_bias", "logprobs",
    "top_logprobs", "max_tokens", "max_completion_tokens", "n", "presence_penalty",
    "response_format", "seed", "stop", "stream", "stream_options", "temperature", "top_p",
    "tools", "tool_choice", "reasoning_effort", "thinking_token_budget", "include_reasoning",
    "parallel_tool_calls", "user", "use_beam_search", "top_k", "min_p", "repetition_penalty",
    "watermarking", "length_penalty", "stop_token_ids", "include_stop_str_in_output",
    "ignore_eos", "min_tokens", "skip_special_tokens", "spaces_between_special_tokens",
    "truncate_prompt_tokens", "truncation_side", "prompt_logprobs", "logprob_token_ids",
    "allowed_token_ids", "bad_words", "echo", "add_generation_prompt", "continue_final_message",
    "add_special_tokens", "documents", "chat_template", "chat_template_kwargs", "media_io_kwargs",
    "mm_processor_kwargs", "structured_outputs", "priority", "request_id", "session_id",
    "return_tokens_as_token_ids", "return_token_ids", "routed_experts_prompt_start",
    "return_token_offsets", "return_prompt_text", "return_mm_kwargs", "cache_salt",
    "kv_transfer_params", "ec_transfer_params", "vllm_xargs", "repetition_detection",
    "stream_interval"})
# vllm/sampling_params.py: StructuredOutputsParams, "one of these fields will be used".
STRUCTURED_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


def vllm_tool_call(name: str, arguments: str) -> dict[str, Any]:
    """A tool call as vLLM's own parser returns it."""
    return {"id": f"chatcmpl-tool-{uuid.uuid4().hex}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def vllm_completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
    finish_reason: str = "stop",
    model: str = MODEL,
    choices: int = 1,
) -> dict[str, Any]:
    """A non-streaming chat completion exactly as vLLM 0.33 serialises it: every vendor field
    present (null when unused), `reasoning`, and the `tool_calls` key omitted when empty."""
    message: dict[str, Any] = {
        "role": "assistant", "content": content, "refusal": None, "annotations": None,
        "audio": None, "function_call": None, "reasoning": reasoning,
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": i, "message": dict(message), "logprobs": None,
            "finish_reason": finish_reason, "stop_reason": None, "token_ids": None,
            "routed_experts": None,
        } for i in range(choices)],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": {"prompt_tokens": 31, "total_tokens": 52, "completion_tokens": 21,
                  "prompt_tokens_details": {"cached_tokens": 0, "cached_tokens_by_device": None},
                  "completion_tokens_details": None},
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
        "weight_versions": None,
    }


def vllm_error(status: int, message: str, type_: str = "BadRequestError",
               param: str | None = None) -> Answer:
    """vLLM's error envelope from `create_error_response`, with its integer `code`
    (vllm/frontend/entrypoints/serve/exception_handling/error_response.py)."""
    return Answer(status=status, body={"error": {"message": message, "type": type_,
                                                 "param": param, "code": status}})


def vllm_validation_error(reason: str, param: str | None = None) -> Answer:
    """vLLM's 400 for a request its protocol model's validators refuse: the pydantic errors
    listed, type "Bad Request", the validator's parameter as `param`
    (vllm/frontend/entrypoints/serve/exception_handling/handlers/validation.py)."""
    error = {"type": "value_error", "loc": ("body",), "msg": f"Value error, {reason}"}
    return vllm_error(400, f"1 validation error:\n  {error}", "Bad Request", param)


def vllm_stream_chunks(text: str, pieces: int = 5, model: str = MODEL) -> list[bytes]:
    """A streamed answer as vLLM sends it: role chunk, content pieces, finish, [DONE]."""
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish, "token_ids": None}]}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    size = max(1, -(-len(text) // pieces))
    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": text[i:i + size]}) for i in range(0, len(text), size)]
    parts += [chunk({}, "stop"), b"data: [DONE]\n\n"]
    return parts


def fake_token_count(body: Any) -> int:
    """The fake tokenizer: a token per 4 bytes of the messages' and tools' JSON."""
    return len(orjson.dumps([body.get("messages"), body.get("tools")])) // 4


def vllm_context_window(window: int, then: Callable[[Received], Answer],
                        prompt_tokens: Callable[[Any], int] = fake_token_count,
                        wording: str = "current") -> Callable[[Received], Answer]:
    """vLLM's check of a request against `--max-model-len` `window`: a prompt plus the
    completion's `max_tokens` (at least 1) that does not fit is refused with a 400 in vLLM's
    words, `current` ones (the prompt counted only up to where it overflows: a floor) or
    `earlier` ones (counted whole); anything else is answered by `then`."""
    def answer(received: Received) -> Answer:
        body = received.json
        prompt = prompt_tokens(body)
        asked = body.get("max_tokens", body.get("max_completion_tokens"))
        wanted = asked or 0
        if prompt + max(wanted, 1) <= window:
            return then(received)
        if wording == "current":
            counted = max(1, min(prompt, window - wanted + 1))
            return vllm_error(400, f"This model's maximum context length is {window} tokens. "
                              f"However, you requested {wanted} output tokens and your prompt "
                              f"contains at least {counted} input tokens, for a total of at "
                              f"least {counted + wanted} tokens. Please reduce the length of "
                              "the input prompt or the number of requested output tokens. "
                              f"(parameter=input_tokens, value={counted})")
        head = f"This model's maximum context length is {window} tokens."
        if asked is None or prompt >= window:
            return vllm_error(400, f"{head} However, your request has {prompt} input tokens. "
                              "Please reduce the length of the input messages.")
        return vllm_error(400, f"'max_tokens' or 'max_completion_tokens' is too large: "
                          f"{asked}. This model's maximum context length is {window} "
                          f"tokens and your request has {prompt} input tokens "
                          f"({asked} > {window} - {prompt}).")
    return answer


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def vllm_stream_of(completion: dict[str, Any], *, size: int = 4, cumulative: bool = False,
                   ids: bool = True, indexes: bool = True, usage: bool = True,
                   done: bool = True, reasoning_key: str = "reasoning") -> list[bytes]:
    """The stream vLLM sends for the same answer as `completion` (built by vllm_completion):
    the role chunk, reasoning and content in pieces of `size` characters, each tool call as
    its own parser streams it (id, name and empty arguments, then the arguments in pieces),
    each choice's finish, the usage chunk and `[DONE]`; choices interleaved, as with `n`.

    `cumulative`: each arguments chunk is the whole arguments so far, and the name comes
    again (llama.cpp). `ids`/`indexes` False: calls without their id / index (servers that
    leave them out). `done` False: the stream ends without `[DONE]`."""
    ident, created, model = completion["id"], completion["created"], completion["model"]

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice: dict[str, Any] = {"index": index, "delta": delta, "logprobs": None,
                                  "finish_reason": finish, "token_ids": None}
        if finish is not None:
            choice["stop_reason"] = None
        return b"data: " + orjson.dumps({"id": ident, "object": "chat.completion.chunk",
                                         "created": created, "model": model,
                                         "choices": [choice]}) + b"\n\n"

    lanes: list[list[bytes]] = []
    for choice in completion["choices"]:
        index, message = choice["index"], choice["message"]
        lane = [chunk(index, {"role": "assistant", "content": ""})]
        lane += [chunk(index, {reasoning_key: part})
                 for part in _pieces(message.get("reasoning") or "", size)]
        lane += [chunk(index, {"content": part})
                 for part in _pieces(message.get("content") or "", size)]
        for position, call in enumerate(message.get("tool_calls") or ()):
            head: dict[str, Any] = {"type": "function",
                                    "function": {"name": call["function"]["name"],
                                                 "arguments": ""}}
            head |= {"id": call["id"]} if ids else {}
            head |= {"index": position} if indexes else {}
            lane.append(chunk(index, {"tool_calls": [head]}))
            arguments = call["function"]["arguments"]
            for end in range(size, len(arguments) + size, size):
                part = arguments[:end] if cumulative else arguments[end - size:end]
                delta: dict[str, Any] = {"function": {"arguments": part}}
                delta |= {"index": position} if indexes else {}
                if cumulative:
                    delta["function"]["name"] = call["function"]["name"]
                    delta |= {"id": call["id"]} if ids else {}
                lane.append(chunk(index, {"tool_calls": [delta]}))
        lane.append(chunk(index, {}, choice["finish_reason"]))
        lanes.append(lane)
    parts = [part for row in itertools.zip_longest(*lanes) for part in row if part]
    if usage:
        parts.append(b"data: " + orjson.dumps({
            "id": ident, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [], "usage": completion["usage"]}) + b"\n\n")
    if done:
        parts.append(b"data: [DONE]\n\n")
    return parts


def vllm_answer(completion: dict[str, Any], **stream: Any) -> Callable[[Received], Answer]:
    """vLLM's answer to a request of either kind: `completion` as JSON, or (the request
    streams) the same answer streamed (`stream` as for vllm_stream_of)."""
    def answer(received: Received) -> Answer:
        if received.json.get("stream"):
            return Answer(chunks=vllm_stream_of(completion, **stream))
        return Answer(body=completion)
    return answer


def required_calls_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema vLLM constrains `tool_choice: "required"` with: an array of at least one
    `{name, parameters}` (TOOLS: _get_json_schema_from_tools, _get_tool_schema_from_tool)."""
    branches, defs = [], {}
    for tool in tools:
        function = tool.get("function") or {}
        parameters = dict(function.get("parameters") or {"type": "object", "properties": {}})
        defs.update(parameters.pop("$defs", {}))
        branches.append({"properties": {"name": {"type": "string", "enum": [function["name"]]},
                                        "parameters": parameters},
                         "required": ["name", "parameters"]})
    schema: dict[str, Any] = {"type": "array", "minItems": 1,
                              "items": {"type": "object", "anyOf": branches}}
    return schema | ({"$defs": defs} if defs else {})


def _tool_choice(body: dict[str, Any]) -> Any:
    """The effective tool_choice: "auto" when tools come without one (PROTOCOL:
    check_tool_usage), "none" when neither does (the field's default)."""
    if "tool_choice" not in body:
        return "auto" if body.get("tools") else "none"
    return body["tool_choice"]


def _structural_tag_valid(tag: Any) -> bool:
    """BASE: AnyStructuralTagResponseFormat, the legacy `{structures: [{begin, schema, end}],
    triggers}` or `{format}`."""
    if not isinstance(tag, dict):
        return False
    if "format" in tag:
        return True
    structures = tag.get("structures")
    return isinstance(structures, list) and isinstance(tag.get("triggers"), list) and all(
        isinstance(s, dict) and isinstance(s.get("begin"), str) and isinstance(s.get("end"), str)
        for s in structures)


def _protocol_rejection(body: dict[str, Any]) -> Answer | None:
    """The checks vLLM's ChatCompletionRequest validators apply (pydantic: 400 "Bad Request")."""
    response_format = body.get("response_format")
    if response_format is not None:
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        # BASE: AnyResponseFormat = ResponseFormat(text|json_object|json_schema) | structural tag
        if kind not in ("text", "json_object", "json_schema", "structural_tag"):
            return vllm_validation_error(f"Input tag '{kind}' found using 'type' does not match "
                                         "any of the expected tags", "body.response_format")
        # PROTOCOL: validate_response_format
        if kind == "json_schema" and response_format.get("json_schema") is None:
            return vllm_validation_error(
                "When response_format type is 'json_schema', the 'json_schema' field must be "
                "provided.", "response_format")
        # BASE: JsonSchemaResponseFormat.name is required
        if kind == "json_schema" and "name" not in response_format["json_schema"]:
            return vllm_validation_error("Field required",
                                         "body.response_format.json_schema.name")
        # PROTOCOL: validate_response_format → BASE: validate_structural_tag_response_format
        if kind == "structural_tag" and not _structural_tag_valid(response_format):
            return vllm_validation_error("Invalid response_format structural_tag "
                                         "specification.", "response_format")
    # PROTOCOL: validate_stream_options
    if body.get("stream_options") and not body.get("stream"):
        return vllm_validation_error("Stream options can only be defined when `stream=True`.",
                                     "stream_options")
    structured = body.get("structured_outputs")
    if structured is not None:
        if not isinstance(structured, dict):
            return vllm_validation_error("Input should be a dictionary",
                                         "body.structured_outputs")
        # PROTOCOL: check_structured_outputs_count
        if sum(structured.get(k) is not None for k in ("json", "regex", "choice")) > 1:
            return vllm_validation_error("You can only use one kind of constraints for "
                                         "structured outputs ('json', 'regex' or 'choice').")
        if any(structured.get(k) is not None for k in ("json", "regex", "choice")) and \
                _tool_choice(body) not in ("none", "auto", "required"):
            return vllm_validation_error("You can only either use constraints for structured "
                                         "outputs or tools, not both.")
        # vllm/sampling_params.py: StructuredOutputsParams.__post_init__ (exactly one kind)
        kinds = [k for k in STRUCTURED_KINDS if structured.get(k) is not None]
        if len(kinds) != 1:
            return vllm_validation_error(
                "You can only use one kind of structured outputs constraint but multiple are "
                f"specified: {structured}" if kinds else "You must use one kind of structured "
                "outputs constraint but none are specified.", "body.structured_outputs")
        # StructuredOutputsParams.structural_tag is a str (the tag's JSON)
        if kinds == ["structural_tag"] and not isinstance(structured["structural_tag"], str):
            return vllm_validation_error("Input should be a valid string",
                                         "body.structured_outputs.structural_tag")
    return _tool_usage_rejection(body)


def _tool_usage_rejection(body: dict[str, Any]) -> Answer | None:
    """PROTOCOL: check_tool_usage, then check_generation_prompt."""
    tools = body.get("tools")
    if tools == []:
        return vllm_validation_error("`tools` must not be an empty array. Either provide at "
                                     "least one tool or omit the field entirely.", "tools")
    choice = _tool_choice(body)
    if choice not in ("none", None):
        if tools is None:
            return vllm_validation_error("When using `tool_choice`, `tools` must be set.",
                                         "tool_choice")
        if choice not in ("auto", "required") and not isinstance(choice, dict):
            return vllm_validation_error(
                f"Invalid value for `tool_choice`: {choice}! Only named tools, \"none\", "
                "\"auto\" or \"required\" are supported.", "tool_choice")
        usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'
        if isinstance(choice, dict):
            function = choice.get("function")
            if not isinstance(function, dict):
                return vllm_validation_error(f"Invalid value for `function`: `{function}` in "
                                             f"`tool_choice`! {usage}", "tool_choice.function")
            if "name" not in function:
                return vllm_validation_error(f"Expected field `name` in `function` in "
                                             f"`tool_choice`! {usage}",
                                             "tool_choice.function.name")
            if not any((t.get("function") or {}).get("name") == function["name"]
                       for t in tools):
                return vllm_validation_error("The tool specified in `tool_choice` does not "
                                             "match any of the specified `tools`",
                                             "tool_choice")
    if body.get("continue_final_message") and body.get("add_generation_prompt"):
        return vllm_validation_error("Cannot set both `continue_final_message` and "
                                     "`add_generation_prompt` to True.")
    return None


def _messages_rejection(body: dict[str, Any]) -> Answer | None:
    """The chat template's checks (a template that knows system, user, assistant and tool,
    as Qwen's), carried over from the earlier fake."""
    for message in body.get("messages") or ():
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "user", "assistant", "tool"):
            return vllm_error(400, f"Unexpected message role: {role}")
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            return vllm_error(400, "messages.tool_calls: Input should be a valid list")
        for call in calls or ():
            try:
                arguments = orjson.loads(call["function"]["arguments"])
            except (orjson.JSONDecodeError, TypeError, KeyError):
                arguments = None
            if not isinstance(arguments, dict):
                return vllm_error(400, "Tool call arguments must be a JSON object string")
    return None


def _parser_rejection(body: dict[str, Any], tool_parser: str | None) -> Answer | None:
    """RENDERER: render_chat refuses a tool_choice that needs a parser when none is set
    (create_error_response: 400 "BadRequestError")."""
    choice = _tool_choice(body)
    if tool_parser is not None or choice in ("none", None):
        return None
    if choice == "auto":
        return vllm_error(400, '"auto" tool choice requires --enable-auto-tool-choice and '
                          "--tool-call-parser to be set")
    described = (f'function "{choice["function"]["name"]}"' if isinstance(choice, dict)
                 else f'"{choice}"')
    return vllm_error(400, f"tool_choice={described} requires --tool-call-parser to be set")


def validate_like_vllm(body: Any, tool_parser: str | None) -> Answer | None:
    """The refusal vLLM 0.33 answers `body` with before generating, or None."""
    if not isinstance(body, dict):
        return vllm_validation_error("Input should be a valid dictionary or object", "body")
    return (_protocol_rejection(body) or _messages_rejection(body)
            or _parser_rejection(body, tool_parser))


def _json_value(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str) else value


# The parsers with a model-native structural tag (`structural_tag_model`): Hermes's is
# vLLM's own (vllm/tool_parsers/hermes_tool_parser.py: structural_tag_model = "hermes").
STRUCTURAL_TAG_PARSERS = frozenset({"hermes"})
HERMES_FORMATS = (('<tool_call>\n{"name": "', "}\n</tool_call>"),
                  ('<tool_call>{"name": "', "}</tool_call>"))


def hermes_structural_tag(tools: list[dict[str, Any]], choice: Any,
                          strict_level: str = "auto") -> dict[str, Any] | None:
    """The tag vLLM constrains Hermes-format calls with
    (vllm/frontend/processing/tool_parsers/structural_tag_registry.py: get_model_structural_tag,
    get_hermes_structural_tag, get_function_parameters): none for `auto` unless a tool is
    strict (or `--tool-strict-level` is above auto); `auto` a triggered tag, `required` at
    least one call, a named choice exactly one call of that tool. Each call's arguments are
    held to the tool's parameters unless the tool says `strict: false`."""
    if not tools or choice in ("none", None):
        return None
    strict = any((t.get("function") or {}).get("strict") is True for t in tools)
    if choice == "auto" and not strict and strict_level == "auto":
        return None
    if isinstance(choice, dict):
        tools = [t for t in tools if t["function"]["name"] == choice["function"]["name"]]

    def parameters(function: dict[str, Any]) -> Any:
        if function.get("strict") is False and strict_level != "parameter":
            return True
        return function.get("parameters") or True

    tags = [{"type": "tag", "begin": begin + t["function"]["name"] + '", "arguments": ',
             "content": {"type": "json_schema", "json_schema": parameters(t["function"])},
             "end": end} for t in tools for begin, end in HERMES_FORMATS]
    if choice == "auto":
        node: dict[str, Any] = {"type": "triggered_tags", "triggers": ["<tool_call>"],
                                "tags": tags}
    else:
        node = {"type": "tags_with_separator", "tags": tags, "separator": "",
                "at_least_one": True} | ({"stop_after_first": True}
                                          if isinstance(choice, dict) else {})
    return {"type": "structural_tag", "format": node}


def vllm_constraint(body: dict[str, Any], tool_parser: str | None,
                    strict_level: str = "auto") -> Constraint | None:
    """The constraint vLLM decodes `body` under. With a parser, the tools' own: the parser's
    structural tag where it has one (hermes_structural_tag), else for a demanded call the
    fallback schema (TOOLS: get_json_schema_from_tools — the named tool's parameters, or the
    array for "required"). Otherwise `response_format` (BASE:
    structured_outputs_from_response_format, which overrides `structured_outputs`), else
    `structured_outputs`."""
    choice, tools = _tool_choice(body), body.get("tools") or []
    if tool_parser in STRUCTURAL_TAG_PARSERS:
        tag = hermes_structural_tag(tools, choice, strict_level)
        if tag is not None:
            return Constraint("structural_tag", tag)
    elif tool_parser is not None and tools and choice == "required":
        return Constraint("json_schema", required_calls_schema(tools))
    elif tool_parser is not None and tools and isinstance(choice, dict):
        named = next(t["function"] for t in tools
                     if t["function"]["name"] == choice["function"]["name"])
        return Constraint("json_schema", named.get("parameters") or {})
    response_format = body.get("response_format") or {}
    kind = response_format.get("type")
    if kind == "json_schema":
        return Constraint("json_schema", response_format["json_schema"].get("schema") or {})
    if kind == "json_object":
        return Constraint("json_object")
    if kind == "structural_tag":
        return Constraint("structural_tag", response_format)
    structured = body.get("structured_outputs") or {}
    for key in STRUCTURED_KINDS:
        if structured.get(key) is not None:
            kind = {"json": "json_schema", "structural_tag": "structural_tag"}.get(key, key)
            value = structured[key]
            return Constraint(kind, _json_value(value) if key in ("json", "structural_tag")
                              else None if key == "json_object" else value)
    return None


def hermes_calls(text: str, opener: str = "<tool_call>", closer: str = "</tool_call>"
                 ) -> tuple[str | None, list[dict[str, Any]]] | None:
    """What vLLM's Hermes parser reads from `text`: the content before the first call (None
    when empty) and the calls; None when a call's JSON cannot be read (the text stays
    content), as vllm/tool_parsers/hermes_tool_parser.py's extract_tool_calls does."""
    if opener not in text:
        return None
    pattern = re.escape(opener) + r"(.*?)" + re.escape(closer) + "|" + re.escape(opener) \
        + r"(.*)"
    calls = []
    try:
        for closed, open_ended in re.findall(pattern, text, re.DOTALL):
            call = orjson.loads(closed or open_ended)
            calls.append(vllm_tool_call(call["name"], orjson.dumps(call["arguments"]).decode()))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    content = text[:text.index(opener)]
    return (content or None), calls


class FakeVLLM(FakeServer):
    """The fake server. By default a chat completion gets a plain text answer.

    `tool_parser`: the `--tool-call-parser` it was started with (with
    `--enable-auto-tool-choice`); None: started without, so it refuses `auto`, `required` and
    named choices as vLLM does (True/False are read as "hermes"/None). Its parser reads calls
    in the template's wrapper (`<tool_call>` JSON `</tool_call>` by default); "hermes" has a
    structural tag for demanded calls, any other parser name takes vLLM's JSON-schema
    fallback. `tool_strict_level`: `--tool-strict-level` (auto, function, parameter)."""

    def __init__(self, tool_parser: str | bool | None = "hermes", model: str = MODEL,
                 template: ChatTemplate | None = None, max_model_len: int = 32768,
                 version: str = VERSION, tool_strict_level: str = "auto") -> None:
        self.tool_parser = "hermes" if tool_parser is True else (tool_parser or None)
        self.model = model
        self.template = template or ChatTemplate()
        self.max_model_len = max_model_len
        self.version = version
        self.tool_strict_level = tool_strict_level  # --tool-strict-level: auto|function|parameter
        self.ignored: list[set[str]] = []  # per chat request: the fields vLLM logged and ignored
        # vLLM's /tokenize for a chat: the count it answers (None: a server without one).
        self.tokenize: Callable[[Any], int] | None = fake_token_count
        self._behaviour: Model = says("Hello from the fake.")
        super().__init__()
        self._answer = self._generated

    def behave(self, model: Model) -> None:
        """Answer chat completions with what `model` generates, as this server renders it."""
        self._behaviour = model
        self._answer = self._generated

    def _route(self, received: Received) -> Answer:
        if received.method == "GET" and received.path == "/v1/models":
            return Answer(body={"object": "list", "data": [
                {"id": self.model, "object": "model", "created": 0, "owned_by": "vllm",
                 "root": self.model, "parent": None, "max_model_len": self.max_model_len,
                 "permission": []}]})
        if received.method == "GET" and received.path == "/version":
            # vllm/frontend/entrypoints/serve/instrumentator/basic.py: show_version
            return Answer(body={"version": self.version})
        if received.method == "GET" and received.path == "/health":
            # vllm/frontend/entrypoints/serve/instrumentator/health.py: 200, empty body
            return Answer(body=b"")
        if received.path.startswith("/proxy/"):  # vLLM has no such path (the proxy's own)
            return Answer(status=404, body={"detail": "Not Found"})
        if received.path == "/tokenize" and received.method == "POST":
            return self._tokenized(received)
        if received.path.startswith("/v1/chat/completions") and received.method == "POST":
            try:
                body = received.json
            except orjson.JSONDecodeError:
                return vllm_error(400, "Invalid JSON")
            rejection = validate_like_vllm(body, self.tool_parser)
            if rejection is not None:
                return rejection
            with self._lock:
                self.ignored.append(set(body) - CHAT_FIELDS)
        assert self._answer is not None
        return self._answer(received)

    def _generated(self, received: Received) -> Answer:
        """vLLM's answer with what the model behaviour writes under the request's constraint."""
        if not received.path.startswith(self.chat_path):  # vLLM's answer to a path it lacks
            return Answer(status=404, body={"detail": "Not Found"})
        body = received.json
        tools = body.get("tools") or []
        constraint = vllm_constraint(body, self.tool_parser, self.tool_strict_level)
        try:
            generation = self._behaviour(Turn(body.get("messages") or [], tools, constraint))
        except UnscriptedConstraint as error:
            return vllm_error(500, str(error), "InternalServerError")
        completion = self._completion(body, generation)
        if body.get("stream"):  # serve/utils/api_utils.py: should_include_usage
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return Answer(chunks=vllm_stream_of(completion, usage=usage))
        return Answer(body=completion)

    def _completion(self, body: dict[str, Any], generation: Generation) -> dict[str, Any]:
        """SERVING: chat_completion_full_generator's message for the generated text. With a
        parser and a tool_choice other than none: a demanded call's message has content ""
        and finish "tool_calls" ("required") or "stop" (named) — its calls read from the
        wrapper (structural tag) or the JSON (fallback schema); `auto`'s calls are what the
        parser reads. Calls are cut to the first when parallel_tool_calls is false
        (vllm/entrypoints/serve/utils/tool_calls_utils.py: maybe_filter_parallel_tool_calls).
        Otherwise, the text."""
        choice = _tool_choice(body)
        text, reasoning = generation.text, generation.reasoning
        shape = {"reasoning": reasoning, "model": self.model}
        if self.tool_parser is None or not body.get("tools") or choice in ("none", None):
            return vllm_completion(text, finish_reason=generation.finish_reason, **shape)
        parsed = hermes_calls(text, self.template.call_open, self.template.call_close)
        demanded = choice == "required" or isinstance(choice, dict)
        if demanded and self.tool_parser not in STRUCTURAL_TAG_PARSERS:
            named = choice["function"]["name"] if isinstance(choice, dict) else None
            items = [{"name": named, "parameters": orjson.loads(text)}] if named \
                else orjson.loads(text)
            parsed = ("", [vllm_tool_call(item["name"], orjson.dumps(item["parameters"]).decode())
                           for item in items])
        if parsed is None:
            return vllm_completion(text, finish_reason=generation.finish_reason, **shape)
        content, calls = parsed
        calls = calls[:1] if body.get("parallel_tool_calls") is False else calls
        finish = "stop" if isinstance(choice, dict) else "tool_calls"
        return vllm_completion(content or ("" if demanded else None), tool_calls=calls,
                               finish_reason=finish, **shape)

    def _tokenized(self, received: Received) -> Answer:
        """vLLM's /tokenize answer for a chat (`count`, `max_model_len`, `tokens`, and the
        token strings with `return_token_strs`), the chat rendered by the fake's template
        (vllm/entrypoints/serve/tokenize/protocol.py: TokenizeChatRequest, TokenizeResponse)."""
        if self.tokenize is None:
            return Answer(status=404, body={"detail": "Not Found"})
        body = received.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return vllm_error(400, "messages: Field required")
        if body.get("continue_final_message") and body.get("add_generation_prompt"):
            return vllm_validation_error("Cannot set both `continue_final_message` and "
                                         "`add_generation_prompt` to True.")
        count = self.tokenize(body)
        strings = None
        if body.get("return_token_strs"):
            prompt = self.template.render(body["messages"], body.get("tools"),
                                          body.get("add_generation_prompt", True))
            strings = self.template.pieces(prompt, count)
            count = len(strings)
        return Answer(body={"count": count, "max_model_len": self.max_model_len,
                            "tokens": list(range(count)), "token_strs": strings})


def main(argv: list[str]) -> None:
    """`python -m tests.fake_vllm [DELAY]`: a fake in a process of its own (one a test can
    kill) answering every chat with a `read` call after DELAY seconds; its URL on stdout."""
    delay = float(argv[0]) if argv else 0.0
    fake = FakeVLLM()
    call = vllm_completion(tool_calls=[vllm_tool_call("read", '{"path": "a"}')],
                           finish_reason="tool_calls")
    fake.answer(lambda received: Answer(body=call, delay=delay))
    print(fake.url, flush=True)
    threading.Event().wait()
