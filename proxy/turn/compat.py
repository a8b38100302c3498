"""The compatibility contract: what clients send that vLLM refuses, rewritten before it goes
upstream. Each rewrite is switchable in the config (globally or per model) and named when
applied, for the log line."""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..base.config import Config
from ..toolcalls.repair import NotJson, loads_repaired

_LEADING = json.JSONDecoder()
_UNREADABLE = object()


def rewrite_request(body: dict[str, Any], config: Config, *, upstream_streams: bool,
                    ) -> list[str]:
    """Rewrite a chat completion body in place for the upstream; the names of the rewrites."""
    applied: list[str] = []
    if config.drop_store and "store" in body:
        del body["store"]
        applied.append("drop_store")
    if config.max_completion_tokens_as_max_tokens and "max_completion_tokens" in body:
        value = body.pop("max_completion_tokens")
        if value is not None and body.get("max_tokens") is None:
            body["max_tokens"] = value
        applied.append("max_completion_tokens_as_max_tokens")
    if config.developer_role_as_system and _developer_as_system(body.get("messages")):
        applied.append("developer_role_as_system")
    if config.drop_empty_tools and body.get("tools") == []:
        del body["tools"]
        applied.append("drop_empty_tools")
    if config.drop_orphan_tool_choice and "tool_choice" in body and not body.get("tools"):
        del body["tool_choice"]
        body.pop("parallel_tool_calls", None)
        applied.append("drop_orphan_tool_choice")
    if (config.drop_stream_options_without_stream and not upstream_streams
            and "stream_options" in body):
        del body["stream_options"]
        applied.append("drop_stream_options_without_stream")
    if config.repair_history_arguments and repair_history(body.get("messages")):
        applied.append("repair_history_arguments")
    return applied


def _developer_as_system(messages: Any) -> bool:
    changed = False
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict) and message.get("role") == "developer":
            message["role"] = "system"
            changed = True
    return changed


def _decoded(text: str) -> Any:
    """A JSON text as a value: strict, else narrowly repaired, else its leading JSON value
    (arguments followed by stray text); `_UNREADABLE` when none of these reads it."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return loads_repaired(text)[0]
    except NotJson:
        pass
    try:
        return _LEADING.raw_decode(text.lstrip())[0]
    except ValueError:
        return _UNREADABLE


def _object_string(arguments: Any) -> str | None:
    """`arguments` as a JSON-object string, or None when it already is one (or is an object
    too deep for orjson to write: then it goes on as the client wrote it)."""
    try:
        return _object_text(arguments)
    except TypeError:  # orjson.JSONEncodeError: nested past the 254 levels orjson writes
        return None


def _object_text(arguments: Any) -> str | None:
    """`_object_string`, raising orjson's error for a value it cannot write."""
    if isinstance(arguments, dict):
        return orjson.dumps(arguments).decode()
    if not isinstance(arguments, str) or not arguments.strip():
        return "{}"
    value = _decoded(arguments)
    if isinstance(value, dict):
        try:
            orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return orjson.dumps(value).decode()
        return None  # already a JSON object string
    for _ in range(3):  # encoded twice, or more: a string holding the object
        if not isinstance(value, str):
            break
        value = _decoded(value)
    return orjson.dumps(value).decode() if isinstance(value, dict) else "{}"


def repair_history(messages: Any) -> bool:
    """Make every assistant tool call's `arguments` in the history a JSON-object string, so
    that upstream (which parses them to render the chat template) accepts the next turn."""
    changed = False
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():  # another shape: upstream's 400
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            fixed = _object_string(function.get("arguments"))
            if fixed is not None:
                function["arguments"] = fixed
                changed = True
    return changed
