"""Whether a call's arguments fit its tool's JSON schema: the checks an engine's constrained
decoding would have enforced (required keys, types, enums, `additionalProperties: false`,
lengths and bounds, nested objects and arrays). Used to tell a botched call from a good one;
never to change a call. What the schema says and this does not read (`$ref`, `anyOf`,
`pattern`, formats) is taken as fitting: a call is never called botched on a guess."""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 32  # nesting looked into; deeper values are taken as fitting

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),),
}


def misfit(value: Any, schema: Any, path: str = "", depth: int = 0) -> str | None:
    """Where and how `value` breaks `schema` (`path: why`), or None when it fits (or the
    schema says nothing this reads)."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return None
    where = path or "arguments"
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    known = [name for name in names if name in _TYPES]
    if known and len(known) == len(names) and not any(_is(value, name) for name in known):
        return f"{where}: not {'/'.join(known)}"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        return f"{where}: not one of the enum"
    if isinstance(value, dict):
        return _object_misfit(value, schema, path, depth)
    if isinstance(value, list):
        return _array_misfit(value, schema, path, depth)
    if isinstance(value, str):
        return _bounded(len(value), schema, "minLength", "maxLength", where)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _bounded(value, schema, "minimum", "maximum", where)
    return None


def _is(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[name])


def _bounded(size: float, schema: dict[str, Any], low: str, high: str,
             where: str) -> str | None:
    least, most = schema.get(low), schema.get(high)
    if isinstance(least, (int, float)) and not isinstance(least, bool) and size < least:
        return f"{where}: below {low} {least}"
    if isinstance(most, (int, float)) and not isinstance(most, bool) and size > most:
        return f"{where}: above {high} {most}"
    return None


def _object_misfit(value: dict[str, Any], schema: dict[str, Any], path: str,
                   depth: int) -> str | None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    for key in required if isinstance(required, list) else ():
        if isinstance(key, str) and key not in value:
            return f"{path or 'arguments'}: {key!r} missing"
    if schema.get("additionalProperties") is False:
        for key in value:
            if key not in properties:
                return f"{path or 'arguments'}: {key!r} not allowed"
    for key, sub in properties.items():
        if key in value:
            found = misfit(value[key], sub, f"{path}.{key}" if path else key, depth + 1)
            if found:
                return found
    return None


def _array_misfit(value: list[Any], schema: dict[str, Any], path: str,
                  depth: int) -> str | None:
    where = path or "arguments"
    bounded = _bounded(len(value), schema, "minItems", "maxItems", where)
    if bounded:
        return bounded
    items = schema.get("items")
    for i, item in enumerate(value):
        found = misfit(item, items, f"{where}[{i}]", depth + 1)
        if found:
            return found
    return None
