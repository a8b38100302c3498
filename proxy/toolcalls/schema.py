"""Coerce parameter values written as text (XML-style formats) by the tool's JSON schema.

A value becomes the schema's type only when it is unambiguously that type; otherwise it stays
the string the model wrote. Nothing is guessed for parameters the schema does not describe.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MISSING = object()


def _types_of(schema: dict[str, Any]) -> list[Any]:
    """The alternatives a schema allows, as sub-schemas, in the order written."""
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return [o for o in options if isinstance(o, dict)]
    declared = schema.get("type")
    if isinstance(declared, list):
        return [{**schema, "type": t} for t in declared]
    if declared is None and "enum" in schema:
        enum = schema["enum"] if isinstance(schema["enum"], list) else []
        return [{"type": t, "enum": enum} for t in dict.fromkeys(map(_json_type, enum))]
    if declared is None and isinstance(schema.get("properties"), dict):
        return [{**schema, "type": "object"}]
    return [schema]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _as_type(text: str, type_name: Any) -> Any:
    """`text` as JSON type `type_name`, or _MISSING when it is not unambiguously one."""
    stripped = text.strip()
    if type_name == "string":
        return text
    if type_name == "integer":
        if _INTEGER.fullmatch(stripped):
            return int(stripped)
        if _NUMBER.fullmatch(stripped):
            number = float(stripped)
            if number.is_integer():
                return int(number)
        return _MISSING
    if type_name == "number":
        if _INTEGER.fullmatch(stripped):
            return int(stripped)
        number = float(stripped) if _NUMBER.fullmatch(stripped) else math.inf
        return number if math.isfinite(number) else _MISSING  # "1e999" stays the text
    if type_name == "boolean":
        lowered = stripped.lower()
        return {"true": True, "false": False}.get(lowered, _MISSING)
    if type_name == "null":
        return None if stripped.lower() in ("null", "none") else _MISSING
    if type_name in ("object", "array"):
        try:
            value = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return _MISSING
        expected = dict if type_name == "object" else list
        return value if isinstance(value, expected) else _MISSING
    return _MISSING


def coerce(text: str, schema: Any) -> Any:
    """The value of a text parameter under `schema` (a string when nothing fits better)."""
    if not isinstance(schema, dict) or not schema:
        return text
    options = _types_of(schema)
    # Try the non-string alternatives first: "42" under anyOf[integer, string] is 42.
    ordered = sorted(options, key=lambda o: o.get("type") == "string")
    for option in ordered:
        if "anyOf" in option or "oneOf" in option:
            value = coerce(text, option)
            if value is not text:
                return value
            continue
        value = _as_type(text, option.get("type"))
        if value is _MISSING:
            continue
        if "enum" in option and value not in option["enum"]:
            continue
        return value
    return text


def property_schema(parameters: dict[str, Any], name: str) -> Any:
    """The schema of one top-level parameter, or None when the tool does not describe it."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if isinstance(properties, dict):
        return properties.get(name)
    return None
