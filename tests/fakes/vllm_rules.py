"""What vLLM 0.33 does with a chat request before and around generating: the fields it takes
and ignores, its refusals in its own words, the constraint it decodes under (its own for a
demanded call, with a tool parser), and what its Hermes parser reads from the text.

Sources are vLLM's at the newest snapshot read (vllm-project/vllm:
`vllm/entrypoints/openai/chat_completion/protocol.py` = PROTOCOL,
`vllm/renderers/online_renderer.py` = RENDERER, `chat_completion/serving.py` = SERVING,
`vllm/entrypoints/generate/base/protocol.py` = BASE, `vllm/tool_parsers/utils.py` = TOOLS);
each rule below names the one it copies.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from tests.fakes.base import Answer
from tests.fakes.constraints import Constraint
from tests.fakes.vllm_shapes import vllm_error, vllm_tool_call, vllm_validation_error

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


def tool_choice_of(body: dict[str, Any]) -> Any:
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
                tool_choice_of(body) not in ("none", "auto", "required"):
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
    choice = tool_choice_of(body)
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
    choice = tool_choice_of(body)
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
    choice, tools = tool_choice_of(body), body.get("tools") or []
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
