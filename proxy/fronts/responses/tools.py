"""The Responses API's tools as chat functions, and the model's calls back as Responses items.

`function` tools are chat functions one to one; `namespace` tools are flattened into plain
function names without dots (`namespace__name`) and restored on the way back (the call
carries its `namespace`); `custom` (freeform) tools are offered as a function with one string
parameter, `input`, and come back as a `custom_tool_call` with that raw input. Hosted tools
(`web_search`, `file_search`, `tool_search`, …) have no chat equivalent: they are left out of
what the model sees and named for the log line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...base.errors import bad_request
from ...turn.result import Call

SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_CUSTOM_PARAMETER = "input"


def flat_name(name: str, namespace: str | None) -> str:
    """The chat function name of a (namespaced) Responses tool: `namespace__name`, with any
    character a function name may not hold (a dot) written as `_`."""
    if not namespace:
        return name
    return _UNSAFE.sub("_", namespace) + SEPARATOR + _UNSAFE.sub("_", name)


@dataclass(frozen=True)
class ToolRef:
    """What one chat function stands for on the Responses side."""

    name: str
    namespace: str | None = None
    custom: bool = False


@dataclass
class Toolset:
    """The request's tools as the model sees them: chat functions, what each one stands for,
    and the hosted tools left out."""

    functions: list[dict[str, Any]] = field(default_factory=list)
    refs: dict[str, ToolRef] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)

    def add(self, ref: ToolRef, function: dict[str, Any], param: str) -> None:
        """Offer one function (a 400 when its chat name is taken already)."""
        name = flat_name(ref.name, ref.namespace)
        if name in self.refs:
            raise bad_request(f"Two tools are named {name!r} once flattened.", param)
        self.refs[name] = ref
        self.functions.append({"type": "function", "function": {"name": name, **function}})

    def only(self, names: set[str]) -> None:
        """Keep only the functions named (`tool_choice: allowed_tools`)."""
        self.functions = [f for f in self.functions if f["function"]["name"] in names]


def _text(value: Any, param: str, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise bad_request(f"{param} must be a {'non-empty ' if required else ''}string.", param)
    return value


def _schema(value: Any, param: str) -> dict[str, Any]:
    if value is None:
        return {"type": "object", "properties": {}}
    if not isinstance(value, dict):
        raise bad_request(f"{param} must be a JSON object.", param)
    return value


def _function(tool: dict[str, Any], param: str) -> dict[str, Any]:
    """A `function` tool's chat function body (without its name)."""
    out: dict[str, Any] = {}
    description = _text(tool.get("description"), f"{param}.description")
    if description:
        out["description"] = description
    out["parameters"] = _schema(tool.get("parameters"), f"{param}.parameters")
    return out


def _custom(tool: dict[str, Any], param: str) -> dict[str, Any]:
    """A `custom` (freeform) tool as a function of one string parameter, its grammar (if
    any) told in that parameter's description."""
    description = _text(tool.get("description"), f"{param}.description")
    fmt = tool.get("format")
    hint = "The tool's whole input, as free text."
    if isinstance(fmt, dict) and fmt.get("type") == "grammar":
        syntax = fmt.get("syntax") if isinstance(fmt.get("syntax"), str) else "formal"
        definition = fmt.get("definition")
        if isinstance(definition, str) and definition:
            hint = f"The tool's whole input, written in this {syntax} grammar:\n{definition}"
    elif fmt is not None and not isinstance(fmt, dict):
        raise bad_request(f"{param}.format must be an object.", f"{param}.format")
    out: dict[str, Any] = {"description": description} if description else {}
    out["parameters"] = {"type": "object",
                         "properties": {_CUSTOM_PARAMETER: {"type": "string",
                                                            "description": hint}},
                         "required": [_CUSTOM_PARAMETER], "additionalProperties": False}
    return out


def _add_member(toolset: Toolset, tool: Any, param: str, namespace: str | None) -> None:
    """One function or custom tool (top level or inside a namespace)."""
    if not isinstance(tool, dict):
        raise bad_request(f"{param} must be an object.", param)
    kind = tool.get("type")
    name = _text(tool.get("name"), f"{param}.name", required=True)
    assert name is not None
    if kind == "function":
        toolset.add(ToolRef(name, namespace), _function(tool, param), f"{param}.name")
    elif kind == "custom":
        toolset.add(ToolRef(name, namespace, custom=True), _custom(tool, param),
                    f"{param}.name")
    else:
        raise bad_request(f"{param}.type must be 'function' or 'custom' inside a namespace.",
                          f"{param}.type")


def read_tools(tools: Any) -> Toolset:
    """The request's `tools` as chat functions (a 400 naming the tool for a bad shape)."""
    toolset = Toolset()
    if tools is None:
        return toolset
    if not isinstance(tools, list):
        raise bad_request("tools must be a list.", "tools")
    for i, tool in enumerate(tools):
        param = f"tools[{i}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise bad_request(f"{param} must be an object with a string type.", f"{param}.type")
        kind = tool["type"]
        if kind in ("function", "custom"):
            _add_member(toolset, tool, param, None)
        elif kind == "namespace":
            namespace = _text(tool.get("name"), f"{param}.name", required=True)
            members = tool.get("tools")
            if not isinstance(members, list):
                raise bad_request(f"{param}.tools must be a list.", f"{param}.tools")
            for j, member in enumerate(members):
                _add_member(toolset, member, f"{param}.tools[{j}]", namespace)
        else:
            toolset.left_out.append(kind)  # hosted: web_search, file_search, mcp, …
    return toolset


def read_tool_choice(choice: Any, toolset: Toolset) -> Any:
    """The chat `tool_choice` for the Responses one (None: not given)."""
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        raise bad_request(
            "tool_choice must be 'auto', 'none', 'required' or an object with a type.",
            "tool_choice")
    kind = choice["type"]
    if kind in ("function", "custom"):
        name = _text(choice.get("name"), "tool_choice.name", required=True)
        assert name is not None
        namespace = choice.get("namespace") if isinstance(choice.get("namespace"), str) else None
        chat_name = flat_name(name, namespace)
        if chat_name not in toolset.refs:
            raise bad_request(f"tool_choice names {name!r}, which is not among the tools.",
                              "tool_choice.name")
        return {"type": "function", "function": {"name": chat_name}}
    if kind == "allowed_tools":
        mode = choice.get("mode")
        allowed = choice.get("tools")
        if mode not in ("auto", "required") or not isinstance(allowed, list):
            raise bad_request(
                "tool_choice allowed_tools needs mode 'auto' or 'required' and a list "
                "of tools.", "tool_choice")
        toolset.only(_allowed_names(allowed))
        return mode
    raise bad_request(f"tool_choice {kind!r} names a hosted tool, which a chat completions server "
                      "cannot run.", "tool_choice")


def _allowed_names(allowed: list[Any]) -> set[str]:
    """The chat names of the tools `allowed_tools` lists (a hosted tool, without a name, is
    skipped: it is never offered)."""
    names = set()
    for i, tool in enumerate(allowed):
        where = f"tool_choice.tools[{i}]"
        if not isinstance(tool, dict):
            raise bad_request(f"{where} must be an object.", where)
        name = _text(tool.get("name"), f"{where}.name")
        namespace = _text(tool.get("namespace"), f"{where}.namespace")
        if name is not None:
            names.add(flat_name(name, namespace))
    return names


def custom_input(arguments: str) -> str:
    """The raw input of a freeform call, from the arguments of the function it was offered
    as: its `input`; else the one string the model wrote under another name; else the
    arguments as written."""
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(value, dict):
        if isinstance(text := value.get(_CUSTOM_PARAMETER), str):
            return text
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(value) == 1 and strings:
            return strings[0]
    return arguments


def custom_arguments(text: str) -> str:
    """A freeform call's input as the arguments of the function it is offered as."""
    return orjson.dumps({_CUSTOM_PARAMETER: text}).decode()


def call_item(call: Call, refs: dict[str, ToolRef], item_id: str) -> dict[str, Any]:
    """A turn's call as a Responses output item: `function_call` (with its `namespace`)
    or `custom_tool_call` (with its raw `input`)."""
    ref = refs.get(call.name) or ToolRef(call.name)
    extra = {"namespace": ref.namespace} if ref.namespace else {}
    if ref.custom:
        return {"id": item_id, "type": "custom_tool_call", "status": "completed",
                "call_id": call.id, "name": ref.name,
                "input": custom_input(call.arguments), **extra}
    return {"id": item_id, "type": "function_call", "status": "completed",
            "call_id": call.id, "name": ref.name,
            "arguments": call.arguments or "{}", **extra}
