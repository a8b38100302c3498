"""The score's checks of one answer against its suite turn, pure: a `Reading` and the turn
in, each check's verdict out (True, False, or None where it does not apply).

`CHECKS` is the list the report and docs/score.md read (a test keeps them equal)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import permutations
from typing import Any

import orjson

from ...toolcalls.registry import SPECS
from ...toolcalls.validity import check
from .reading import Call, Reading
from .suite import Expected, SuiteTurn
from .tools import TOOLS

# name → what it asks of an answer (the report's rows, in order)
CHECKS: dict[str, str] = {
    "answered": "HTTP 200 and a readable answer, no error in it",
    "tool": "each call the turn expects came, of the right tool",
    "schema": "every call's arguments are a JSON object that fits its tool's schema, "
              "as sent (nothing coerced)",
    "fixed": "the arguments the prompt fixes came as given",
    "no_invented": "no call beyond those expected (none at all where none is right)",
    "clean": "the content holds no call markup, special token or thinking tag",
    "finish": "finish_reason tool_calls with calls, stop without (stop also with a "
              "named tool_choice, as OpenAI answers it)",
}
RIGHT = "right"  # every check that applies passed
STREAM_EQUAL = "stream_equal"  # the streamed answer says what the buffered one says

# What must never be left in an answer's content: the call markers of every format the
# proxy knows that are tokens or tags (not those that are plain words or punctuation), the
# special-token shapes and the thinking tags.
_TOKEN_LIKE = re.compile(r"^[<\[|\]]|[▁｜]")
_OPENERS = {marker for spec in SPECS for marker in spec.markers if _TOKEN_LIKE.search(marker)}
# each tag opener's closer too (`<x>` closes as `</x>`), read from the same specs
_CLOSERS = {"</" + marker[1:] for marker in _OPENERS
            if marker.startswith("<") and marker.endswith(">") and marker[1:2].isalpha()}
MARKERS: tuple[str, ...] = tuple(sorted(_OPENERS | _CLOSERS | {"<think>", "</think>"}))
_SPECIAL = re.compile(r"<\|[A-Za-z_][\w.:-]{0,40}\|>|<｜[^｜\n]{1,40}｜>")


def markup_in(content: str) -> str | None:
    """The first markup `content` holds (None: none): a call marker, a special token or a
    thinking tag. (A call written as plain JSON is no markup: an example asked for is that
    too; the `tool` and `no_invented` checks judge calls.)"""
    for marker in MARKERS:
        if marker in content:
            return marker
    found = _SPECIAL.search(content)
    return found[0] if found else None


def _arguments(call: Call) -> dict[str, Any] | None:
    try:
        value = orjson.loads(call.arguments)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def schema_valid(call: Call, offered: Sequence[str]) -> bool:
    """The call names a tool `offered` and its arguments fit that tool's schema as they
    are."""
    tool = TOOLS.get(call.name) if call.name in offered else None
    arguments = _arguments(call)
    if tool is None or arguments is None:
        return False
    validity = check(arguments, tool["function"]["parameters"])
    return not validity.problems and not validity.coerced


def same_value(given: Any, fixed: Any) -> bool:
    """A delivered value is the fixed one: numbers by value (3 is 3.0, True is no 1),
    strings trimmed at the ends, objects and arrays item by item."""
    if isinstance(fixed, bool) or isinstance(given, bool):
        return given is fixed
    if isinstance(fixed, (int, float)):
        return isinstance(given, (int, float)) and given == fixed
    if isinstance(fixed, str):
        return isinstance(given, str) and given.strip() == fixed.strip()
    if isinstance(fixed, Mapping):
        return (isinstance(given, dict) and set(given) >= set(fixed)
                and all(same_value(given[k], v) for k, v in fixed.items()))
    if isinstance(fixed, list):
        return (isinstance(given, list) and len(given) == len(fixed)
                and all(same_value(g, f) for g, f in zip(given, fixed, strict=True)))
    return bool(given == fixed)


def _fits(call: Call, expected: Expected) -> bool:
    arguments = _arguments(call)
    return (call.name == expected.tool and arguments is not None
            and same_value(arguments, dict(expected.fixed)))


def _matched(calls: Sequence[Call], expected: Sequence[Expected], fits: Any) -> bool:
    """Each expected call has a call of its own that `fits` it (orders tried: few calls)."""
    if len(calls) < len(expected):
        return False
    if len(calls) > 6:
        return False  # more calls than any turn expects by far: not judged a match
    return any(all(fits(calls[i], e) for i, e in zip(order, expected, strict=False))
               for order in permutations(range(len(calls)), len(expected)))


def finish_right(turn: SuiteTurn, reading: Reading) -> bool:
    """`tool_calls` with calls (`stop` too under a named choice), `stop` without."""
    if reading.calls:
        named = isinstance(turn.tool_choice, dict)
        return reading.finish == "tool_calls" or (named and reading.finish == "stop")
    return reading.finish == "stop"


def verdicts(turn: SuiteTurn, reading: Reading) -> dict[str, bool | None]:
    """Each check's verdict (None: it does not apply to this turn), and `right`."""
    calls, expected = reading.calls, turn.calls
    if not reading.answered:
        out: dict[str, bool | None] = dict.fromkeys(CHECKS, False)
        if not expected:
            out.update(tool=None, schema=None, fixed=None)
        out[RIGHT] = False
        return out
    extra = Counter(call.name for call in calls) - Counter(e.tool for e in expected)
    out = {
        "answered": True,
        "tool": _matched(calls, expected, lambda call, e: call.name == e.tool)
        if expected else None,
        "schema": (bool(calls) and all(schema_valid(call, turn.tools) for call in calls))
        if expected else None,
        "fixed": _matched(calls, expected, _fits) if expected else None,
        "no_invented": not extra,
        "clean": markup_in(reading.content) is None,
        "finish": finish_right(turn, reading),
    }
    out[RIGHT] = all(value is not False for value in out.values())
    return out


def why_not(turn: SuiteTurn, reading: Reading) -> str:
    """One line saying what the answer was, for the list of turns that differ."""
    if not reading.answered:
        return f"HTTP {reading.status}: {reading.error}" if reading.status else \
            f"no answer: {reading.error}"
    calls = "; ".join(f"{c.name}({c.arguments})" for c in reading.calls) or "no call"
    markup = markup_in(reading.content)
    return calls + (f", content holds {markup}" if markup else "") + \
        f", finish {reading.finish}"
