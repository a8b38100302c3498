"""What Home Assistant sends an Ollama server, as its source renders it (read from the
`homeassistant` wheels 2025.4.4 and 2026.11.0, `components/ollama/entity.py`,
`conversation/chat_log.py`, `helpers/llm.py`, `intent/llm.py` and `homeassistant/llm.py`;
the tool schemas as `probatio` 0.13.0's `to_openapi` renders them, which 2026.11 calls with
`openapi_version="3.1.0"` and older releases' voluptuous-openapi rendered in 3.0 style).

Shared by the Ollama front's tests and the prefix-cache tests (tests/turn)."""

from __future__ import annotations

from typing import Any

# --- the tools ------------------------------------------------------------------------------

# A to-do item's tool as `probatio.to_openapi(..., openapi_version="3.1.0")` renders it: a
# date and a date-time (`format`), a set of labels (`uniqueItems`), a range, a nullable
# string (`anyOf` with `null`), a list of an enum; closed (`additionalProperties: false`).
TODO_PARAMETERS_31: dict[str, Any] = {
    "type": "object",
    "properties": {
        "item": {"type": "string"},
        "due_date": {"type": "string", "format": "date"},
        "due_datetime": {"type": "string", "format": "date-time"},
        "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "brightness": {"type": "integer", "minimum": 0, "maximum": 100},
        "color": {"anyOf": [{"type": "null"}, {"type": "string"}]},
        "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch"]}},
    },
    "required": ["item"],
    "additionalProperties": False,
}

# The same schema in OpenAPI 3.0 style (probatio's default, voluptuous-openapi's before):
# the nullable string as `nullable: true`.
TODO_PARAMETERS_30: dict[str, Any] = {
    **TODO_PARAMETERS_31,
    "properties": {**TODO_PARAMETERS_31["properties"],
                   "color": {"type": "string", "nullable": True}},
}

TURN_ON_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "area": {"type": "string"},
        "floor": {"type": "string"},
        "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch"]}},
    },
    "additionalProperties": False,
}


def tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool as `_format_tool` sends it (entity.py)."""
    return {"type": "function", "function": {"name": name, "parameters": parameters,
                                             "description": description}}


TURN_ON = tool("intent__HassTurnOn", "Turns on/opens/presses a device or entity",
               TURN_ON_PARAMETERS)
ADD_ITEM = tool("todo__HassListAddItem", "Add item to a todo list", TODO_PARAMETERS_31)
ADD_ITEM_30 = tool("todo__HassListAddItem", "Add item to a todo list", TODO_PARAMETERS_30)

# --- the system prompt -----------------------------------------------------------------------

INSTRUCTIONS = ("You are a voice assistant for Home Assistant.\n"
                "Answer questions about the world truthfully.\n"
                "Respond simply and to the point in plain text.\n")
TOOL_USAGE = ("When controlling Home Assistant always call the intent tools. "
              "Use HassTurnOn to lock and HassTurnOff to unlock a lock. "
              "When controlling a device, prefer passing just name and domain. "
              "When controlling an area, prefer passing just area name and domain.")
NO_AREA = ("When a user asks to turn on all devices of a specific type, ask user to specify "
           "an area, unless there is only one device of that type.")
NO_TIMERS = "This device is not able to start timers."
DYNAMIC_CONTEXT = (
    "You ARE equipped to answer questions about the current state of\n"
    "the home by retrieving live context. This is a primary function. Do not state you "
    "lack the\nfunctionality if the question requires live data.\n"
    'If the user asks about device existence/type (e.g., "Do I have lights in the '
    'bedroom?"): Answer\nfrom the static context below.\n')


def date_time(clock: str, day: str) -> str:
    """`BASE_PROMPT` (2025) / `DATE_TIME_PROMPT` (2026) rendered: 'HH:MM:SS', 'YYYY-MM-DD'."""
    return f"Current time is {clock}. Today's date is {day}.\n"


def area_line(area: str, floor: str | None = None) -> str:
    """The satellite's area line (`_async_get_preable`, 2025; intent/llm.py, 2026)."""
    where = f"{area} (floor {floor})" if floor else area
    return (f"You are in area {where} and all generic commands like 'turn on the lights' "
            "should target this area.")


def static_context(entities: int) -> str:
    """The exposed entities as `yaml_util.dump` writes them, `entities` of them."""
    rows = []
    for i in range(entities):
        rows.append(f"- names: Light {i}\n  domain: light\n  areas: Room {i % 7}\n")
    return ("Static Context: An overview of the areas and the devices in this smart home:\n"
            + "".join(rows))


def prompt_2025(clock: str, day: str, area: str | None, entities: int = 120) -> str:
    """Home Assistant 2025.4's system prompt (chat_log.py, helpers/llm.py): the date and time
    first, the instructions, then the API prompt: tool usage, the area line, timers, the live
    context, the static context."""
    api = "\n".join([TOOL_USAGE, area_line(area) if area else NO_AREA, NO_TIMERS,
                     DYNAMIC_CONTEXT, static_context(entities)])
    return date_time(clock, day) + INSTRUCTIONS + "\n" + api


def prompt_2026(area: str | None, entities: int = 120, clock: str | None = None,
                day: str = "2026-11-20") -> str:
    """Home Assistant 2026.11's (chat_log.py, components/llm): the instructions, the API
    prompt by domain (homeassistant's live and static context, then intent's tool usage,
    area and timers lines); the date and time at the end only without its GetDateTime tool
    (`clock` given)."""
    api = "\n".join([DYNAMIC_CONTEXT, static_context(entities)]) + "\n" + "\n".join(
        [TOOL_USAGE, area_line(area) if area else NO_AREA, NO_TIMERS])
    parts = [INSTRUCTIONS, api]
    if clock is not None:
        parts.append(date_time(clock, day))
    return "\n".join(parts)


def shared(first: Any, second: Any) -> int:
    """How long a prefix two sequences (texts, token lists) share."""
    count = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        count += 1
    return count
