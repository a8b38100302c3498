"""A tool's JSON schema as a grammar engine compiles it, for the constrained re-ask: the
OpenAPI spellings clients send (Home Assistant renders its tools in OpenAPI 3.0 and 3.1
style) said in the JSON Schema every engine reads, and the assertions engines compile
unevenly left to the proxy's own check.

- `nullable: true` (OpenAPI 3.0) is `null` among the types (`"type": [T, "null"]`, `null`
  added to an `enum` or an `anyOf`): an engine that ignores the keyword would forbid the
  null the tool allows.
- `format`, `uniqueItems`, `contains`/`minContains`/`maxContains`, `multipleOf`,
  `minProperties`/`maxProperties`, `propertyNames` and `patternProperties` are left out:
  vLLM's xgrammar backend refuses a schema holding them (a 400 to the re-ask), others ignore
  some of them. Leaving them out lets the engine write more than the schema allows, never
  less; what it writes is checked against the tool's own schema afterwards
  (`proxy/toolcalls/validity.py`), as every call is.

Property names, `enum`, `const`, `default` and `examples` are data and kept as they are.
Pure; the walk is bounded (`_MAX_DEPTH`; deeper parts are kept as written).
"""

from __future__ import annotations

from typing import Any

UNEVEN = frozenset({"format", "uniqueItems", "contains", "minContains", "maxContains",
                    "multipleOf", "minProperties", "maxProperties", "propertyNames",
                    "patternProperties"})
"""Assertions left out of a grammar's schema (see the module)."""

_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "unevaluatedItems",
        "unevaluatedProperties", "additionalItems")  # keys holding one schema
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")  # keys holding a list of schemas
_NAMED = ("properties", "$defs", "definitions", "dependentSchemas")  # name → schema
_MAX_DEPTH = 64


def for_grammar(schema: Any, depth: int = 0) -> Any:
    """`schema` as a grammar engine compiles it (see the module); a new value, the input
    untouched."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in UNEVEN or key == "nullable":
            continue
        if key in _ONE:
            value = for_grammar(value, depth + 1)
        elif key in _MANY and isinstance(value, list):
            value = [for_grammar(item, depth + 1) for item in value]
        elif key in _NAMED and isinstance(value, dict):
            value = {name: for_grammar(item, depth + 1) for name, item in value.items()}
        out[key] = value
    return _nullable(out) if schema.get("nullable") is True else out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` that also takes null (OpenAPI 3.0's `nullable: true`)."""
    declared = schema.get("type")
    if isinstance(declared, str) and declared != "null":
        schema["type"] = [declared, "null"]
    elif isinstance(declared, list) and "null" not in declared:
        schema["type"] = [*declared, "null"]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and {"type": "null"} not in options:
            schema[key] = [*options, {"type": "null"}]
    enum = schema.get("enum")
    if isinstance(enum, list) and None not in enum:
        schema["enum"] = [*enum, None]
    return schema
