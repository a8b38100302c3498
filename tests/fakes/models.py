"""Scripted model behaviours every fake server can run: a model is a function from the turn it
is asked (messages, tools, the constraint the server decodes under) to the text it generates.
The server then does with that text what the real one does (its tool parser, its shapes).

- `never_calls_unless_constrained`: prose, unless decoding is constrained; then text that fits.
- `botches_arguments`: its own call markers around arguments that are broken JSON or break the
  tool's schema, unless constrained; then text that fits.
- `botches_call`: the same, for a call it means to make to a given tool with given arguments
  (an agent's shell tool, a command): constrained, it writes those where the mask lets them.
- `calls`: a well-formed call in its markers; `says`: a fixed text.
- `thinks`: any of these, reasoning first (the server returns it in its reasoning field);
  `cut_by_length`: any of these, stopped by `max_tokens`; `constrained_after`: any of these,
  its constrained generations held until the test lets them go.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from tests.fakes.constraints import Constraint, FreeArguments, Script, fitting_text, optional
from tests.fakes.schema import instance_of


@dataclass(frozen=True)
class Turn:
    """What the model is asked: the chat, the tools, and the constraint in force (None: free)."""

    messages: list[Any] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    constraint: Constraint | None = None


@dataclass(frozen=True)
class Generation:
    """What the model wrote."""

    text: str
    reasoning: str | None = None
    finish_reason: str = "stop"


Model = Callable[[Turn], Generation]

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"  # Hermes / Qwen's call wrapper


def says(text: str, reasoning: str | None = None) -> Model:
    """A model that writes `text` whatever it is asked (constraints included)."""
    return lambda turn: Generation(text, reasoning)


def thinks(reasoning: str, model: Model) -> Model:
    """`model`, with `reasoning` written before its answer."""
    def thinking(turn: Turn) -> Generation:
        answer = model(turn)
        return Generation(answer.text, reasoning, answer.finish_reason)
    return thinking


def calls(name: str, arguments: dict[str, Any], opener: str = CALL_OPEN,
          closer: str = CALL_CLOSE) -> Model:
    """A model that writes one well-formed call in its markers (constrained: text that fits)."""
    text = f"{opener}\n" + orjson.dumps({"name": name, "arguments": arguments}).decode() \
        + f"\n{closer}"
    return lambda turn: Generation(text if turn.constraint is None
                                   else fitting_text(turn.constraint, None, turn.tools))


def never_calls_unless_constrained(prose: str = "I would rather describe what to do.",
                                   script: Script = None,
                                   meant: FreeArguments | None = None) -> Model:
    """A model that answers in prose unless a constraint is in force that demands more than
    free text; then it writes a text that fits it (`script` answers regex and grammar
    constraints; `meant`, the arguments it means for a tool, kept where they fit). A
    constraint that arms only on a call's opener leaves its prose alone."""
    def model(turn: Turn) -> Generation:
        if turn.constraint is None or optional(turn.constraint):
            return Generation(prose)
        return Generation(fitting_text(turn.constraint, script, turn.tools, meant=meant))
    return model


def _function(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return (tools[0].get("function") or {}) if tools else {"name": "tool", "parameters": {}}


def violating(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that break `schema`: a required key left out, else a property of the wrong
    type, else an extra key where none is allowed, else a string where an object is due."""
    arguments = instance_of(schema)
    if not isinstance(arguments, dict):
        return {"unexpected": True}
    required = schema.get("required") or []
    if required:
        arguments.pop(required[0], None)
        return arguments
    properties = schema.get("properties") or {}
    for key, sub in properties.items():
        wrong = 12345 if sub.get("type") != "integer" and sub.get("type") != "number" else "x"
        return {**arguments, key: wrong}
    return {**arguments, "unexpected": True}


def botches_arguments(how: str = "broken", opener: str = CALL_OPEN, closer: str = CALL_CLOSE,
                      script: Script = None, prose: str = "") -> Model:
    """A model that opens a call to the first tool in its own markers and botches it: `broken`
    arguments (JSON cut off mid-value) or `violating` ones (valid JSON that breaks the tool's
    schema), after `prose`; constrained (even by a constraint that arms on its opener), it
    writes a text that fits — and where the constraint leaves a call's arguments free (a tag
    without the tool's schema), violating ones."""
    if how not in ("broken", "violating"):
        raise ValueError(f"how: broken or violating, not {how!r}")

    def botched(function: dict[str, Any]) -> dict[str, Any]:  # JSON is forced; the schema not
        return violating(function.get("parameters") or {})

    def model(turn: Turn) -> Generation:
        if turn.constraint is not None:
            return Generation(fitting_text(turn.constraint, script, turn.tools, botched))
        function = _function(turn.tools)
        name, schema = function.get("name"), function.get("parameters") or {}
        if how == "violating":
            body = orjson.dumps({"name": name, "arguments": violating(schema)}).decode()
        else:
            whole = orjson.dumps({"name": name, "arguments": instance_of(schema)}).decode()
            body = whole[:whole.rindex(":") + 3]  # stops inside the last value
        return Generation(f"{prose}{opener}\n{body}\n{closer}")
    return model


def cut_by_length(model: Model) -> Model:
    """`model`, its generation stopped by `max_tokens` (finish `length`)."""
    def cut(turn: Turn) -> Generation:
        answer = model(turn)
        return Generation(answer.text, answer.reasoning, "length")
    return cut


def constrained_after(gate: threading.Event, model: Model, waited: list[bool]) -> Model:
    """`model`, whose constrained generations begin only once `gate` is set (at most 20 s;
    `waited` records, per such generation, whether the gate was set): what the client had
    before a re-ask answered."""
    def gated(turn: Turn) -> Generation:
        if turn.constraint is not None:
            waited.append(gate.wait(20))
        return model(turn)
    return gated

def botches_call(name: str, arguments: dict[str, Any], how: str = "broken",
                 opener: str = CALL_OPEN, closer: str = CALL_CLOSE) -> Model:
    """A model that means to call `name` with `arguments` and, free, botches it in its own
    markers: JSON cut off before the arguments' first value ends (`broken`), or the
    arguments without their first key (`violating`); constrained, it writes what it meant
    wherever the constraint's schema lets it (a structural tag for `name`), else text that
    fits. Asked without `name` among its tools, it writes prose."""
    if how not in ("broken", "violating"):
        raise ValueError(f"how: broken or violating, not {how!r}")

    def meant(function: dict[str, Any]) -> dict[str, Any] | None:
        return arguments if function.get("name") == name else None

    def model(turn: Turn) -> Generation:
        offered = [(t.get("function") or {}).get("name") for t in turn.tools]
        if name not in offered:
            return Generation("There is no tool for that here.")
        if turn.constraint is not None:
            return Generation(fitting_text(turn.constraint, None, turn.tools, meant=meant))
        if how == "violating":
            body = orjson.dumps({"name": name, "arguments": dict(list(arguments.items())[1:])})
        else:
            whole = orjson.dumps({"name": name, "arguments": arguments})
            first = orjson.dumps(next(iter(arguments.values())))
            body = whole[:whole.index(first) + max(1, len(first) // 2)]
        return Generation(f"{opener}\n{body.decode()}\n{closer}")
    return model
