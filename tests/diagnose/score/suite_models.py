"""Model behaviours the fakes run for the score's suite: each finds the suite turn it is
asked (by its first user message) and answers it in its own way, so that what a run scores
follows from the behaviour alone.

- `calls_as_text`: the right calls in its markers (Hermes' `<tool_call>`), prose where none
  is right; a server with a parser for those markers reads them (a correct native parser).
- `never_calls_unless_constrained`: prose, unless decoding is constrained; then it writes
  the right call where the constraint lets it.
- `botches_arguments`: on a turn that needs calls, its first call's JSON cut off before the
  first value ends (the others whole); constrained, the right call.

Under a constraint every behaviour writes what it meant where the constraint's schema lets
it (`meant`), else what fits. A thinking turn's answer comes after its reasoning.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.diagnose.score.suite import BY_PROMPT, Expected, SuiteTurn
from proxy.diagnose.score.tools import TOOLS
from tests.fakes.constraints import fit_errors, fitting_text, optional
from tests.fakes.models import CALL_CLOSE, CALL_OPEN, Generation, Model, Turn
from tests.fakes.schema import instance_of

PROSE = "Here is my answer, in words."
EXAMPLE = ('A call would look like this:\n```json\n{"name": "get_weather", "arguments": '
           '{"city": "Paris"}}\n```\nI have not called it.')
REASONING = "Let me think this over."


def suite_turn(turn: Turn) -> SuiteTurn | None:
    """The suite turn a model is asked, by its first user message."""
    first = next((m.get("content") for m in turn.messages
                  if isinstance(m, dict) and m.get("role") == "user"), None)
    return BY_PROMPT.get(first) if isinstance(first, str) else None


def arguments(expected: Expected) -> dict[str, Any]:
    """What a right call writes: the fixed arguments, and the schema's required rest."""
    filled = instance_of(TOOLS[expected.tool]["function"]["parameters"])
    return {**(filled if isinstance(filled, dict) else {}), **dict(expected.fixed)}


def frame(expected: Expected, broken: bool = False) -> str:
    """One call in Hermes' markers; `broken`: its JSON cut inside the first value."""
    whole = orjson.dumps({"name": expected.tool, "arguments": arguments(expected)}).decode()
    if broken:
        values = arguments(expected)
        cut = whole.index('"arguments":') + 12
        if values:
            first = orjson.dumps(next(iter(values.values()))).decode()
            cut = whole.index(first, cut) + max(1, len(first) // 2)
        whole = whole[:cut]
    return f"{CALL_OPEN}\n{whole}\n{CALL_CLOSE}"


def _prose(meant: SuiteTurn) -> str:
    return EXAMPLE if meant.id == "no-call-example" else PROSE


def _constrained(turn: Turn, meant: SuiteTurn) -> str:
    """What the model writes under a constraint that binds it: its calls, in the first of
    the shapes a JSON constraint asks that fits (an array of calls, one call, the arguments
    alone), or in a structural tag's spans; else what fits."""
    assert turn.constraint is not None
    calls = [{"name": e.tool, "arguments": arguments(e)} for e in meant.calls]
    if turn.constraint.kind in ("json_schema", "json_object") and calls:
        shapes = [calls, [{"name": c["name"], "parameters": c["arguments"]} for c in calls],
                  calls[0], calls[0]["arguments"]]
        for shape in shapes:
            text = orjson.dumps(shape).decode()
            if not fit_errors(turn.constraint, text):
                return text
    wanted = {e.tool: arguments(e) for e in reversed(meant.calls)}

    def free(function: dict[str, Any]) -> Any:  # a tag that leaves the arguments free
        return wanted.get(function.get("name")) or instance_of(function.get("parameters") or {})

    return fitting_text(turn.constraint, None, turn.tools, free=free,
                        meant=lambda function: wanted.get(function.get("name")))


def _behaviour(free: Any) -> Model:
    """A model answering a suite turn with `free(turn)` unless a constraint binds it."""
    def model(turn: Turn) -> Generation:
        meant = suite_turn(turn)
        if meant is None:
            return Generation("That is no turn of the suite.")
        if turn.constraint is not None and not optional(turn.constraint):
            text = _constrained(turn, meant)
        else:
            text = free(meant)
        return Generation(text, REASONING if meant.thinking else None)
    return model


def calls_as_text() -> Model:
    """The right calls in Hermes' markers; prose where no call is right."""
    return _behaviour(lambda meant: "\n".join(frame(e) for e in meant.calls)
                      if meant.calls else _prose(meant))


def never_calls_unless_constrained() -> Model:
    """Prose, unless constrained."""
    return _behaviour(_prose)


def botches_arguments() -> Model:
    """Its first call's arguments cut off; prose where no call is right."""
    return _behaviour(lambda meant: "\n".join(
        frame(e, broken=i == 0) for i, e in enumerate(meant.calls))
        if meant.calls else _prose(meant))
