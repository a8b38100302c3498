"""A call's JSON envelope, under any of the spellings models write it in (a named repair
where the spelling is not the format's own: `args_as_arguments`, `tool_name_as_key`).

A trained format writes `{"name": …, "arguments": …}`; a model that improvises writes the
same call under other keys, and every one of them reads it the same way:

- the name under one of `NAME_KEYS` (`name`, `tool`, `tool_name`, `function`, `action`, …)
  and the arguments under at most one of `ARGUMENT_KEYS` (`arguments`, `parameters`,
  `params`, `args`, `input`, …), in any combination; `id` and a `type` that says "a call"
  may stand beside them;
- nested: the call under one of `WRAPPER_KEYS` (`{"tool_call": {…}}`, `{"function": {"name":
  …, "arguments": "<JSON in a string>"}}`, `{"type": "function", "function": {…}}`);
- the tool's name as the only key (`{"get_weather": {"city": "Paris"}}`): taken only when the
  key names an offered tool and every argument is one of its declared parameters (else it is
  data that shares a key with a schema: a table keyed by tool, a usage record);
- double-encoded: an answer that is itself JSON holding a call as a string (`"{\\"name\\": …}"`,
  `{"content": "{\\"fetch_url\\": {…}}"}`), read once more, at most `_MAX_DEPTH` deep.

Anything else is not an envelope: an object with a key none of these spellings has (a
record, a config) stays text. Values, not exceptions: `call_of` returns the call or the
`Refusal` that says why there is none.
"""

from __future__ import annotations

from typing import Any

from ..names import ToolNames
from ..types import Refusal, ToolSchemas
from . import NotJson, loads_repaired

NAME_KEYS = ("name", "tool", "tool_name", "function", "function_name", "action", "tool_call")
ARGUMENT_KEYS = ("arguments", "parameters", "params", "args", "input", "action_input",
                 "tool_input", "kwargs")
WRAPPER_KEYS = ("tool_call", "function", "function_call", "call", "tool_use")
# What may stand beside a call's name and arguments without making it something else.
_ASIDE_KEYS = frozenset({"id", "type", "call_id", "index"})
_CALL_TYPES = frozenset({"function", "tool_call", "tool_use", "function_call", "tool"})
# The keys of an answer that is JSON holding its text (a double-encoded call).
_TEXT_KEYS = frozenset({"content", "response", "answer", "text", "output", "message"})
_ROLES = frozenset({"assistant", "model", "bot"})
_MAX_DEPTH = 3
DOUBLE_ENCODED = "double_encoded_call"  # the repair: the call was JSON inside a JSON string
NAME_AS_KEY = "tool_name_as_key"  # the repair: the tool's name was the object's only key

Call = tuple[str, Any]
"""A call's name as written, and its arguments as written (None: no arguments key)."""


def _aside_ok(item: dict[str, Any]) -> bool:
    kind = item.get("type", "function")
    return isinstance(kind, str) and kind in _CALL_TYPES


def _decoded_string(value: str) -> Any:
    """The JSON a string holds, when it holds an object or a list; else None."""
    stripped = value.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return loads_repaired(stripped)[0]
    except NotJson:
        return None


def calls_of(value: Any, names: ToolNames, tools: ToolSchemas, repairs: list[str],
             arguments_key: str = "arguments", depth: int = 0) -> list[Call | Refusal]:
    """The call, or the refusal, of each envelope in a decoded JSON value (an object or a
    list of them; one bad sibling does not drop the good calls of a list); a value that is
    a string, or an answer object holding one, is read once more (double-encoded)."""
    inner = _double_encoded(value) if depth < _MAX_DEPTH else None
    if inner is not None:
        repairs.append(DOUBLE_ENCODED)
        return calls_of(inner, names, tools, repairs, arguments_key, depth + 1)
    if isinstance(value, dict) and len(value) == 1 and isinstance(
            listed := value.get("tool_calls", value.get("function_calls")), list):
        value = listed  # `{"tool_calls": [{…}, …]}` (xLAM's, llama.cpp's Generic)
    items = value if isinstance(value, list) else [value]
    if not items:
        return [Refusal("empty_call_list")]
    return [call_of(item, names, tools, repairs, arguments_key) for item in items]


def _double_encoded(value: Any) -> Any:
    """The JSON value a string (or an answer object's one text field) holds, else None."""
    text = answer_text(value)
    return None if text is None else _decoded_string(text)


def answer_text(value: Any) -> str | None:
    """The text a decoded JSON answer holds: the answer itself when it is a string, or the
    one text field (`content`, `response`, …, with an assistant's `role` beside it) of an
    answer object; None for any other value."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict) or not value:
        return None
    texts = [key for key in value if key in _TEXT_KEYS]
    if len(texts) != 1 or set(value) - {*texts, "role"} or not isinstance(value[texts[0]], str):
        return None
    if "role" in value and value["role"] not in _ROLES:
        return None
    return str(value[texts[0]])


def call_of(item: Any, names: ToolNames, tools: ToolSchemas, repairs: list[str],
            arguments_key: str = "arguments", depth: int = 0) -> Call | Refusal:
    """The call one decoded envelope holds (its name, and its arguments as written: a dict,
    a string holding JSON, or None when none were written), or why it holds none."""
    if not isinstance(item, dict):
        return Refusal("unrecognised_shape")
    keys = set(item) - _ASIDE_KEYS
    if not _aside_ok(item):
        return Refusal("unrecognised_shape", _name_in(item))
    wrapped = [key for key in keys if key in WRAPPER_KEYS and isinstance(item[key], dict)]
    if len(keys) == 1 and wrapped and depth < _MAX_DEPTH:
        return call_of(item[wrapped[0]], names, tools, repairs, arguments_key, depth + 1)
    named = [key for key in keys if key in NAME_KEYS]
    if not named:
        return _name_as_key(item, keys, names, tools, repairs)
    if len(named) > 1 or not isinstance(item[named[0]], str):
        return Refusal("unrecognised_shape", _name_in(item))
    name = item[named[0]]
    given = [key for key in keys if key in ARGUMENT_KEYS]
    if len(given) > 1 or keys - {named[0], *given}:
        return Refusal("unrecognised_shape", name)
    if not given:
        return name, None  # no arguments written: {} only for a tool that needs none
    if item[given[0]] is None:
        return Refusal("arguments_not_object", name)
    if given[0] != arguments_key:
        repairs.append(f"{given[0]}_as_{arguments_key}")
    return name, item[given[0]]


def _name_in(item: dict[str, Any]) -> str | None:
    """The name an object that is no envelope still writes (for diagnostics)."""
    found = next((item[key] for key in NAME_KEYS if isinstance(item.get(key), str)), None)
    return found if isinstance(found, str) else None


def _name_as_key(item: dict[str, Any], keys: set[str], names: ToolNames, tools: ToolSchemas,
                 repairs: list[str]) -> Call | Refusal:
    """`{"get_weather": {"city": "Paris"}}`: the only key names an offered tool, and its value
    gives only parameters that tool declares (a string holding such an object too)."""
    if len(keys) != 1 or set(item) != keys:
        return Refusal("unrecognised_shape")
    (key,) = keys
    match = names.match(key)
    value = item[key]
    if isinstance(value, str):
        value = _decoded_string(value)
    if match is None or not isinstance(value, dict):
        return Refusal("unrecognised_shape")
    if not declared_only(value, tools.get(match.name)):
        return Refusal("undeclared_parameters", key)
    repairs.append(NAME_AS_KEY)
    return key, value


def declared_only(arguments: dict[str, Any], parameters: Any) -> bool:
    """Whether every key of `arguments` is a parameter the tool's schema declares (a schema
    that declares none, or allows any, takes any key)."""
    if not isinstance(parameters, dict):
        return True
    declared = parameters.get("properties")
    if not isinstance(declared, dict) or not declared:
        return True
    return set(arguments) <= set(declared)
