"""JSON Schema for the fakes: an instance generator (what a constrained model writes) and a
checker (does an answer fit the constraint it was asked under).

Both cover the vocabulary tools' parameter schemas and constrained-decoding backends use:
`type` (one or a list), `properties`/`required`/`additionalProperties`, `items`/`prefixItems`,
`minItems`/`maxItems`/`uniqueItems`, `enum`/`const`, `anyOf`/`oneOf`/`allOf`/`not`, `$ref` into
`$defs`/`definitions`, string lengths and `pattern`, numeric bounds and `multipleOf`. The
checker is used because `jsonschema` is not a dependency of this project (not in .venv).
"""

from __future__ import annotations

import math
import re
from typing import Any

_ANY: dict[str, Any] = {}


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    """`schema` with a local `$ref` (`#/$defs/X`, `#/definitions/X`) followed."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        target: Any = root
        for part in schema["$ref"].removeprefix("#").strip("/").split("/"):
            if part:
                target = target[part.replace("~1", "/").replace("~0", "~")]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list) and declared:
        return [t for t in declared if t != "null"] or ["null"]
    if "properties" in schema or "required" in schema:
        return ["object"]
    if "items" in schema or "prefixItems" in schema:
        return ["array"]
    return ["string"]


def instance_of(schema: Any, root: dict[str, Any] | None = None) -> Any:
    """A value that fits `schema`: its const, first enum value, default or example when it
    gives one; else built from its type: objects with their required keys (every property
    when none is required), arrays of `minItems` (at least one) items, the bounds' numbers."""
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    schema = _resolve(schema, root)
    if schema is True or not isinstance(schema, dict):
        return "x"
    for key in ("const",):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema and not schema_errors(schema["default"], schema, root):
        return schema["default"]
    for example in schema.get("examples") or ():
        if not schema_errors(example, schema, root):
            return example
    if schema.get("allOf"):
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            merged["properties"] = {**merged.get("properties", {}), **part.get("properties", {})}
            merged["required"] = [*merged.get("required", []), *part.get("required", [])]
            merged.update({k: v for k, v in part.items() if k not in ("properties", "required")})
        return instance_of(merged, root)
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return instance_of({**{k: v for k, v in schema.items() if k != key},
                                **_resolve(schema[key][0], root)}, root)
    kind = _types(schema)[0]
    if kind == "object":
        properties = schema.get("properties") or {}
        keys = list(schema.get("required") or properties)
        return {key: instance_of(properties.get(key, _ANY), root) for key in keys}
    if kind == "array":
        prefix = [instance_of(item, root) for item in schema.get("prefixItems") or ()]
        count = max(schema.get("minItems", 1), len(prefix), 1)
        items = schema.get("items", _ANY)
        return prefix + [instance_of(items, root) for _ in range(count - len(prefix))]
    if kind in ("integer", "number"):
        value = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        if "exclusiveMinimum" in schema and "minimum" not in schema:
            value += 1
        if "maximum" in schema and value > schema["maximum"]:
            value = schema["maximum"]
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "x" * max(1, schema.get("minLength", 1))


_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def schema_errors(value: Any, schema: Any, root: dict[str, Any] | None = None,
                  at: str = "$") -> list[str]:
    """Where `value` breaks `schema`, one line per breach (empty: it fits)."""
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    schema = _resolve(schema, root)
    if schema is True or schema == {} or not isinstance(schema, dict):
        return [] if schema is not False else [f"{at}: nothing fits false"]
    errors: list[str] = []
    declared = schema.get("type")
    if declared is not None:
        kinds = [declared] if isinstance(declared, str) else declared
        if not any(_CHECKS[kind](value) for kind in kinds if kind in _CHECKS):
            return [f"{at}: {type(value).__name__} is not {'/'.join(kinds)}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{at}: not the const {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{at}: {value!r} not in enum")
    for part in schema.get("allOf") or ():
        errors += schema_errors(value, part, root, at)
    if "anyOf" in schema and all(schema_errors(value, part, root, at)
                                 for part in schema["anyOf"]):
        errors.append(f"{at}: fits no anyOf branch")
    if "oneOf" in schema and sum(not schema_errors(value, part, root, at)
                                 for part in schema["oneOf"]) != 1:
        errors.append(f"{at}: fits not exactly one oneOf branch")
    if "not" in schema and not schema_errors(value, schema["not"], root, at):
        errors.append(f"{at}: fits the `not` schema")
    if isinstance(value, dict):
        errors += _object_errors(value, schema, root, at)
    elif isinstance(value, list):
        errors += _array_errors(value, schema, root, at)
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{at}: shorter than minLength")
        if len(value) > schema.get("maxLength", math.inf):
            errors.append(f"{at}: longer than maxLength")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{at}: does not match pattern {schema['pattern']!r}")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        errors += _number_errors(value, schema, at)
    return errors


def _object_errors(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any],
                   at: str) -> list[str]:
    errors = [f"{at}: missing required {key!r}" for key in schema.get("required") or ()
              if key not in value]
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            errors += schema_errors(item, properties[key], root, f"{at}.{key}")
        elif extra is False:
            errors.append(f"{at}: unexpected property {key!r}")
        elif isinstance(extra, dict):
            errors += schema_errors(item, extra, root, f"{at}.{key}")
    if len(value) < schema.get("minProperties", 0):
        errors.append(f"{at}: fewer than minProperties")
    if len(value) > schema.get("maxProperties", math.inf):
        errors.append(f"{at}: more than maxProperties")
    return errors


def _array_errors(value: list[Any], schema: dict[str, Any], root: dict[str, Any],
                  at: str) -> list[str]:
    errors: list[str] = []
    prefix = schema.get("prefixItems") or []
    for index, item in enumerate(value):
        sub = prefix[index] if index < len(prefix) else schema.get("items", True)
        errors += schema_errors(item, sub, root, f"{at}[{index}]")
    if len(value) < schema.get("minItems", 0):
        errors.append(f"{at}: fewer than minItems")
    if len(value) > schema.get("maxItems", math.inf):
        errors.append(f"{at}: more than maxItems")
    if schema.get("uniqueItems") and len({repr(v) for v in value}) != len(value):
        errors.append(f"{at}: items not unique")
    return errors


def _number_errors(value: float, schema: dict[str, Any], at: str) -> list[str]:
    errors: list[str] = []
    if value < schema.get("minimum", -math.inf) or value > schema.get("maximum", math.inf):
        errors.append(f"{at}: {value} out of [minimum, maximum]")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        errors.append(f"{at}: {value} not above exclusiveMinimum")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        errors.append(f"{at}: {value} not below exclusiveMaximum")
    step = schema.get("multipleOf")
    if step and not math.isclose(value / step, round(value / step)):
        errors.append(f"{at}: {value} not a multiple of {step}")
    return errors
