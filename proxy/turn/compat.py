"""The compatibility contract: what clients send that vLLM refuses, rewritten before it goes
upstream. Each rewrite is switchable in the config (globally or per model) and named when
applied, for the log line."""

from __future__ import annotations

import json
import re
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
    if config.stable_prefix and stable_prefix(body.get("messages")):
        applied.append("stable_prefix")
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


# --- the prefix cache: volatile lines behind the stable part -------------------------------

VOLATILE_LINES = (
    # Home Assistant's date and time (helpers/llm.py: BASE_PROMPT before 2026, first in the
    # prompt; DATE_TIME_PROMPT since, last, and only without its GetDateTime tool).
    re.compile(r"Current time is \d{1,2}:\d{2}(?::\d{2})?\. Today's date is "
               r"\d{4}-\d{2}-\d{2}\."),
    # Home Assistant's satellite lines: its area (or, for a device with none, the line that
    # stands in for it) and whether it can start timers (2025: before the exposed entities;
    # 2026: intent/llm.py, after them).
    re.compile(r"You are in area [^\n]{1,256} and all generic commands like 'turn on the "
               r"lights' should target this area\."),
    re.compile(r"When a user asks to turn on all devices of a specific type, ask (?:the )?"
               r"user to specify an area, unless there is only one device of that type\."),
    re.compile(r"This device is not able to start timers\."),
    # Claude Code's token reminder (`token_usage`: "Token usage: {used}/{total};
    # {remaining} remaining", in a system-reminder), where a client puts it in the system
    # prompt beside the billing line the Messages front drops.
    re.compile(r"Token usage: \d+/\d+; -?\d+ remaining"),
)
"""The lines clients write into a system prompt that change from one request to the next
(or from one satellite to the next) ahead of a long part that does not, each matched whole."""

_REMINDER = ("<system-reminder>", "</system-reminder>")


def _volatile(line: str) -> bool:
    return any(pattern.fullmatch(line.strip()) for pattern in VOLATILE_LINES)


def _units(lines: list[str]) -> list[tuple[list[str], bool]]:
    """The lines in units (a line, or a `<system-reminder>` block), each with whether it is
    volatile (a block: when every line inside it is)."""
    units: list[tuple[list[str], bool]] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == _REMINDER[0]:
            end = next((j for j in range(i + 1, min(len(lines), i + 16))
                        if lines[j].strip() == _REMINDER[1]), None)
            inner = lines[i + 1:end] if end is not None else []
            if end is not None and inner:  # a block moves whole, or not at all
                units.append((lines[i:end + 1], all(map(_volatile, inner))))
                i = end + 1
                continue
        units.append(([lines[i]], _volatile(lines[i])))
        i += 1
    return units


def volatile_last(text: str) -> str:
    """`text` with its volatile lines (`VOLATILE_LINES`) moved behind the rest, in the order
    they came, word for word: the same lines, none dropped, the stable ones first in their
    own order, a final line end kept final."""
    if not any(pattern.search(text) for pattern in VOLATILE_LINES):
        return text
    ends_open = text.endswith("\n")
    units = _units((text[:-1] if ends_open else text).split("\n"))
    stable = [line for lines, volatile in units if not volatile for line in lines]
    moved = [line for lines, volatile in units if volatile for line in lines]
    return "\n".join(stable + moved) + ("\n" if ends_open else "")


def stable_prefix(messages: Any) -> bool:
    """Move the volatile lines of the system messages that open the conversation behind
    their stable part (`volatile_last`), so that two requests a minute apart, or from two
    satellites, share the prefix the upstream has cached; whether any moved."""
    changed = False
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") not in ("system", "developer"):
            break
        content = message.get("content")
        if isinstance(content, str):
            moved = volatile_last(content)
            changed |= moved != content
            message["content"] = moved
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    moved = volatile_last(part["text"])
                    changed |= moved != part["text"]
                    part["text"] = moved
    return changed
