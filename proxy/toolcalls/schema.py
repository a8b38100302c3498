"""Coerce parameter values written as text (XML-style formats) by the tool's JSON schema.

A value becomes the schema's type only when it is unambiguously that type; otherwise it stays
the string the model wrote. Nothing is guessed for parameters the schema does not describe.

Schemas are read as clients write them: local `$ref`s into `$defs`/`definitions` (cycle-safe),
`allOf` merged, `anyOf`/`oneOf` tried in turn, `const`/`enum` matched, and the type names
Python programmers write (`int`, `float`, `bool`, `str`, `dict`, `list`) read as JSON's.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from .repair import NotLiteral, exact_int, loads, read_python_literal

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MISSING = object()
# Type names seen in tool schemas written from Python (vLLM's own qwen3coder tests use
# `float`), read as the JSON type they mean.
_TYPE_NAMES = {"float": "number", "int": "integer", "bool": "boolean", "dict": "object",
               "list": "array", "str": "string"}
_MAX_DEPTH = 32  # nested anyOf/allOf/$ref levels followed, at most
# An integer written with an exponent is read exactly only this far (10^400 has 401 digits).
_MAX_EXPONENT = 400


class _InRoot(dict):  # type: ignore[type-arg]
    """A property's schema, remembering the tool's schema its `$ref`s point into."""

    root: Any = None


def _type_name(name: Any) -> Any:
    return _TYPE_NAMES.get(name, name) if isinstance(name, str) else name


def _pointer(root: Any, ref: str) -> Any:
    """The part of `root` a local `$ref` (`#/$defs/Name`, `#/definitions/A/properties/b`)
    points to, or None (a remote or malformed reference)."""
    if not ref.startswith("#"):
        return None
    node = root
    for token in ref[1:].split("/")[1:] if ref != "#" else ():
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def _merged(schemas: list[Any]) -> dict[str, Any]:
    """One schema meaning all of `schemas` (allOf): types and enums intersected, properties
    joined; any other keyword is taken from the first schema that has it."""
    result: dict[str, Any] = {}
    for schema in schemas:
        if not isinstance(schema, dict):
            continue
        for key, value in schema.items():
            if key not in result:
                result[key] = value
            elif key == "type":
                mine = result[key] if isinstance(result[key], list) else [result[key]]
                theirs = value if isinstance(value, list) else [value]
                names = {_type_name(t) for t in theirs}
                result[key] = [t for t in mine if _type_name(t) in names]
            elif key == "enum" and isinstance(value, list) and isinstance(result[key], list):
                result[key] = [v for v in result[key] if any(_same(v, w) for w in value)]
            elif key == "const" and not _same(result[key], value):
                result["enum"] = []  # two different constants: nothing fits
            elif key == "properties" and isinstance(value, dict) \
                    and isinstance(result[key], dict):
                result[key] = {**value, **result[key]}
    return result


def _resolved(schema: Any, root: Any, seen: frozenset[str] = frozenset()) -> Any:
    """`schema` with its `$ref` (local, followed until a cycle) and `allOf` folded in."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(schema, dict):
            return schema
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = _pointer(root, ref) if ref not in seen else None
            seen = seen | {ref}
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = _merged([target if isinstance(target, dict) else {}, siblings])
            continue
        parts = schema.get("allOf")
        if isinstance(parts, list) and parts:
            own = {k: v for k, v in schema.items() if k != "allOf"}
            schema = _merged([own, *(_resolved(p, root, seen) for p in parts)])
            continue
        return schema
    return {}


def _types_of(schema: dict[str, Any]) -> list[Any]:
    """The alternatives a schema allows, as sub-schemas, in the order written."""
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return [o for o in options if isinstance(o, dict)]
    declared = schema.get("type")
    if isinstance(declared, list):
        return [{**schema, "type": _type_name(t)} for t in declared]
    if "const" in schema:
        schema = {**schema, "enum": [schema["const"]]}
    if declared is None and "enum" in schema:
        enum = schema["enum"] if isinstance(schema["enum"], list) else []
        return [{"type": t, "enum": enum} for t in dict.fromkeys(map(_json_type, enum))]
    if declared is None and isinstance(schema.get("properties"), dict):
        return [{**schema, "type": "object"}]
    return [{**schema, "type": _type_name(declared)}] if declared is not None else [schema]


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


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and 1.0 are the same number, true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _integer(stripped: str) -> Any:
    if _INTEGER.fullmatch(stripped):
        try:
            return exact_int(int(stripped))
        except ValueError:  # more digits than Python converts
            return _MISSING
    if _NUMBER.fullmatch(stripped):
        try:
            number = Decimal(stripped)
        except InvalidOperation:
            return _MISSING
        if number.adjusted() < _MAX_EXPONENT and number == number.to_integral_value():
            return exact_int(int(number))  # exact: 1e30 is 10**30, not a float's neighbour
    return _MISSING


def _structure(stripped: str, expected: type) -> Any:
    """A JSON (or Python literal) object or array written as text, or _MISSING."""
    if not stripped.startswith(("{",) if expected is dict else ("[", "(")):
        return _MISSING
    try:
        value = loads(stripped)
    except orjson.JSONDecodeError:
        try:
            value = read_python_literal(stripped)  # {'x': 1}: read, never evaluated
        except NotLiteral:
            value = _escaped(stripped)
    return value if isinstance(value, expected) else _MISSING


def _escaped(stripped: str) -> Any:
    """`[{\"id\": 1}]`: JSON written escaped, as inside a JSON string (GLM-4.6 does this in
    `<arg_value>`), read once unescaped; or _MISSING."""
    if '\\"' not in stripped or '"' in stripped.replace('\\"', ""):
        return _MISSING
    try:
        return loads(loads('"' + stripped + '"'))
    except orjson.JSONDecodeError:
        return _MISSING


def _as_type(text: str, type_name: Any) -> Any:
    """`text` as JSON type `type_name`, or _MISSING when it is not unambiguously one."""
    stripped = text.strip()
    if type_name == "string":
        return text
    if type_name == "integer":
        return _integer(stripped)
    if type_name == "number":
        if _INTEGER.fullmatch(stripped):
            return _integer(stripped)
        number = float(stripped) if _NUMBER.fullmatch(stripped) else math.inf
        return number if math.isfinite(number) else _MISSING  # "1e999" stays the text
    if type_name == "boolean":
        lowered = stripped.lower()
        return {"true": True, "false": False}.get(lowered, _MISSING)
    if type_name == "null":
        return None if stripped.lower() in ("null", "none") else _MISSING
    if type_name == "object":
        return _structure(stripped, dict)
    if type_name == "array":
        return _structure(stripped, list)
    return _MISSING


def _in_enum(value: Any, text: str, enum: Any) -> Any:
    """`value` if it is one of `enum` (a string also when it is once trimmed), else
    _MISSING. A value written exactly (an integer past 64 bits) matches nothing."""
    if not isinstance(enum, list):
        return value
    if isinstance(value, orjson.Fragment):
        return _MISSING
    if any(_same(value, member) for member in enum):
        return value
    if isinstance(value, str) and text.strip() in enum:
        return text.strip()
    return _MISSING


def _coerce(text: str, schema: Any, root: Any, depth: int) -> Any:
    schema = _resolved(schema, root)
    if not isinstance(schema, dict) or not schema or depth > _MAX_DEPTH:
        return text
    options = [_resolved(option, root) for option in _types_of(schema)]
    # Try the non-string alternatives first: "42" under anyOf[integer, string] is 42.
    ordered = sorted((o for o in options if isinstance(o, dict)),
                     key=lambda o: _type_name(o.get("type")) == "string")
    for option in ordered:
        if "anyOf" in option or "oneOf" in option:
            value = _coerce(text, option, root, depth + 1)
            if value is not text:
                return value
            continue
        value = _as_type(text, _type_name(option.get("type")))
        if value is _MISSING:
            continue
        if "enum" in option or "const" in option:
            enum = option["enum"] if "enum" in option else [option["const"]]
            value = _in_enum(value, text, enum)
            if value is _MISSING:
                continue
        return value
    return text


def coerce(text: str, schema: Any) -> Any:
    """The value of a text parameter under `schema` (a string when nothing fits better).
    `$ref`s point into the tool's schema when `schema` came from property_schema, else into
    `schema` itself."""
    if not isinstance(schema, dict) or not schema:
        return text
    root = schema.root if isinstance(schema, _InRoot) else schema
    return _coerce(text, schema, root, 0)


def property_schema(parameters: dict[str, Any], name: str) -> Any:
    """The schema of one top-level parameter, or None when the tool does not describe it.
    It remembers the tool's schema, for the `$ref`s it holds."""
    if not isinstance(parameters, dict):
        return None
    schema = _resolved(parameters, parameters)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return None
    found = properties.get(name)
    if not isinstance(found, dict):
        return found
    scoped = _InRoot(found)
    scoped.root = parameters
    return scoped
