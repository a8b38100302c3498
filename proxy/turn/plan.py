"""A chat completion request, planned: a tool turn the proxy answers itself (`TurnPlan`), or
a request relayed as it is (`PassthroughPlan`). Every front ends here with a chat body."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, overload

import orjson

from ..base.config import Config
from ..base.errors import ProxyError, bad_request
from ..base.frozen import quick_init, replaced
from ..base.json_depth import MAX_DEPTH, deep_path, deeper_than
from ..toolcalls.exact_json import loads as exact_loads
from ..toolcalls.registry import template_opens_thinking
from .compat import rewrite_request
from .normalize import ExtractionSettings
from .thinking import (
    ThinkingRule,
    move_history_thinking,
    thinking_rule,
    thinking_switched_off,
)

# What a front keeps in its plans for its own renderers: each front's own type (a front is a
# `fronts.Front[FrontData]`); the core carries it and never reads it.
FrontData = TypeVar("FrontData")


@quick_init
@dataclass(frozen=True)
class TurnPlan(Generic[FrontData]):
    """A turn the proxy answers itself: upstream asked with `stream: false` (or, `streamed`,
    with `stream: true`: text and reasoning relayed live, what could be a call held back),
    the answer normalised and its calls extracted, then rendered by the front that planned
    it."""

    upstream_body: bytes
    config: Config  # the settings in force for this request's model
    extraction: ExtractionSettings
    model: str = ""
    client_stream: bool = False
    include_usage: bool = False
    history_tool_calls: int = 0
    rewrites: tuple[str, ...] = ()
    parallel_tool_calls: bool = True
    tool_call_required: bool = False
    # What its front needs to render (chat: nothing, a TurnPlan[None]).
    front_data: FrontData = field(kw_only=True)
    streamed: bool = False  # `stream_mode: stream`: upstream streams, the turn flows live
    affinity: str | None = None  # the conversation's key for the choice of a replica
    # The context window the client believes it set (Ollama's `num_ctx`): the upstream's is
    # its own; one above it is said once in the log.
    context_asked: int | None = None

    @property
    def mode(self) -> str:
        """How the turn is answered, for logs and metrics: `buffered` or `streamed`."""
        return "streamed" if self.streamed else "buffered"

    def with_thinking(self, rule: ThinkingRule) -> TurnPlan[FrontData]:
        """This plan reading thinking by `rule` (itself, when `rule` is the one it has)."""
        if rule is self.extraction.thinking:
            return self
        return replaced(self, extraction=replaced(self.extraction, thinking=rule))


@quick_init
@dataclass(frozen=True)
class PassthroughPlan:
    """A request relayed upstream as it is (or with the compat rewrites), streamed back."""

    mode: ClassVar[str] = "passthrough"

    upstream_body: bytes
    config: Config
    model: str = ""
    client_stream: bool = False
    rewrites: tuple[str, ...] = ()
    affinity: str | None = None  # the conversation's key for the choice of a replica


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying what is wrong with it. Integers
    past 64 bits keep their exact value (`seed: 10**30` reaches upstream as written, never
    as the float orjson alone would make of it); a body nested deeper than MAX_DEPTH is
    refused before it is decoded (orjson would read it, then fail to write it on)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(f"The request body is not valid UTF-8: {exc}", None,
                           "invalid_json") from None
    if deeper_than(raw):
        raise _too_deep(text)
    try:
        body = exact_loads(text)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"The request body is not valid JSON: {exc}", None,
                           "invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.", None, "invalid_json")
    return body


def _too_deep(text: str) -> ProxyError:
    """The 400 for a body nested past MAX_DEPTH, naming where when the parser can read it."""
    try:
        where = deep_path(orjson.loads(text))
    except orjson.JSONDecodeError:
        where = ""
    at = f" (at {where})" if where else ""
    return bad_request(f"The request body nests arrays and objects more than {MAX_DEPTH} "
                        f"levels deep{at}; at most {MAX_DEPTH} are accepted.",
                        where.removesuffix("…") or None, "json_too_deep")


def _tool_schemas(tools: list[Any]) -> dict[str, dict[str, Any]]:
    """Function name → parameters schema, checking each tool's shape."""
    schemas: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(function, dict) or not isinstance(name, str) or not name:
            raise bad_request(f"tools[{i}] must be a function tool with a name.",
                               f"tools[{i}].function.name")
        parameters = function.get("parameters", {})
        if parameters is None:
            parameters = {}
        if not isinstance(parameters, dict):
            raise bad_request(f"tools[{i}].function.parameters must be a JSON object.",
                               f"tools[{i}].function.parameters")
        schemas[name] = parameters
    return schemas


def _chosen_function(tool_choice: Any, schemas: dict[str, Any]) -> str | None:
    """The function a named `tool_choice` forces, if any."""
    if not isinstance(tool_choice, dict):
        return None
    function = tool_choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise bad_request("tool_choice must name a function.", "tool_choice")
    if name not in schemas:
        raise bad_request(f"tool_choice names {name!r}, which is not among the tools.",
                           "tool_choice")
    return name


def _read_messages(messages: list[Any]) -> tuple[int, list[dict[str, Any]]]:
    """The conversation read once: the parts of each message the proxy reads (its role, its
    calls) checked to be of the right type (a 400 naming the field, as upstream would
    answer, before the proxy relies on them); the tool calls it already holds (assistant
    `tool_calls` and `function_call`), and the tools its system messages declare
    (`declared_in_messages`)."""
    history = 0
    declared: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise bad_request(f"messages[{i}] must be an object.", f"messages[{i}]")
        role = message.get("role")
        if not isinstance(role, str):
            raise bad_request(f"messages[{i}].role must be a string.", f"messages[{i}].role")
        calls = message.get("tool_calls")
        if calls is not None and not (isinstance(calls, list)
                                      and all(isinstance(call, dict) for call in calls)):
            raise bad_request(f"messages[{i}].tool_calls must be a list of objects.",
                               f"messages[{i}].tool_calls")
        if role == "assistant":
            history += len(calls) if calls is not None else 0
            history += 1 if isinstance(message.get("function_call"), dict) else 0
        elif role in _DECLARING:
            declared += _declared_by(message)
    return history, declared


def is_buffered(body: dict[str, Any]) -> bool:
    """Tools present (a non-empty list, or tools a system message declares) and
    `tool_choice` not "none"."""
    tools = body.get("tools")
    offered = (isinstance(tools, list) and bool(tools)) or bool(declared_in_messages(body))
    return offered and body.get("tool_choice") != "none"


_DECLARING = ("system", "developer")  # the roles whose messages may declare tools


def declared_in_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The function tools a `system` or `developer` message declares in a `tools` list of its
    own, in OpenAI's shape or flat (`{"name", "parameters"}`), each as an OpenAI tool. Kimi
    K3's prompt has them (ai-dynamo/dynamo's native K3 renderer, a port of the checkpoint's
    `encoding_k3.py`: such a message renders its tools as "New Tools Available", where it
    stands); entries without a name are not tools anyone can call."""
    messages = body.get("messages")
    found: list[dict[str, Any]] = []
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict) and message.get("role") in _DECLARING:
            found += _declared_by(message)
    return found


def _declared_by(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The function tools one system message declares (`declared_in_messages`)."""
    tools = message.get("tools")
    found: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str) and (
                function["name"]) and isinstance(function.get("parameters", {}),
                                                 dict | None):
            found.append({"type": "function", "function": function})
    return found


def _structured_output(response_format: Any) -> bool:
    """`response_format` asks for JSON output (`json_object` or `json_schema`)."""
    return isinstance(response_format, dict) and response_format.get("type") in (
        "json_object", "json_schema")


def plan_chat(raw: bytes, config: Config) -> TurnPlan[None] | PassthroughPlan:
    """The plan for a POST to /v1/chat/completions; raises ProxyError for bad requests."""
    body = parse_body(raw)
    model = body.get("model")
    model = model if isinstance(model, str) else ""
    config = config.for_model(model)
    stream = body.get("stream") is True
    if "tools" in body and body["tools"] is not None and not isinstance(body["tools"], list):
        raise bad_request("tools must be a list.", "tools")
    if not is_buffered(body):
        rewrites = rewrite_request(body, config, upstream_streams=stream)
        return PassthroughPlan(orjson.dumps(body) if rewrites else raw, config, model=model,
                               client_stream=stream, rewrites=tuple(rewrites),
                               affinity=_affinity(config, body))
    options = body.get("stream_options")
    include_usage = stream and isinstance(options, dict) and options.get("include_usage") is True
    return plan_turn(body, config, client_stream=stream, include_usage=include_usage)


@overload
def plan_turn(body: dict[str, Any], config: Config, *, client_stream: bool,
              include_usage: bool, front_data: None = None) -> TurnPlan[None]: ...


@overload
def plan_turn(body: dict[str, Any], config: Config, *, client_stream: bool,
              include_usage: bool, front_data: FrontData) -> TurnPlan[FrontData]: ...


def plan_turn(body: dict[str, Any], config: Config, *, client_stream: bool,
              include_usage: bool, front_data: Any = None) -> TurnPlan[Any]:
    """The turn for a chat completion body (the client's, or one a front translated to):
    tools checked, the loop guard applied, the upstream body built. `config` is the one in
    force for the body's model. Raises ProxyError for bad requests."""
    model = body.get("model")
    model = model if isinstance(model, str) else ""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise bad_request("messages must be a list.", "messages")
    history, declared = _read_messages(messages)
    tools = body.get("tools")
    tools = tools if isinstance(tools, list) else []
    listed = _tool_schemas(tools)
    schemas = dict(listed)  # and the tools a system message declares (Kimi K3), after them
    for name, parameters in _tool_schemas(declared).items():
        schemas.setdefault(name, parameters)
    tool_choice = body.get("tool_choice") if schemas else None
    only = _chosen_function(tool_choice, schemas)
    limit = config.loop_guard_max_tool_calls
    if limit and history > limit:
        raise bad_request(
            f"The conversation already holds {history} tool calls, more than the loop guard "
            f"allows ({limit}); the agent is likely stuck in a loop. Start a new conversation "
            "or raise loop_guard_max_tool_calls.",
            "messages", "tool_call_loop_guard")

    required = tool_choice == "required" or only is not None
    streamed = streams_live(config, client_stream=client_stream, tool_call_required=required)
    upstream = dict(body)
    rewrites = rewrite_request(upstream, config, upstream_streams=streamed)
    if config.reasoning_from_content and move_history_thinking(messages):
        rewrites.append("history_thinking_as_reasoning")  # as the proxy's answers had it
    upstream["stream"] = streamed
    if streamed:  # usage always, so that the assembled answer has it (sent if asked for)
        upstream["stream_options"] = {"include_usage": True}
    else:
        upstream.pop("stream_options", None)
    if listed and tool_choice != "none" and not config.upstream_tool_parser:
        # vLLM without --enable-auto-tool-choice refuses any other tool_choice; the tools stay
        # in the prompt, special tokens stay in the text, and the proxy applies the choice.
        upstream["tool_choice"] = "none"
        upstream["skip_special_tokens"] = False
        rewrites.append("tool_choice_applied_by_proxy")
    if schemas and config.tool_temperature is not None:
        upstream["temperature"] = config.tool_temperature
        rewrites.append("tool_temperature")
    formats = config.formats
    if _structured_output(body.get("response_format")):
        formats = ()  # the content is the requested JSON, decoded to its schema: never a call
        rewrites.append("structured_output_not_extracted")
    if tool_choice == "none":
        schemas = {}  # the client asked for no call: none is taken from the text
    return TurnPlan(
        orjson.dumps(upstream),
        config,
        ExtractionSettings(tools=schemas, only=only, formats=formats,
                           reasoning_from_content=config.reasoning_from_content,
                           deliver_unknown=config.unknown_tool_calls == "deliver",
                           thinking=thinking_rule(config.thinking_opened_by_template, False,
                                                  thinking_switched_off(upstream),
                                                  template_opens_thinking(config.formats))),
        model=model,
        client_stream=client_stream,
        include_usage=include_usage,
        history_tool_calls=history,
        rewrites=tuple(rewrites),
        parallel_tool_calls=body.get("parallel_tool_calls") is not False,
        tool_call_required=required,
        front_data=front_data,
        streamed=streamed,
        affinity=_affinity(config, upstream),
    )


def _affinity(config: Config, body: dict[str, Any]) -> str | None:
    """The conversation's affinity key, when the model has replicas to choose from (one
    upstream needs none: no hashing)."""
    return conversation_key(body) if isinstance(config.upstream, tuple) else None


def conversation_key(body: Mapping[str, Any]) -> str | None:
    """The affinity key of a chat completion body: its model, its leading system (and
    developer) messages, its tools and its first user message, the part of the prompt an
    agent never changes while the history grows behind it. None without messages."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    leading = []
    first_user = None
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role in ("system", "developer") and first_user is None:
            leading.append(message.get("content"))
            continue
        if role == "user":
            first_user = message.get("content")
            break
    try:
        prefix = orjson.dumps([body.get("model"), leading, body.get("tools"), first_user])
    except TypeError:  # a value orjson cannot write (an integer past 64 bits): its text
        prefix = repr([body.get("model"), leading, body.get("tools"), first_user]).encode()
    return "prefix:" + hashlib.blake2b(prefix, digest_size=16).hexdigest()


def streams_live(config: Config, *, client_stream: bool, tool_call_required: bool) -> bool:
    """Whether a turn runs in the streamed mode: `stream_mode: stream` and a client that
    streams (one that does not gains nothing from it). A turn whose `tool_choice` demands a
    call is buffered while it may be asked again (`required_call_retries`,
    `constrained_reask`): an answer without the call
    is replaced by another generation, and text already shown cannot be taken back."""
    asks_again = config.required_call_retries > 0 or config.constrained_reask != "off"
    return (config.stream_mode == "stream" and client_stream
            and not (tool_call_required and asks_again))
