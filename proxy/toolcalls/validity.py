"""A call's arguments checked against its tool's JSON schema, as delivered: required keys,
types, enums and consts, nested objects and arrays, properties a schema closes off; OpenAPI's
`nullable: true` takes null. Assertions on values beyond these (`format`, `uniqueItems`,
ranges, patterns) are the client's to judge and not checked.

What can be coerced without doubt is coerced, as vLLM coerces parameters written as text:
a string where the schema has one scalar type and the string is exactly a value of it
(`"3"` for an integer, `"true"` for a boolean), or a string holding the JSON object or array
the schema asks for; an integer or a boolean where the schema asks for a string, as its JSON
text (vLLM's parsers do both; a float is not: its text as written is lost in decoding).
Nothing is coerced where the schema offers alternatives (which one was meant is a guess), but
where the one other than `null` is meant by a value that is not null (`"5"` for `["integer",
"null"]`); a type named as Python or SQL name it (`int`, `uint32`, `double`) is the JSON type
it means (schema.type_name), as vLLM's parsers read both.
A required key given an empty string is named too (`/path: required, empty`): a call to
`delete_file` with `"path": ""` names nothing to act on. Whatever else does not fit is
delivered as the model wrote it and named (`Validity.problems`): the turn counts such a call
`schema_invalid` (asked again under constraint only where the client demanded the call).
The work is bounded as the coercion of text values is (schema.py); a schema that costs more
than that is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from .schema import MAX_STEPS, MISSING, Resolver, Work, alternatives, as_type, same
from .schema import type_name as json_type_name

SCHEMA_COERCED = "schema_coerced"  # the repair a call records when a value was coerced
_MAX_PROBLEMS = 8  # named per call (the rest are counted by the first ones' presence)
_MAX_DEPTH = 64  # schemas nested, at most (a value nested deeper is not judged)
_COERCIBLE = frozenset({"integer", "number", "boolean", "object", "array"})


@dataclass(frozen=True)
class Validity:
    """The arguments as delivered (coerced where that is without doubt), how many values
    were coerced, and what still does not fit the schema (`/path: why`; empty: valid)."""

    arguments: dict[str, Any]
    coerced: int = 0
    problems: tuple[str, ...] = ()


def _is(value: Any, type_name: str) -> bool | None:
    """Whether `value` is of JSON type `type_name` (None: a type name JSON has not)."""
    if type_name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(
            value, orjson.Fragment) or (isinstance(value, float) and value.is_integer())
    if type_name == "number":
        return isinstance(value, int | float | orjson.Fragment) and not isinstance(value, bool)
    kinds = {"string": str, "boolean": bool, "object": dict, "array": list,
             "null": type(None)}.get(type_name)
    return None if kinds is None else isinstance(value, kinds)


class _Checker:
    """One call's walk over its arguments and schema, within a budget of steps."""

    def __init__(self, resolver: Resolver, work: Work, coerce: bool = True) -> None:
        self.resolver = resolver
        self.work = work
        self.coerce = coerce
        self.coerced = 0
        self.problems: list[str] = []

    def value(self, value: Any, schema: Any, path: str, depth: int = 0) -> Any:
        """`value` under `schema` at `path`: coerced where that is without doubt, its
        problems noted. `depth`: the schemas nested so far (a schema that refers to itself
        through its alternatives would go on forever; past _MAX_DEPTH it is not judged)."""
        if depth > _MAX_DEPTH:
            self.work.stop()
            return value
        schema = self.resolver.resolved(schema, self.work)
        if not isinstance(schema, dict) or not schema or not self.work.take():
            return value
        if value is None and schema.get("nullable") is True:
            return value  # OpenAPI 3.0's null, as Home Assistant's tools allow it
        options = alternatives(schema, self.work)
        if len(options) > 1 and value is not None:
            # null is no reading of a value that is not null: the one other type is meant
            # (`"5"` for `["integer", "null"]`), as vLLM's parsers drop null from the types.
            kept = [option for option in options
                    if not (isinstance(option, dict) and option.get("type") == "null")]
            if len(kept) == 1:
                options = kept
        if len(options) > 1:
            for option in options:  # valid when one alternative takes it as it is
                probe = _Checker(self.resolver, self.work, coerce=False)
                probe.value(value, option, path, depth + 1)
                if not probe.problems:
                    return value
            self.problems.append(f"{path or '/'}: fits none of its alternatives")
            return value
        return self._single(value, options[0], path, depth + 1) if options else value

    def _single(self, value: Any, schema: dict[str, Any], path: str, depth: int) -> Any:
        type_name = json_type_name(schema.get("type"))
        enum = schema.get("enum")
        if isinstance(type_name, str) and _is(value, type_name) is False:
            coerced = MISSING
            if self.coerce and isinstance(value, str) and type_name in _COERCIBLE:
                coerced = as_type(value, type_name)
            elif self.coerce and type_name == "string" and isinstance(value, int):
                coerced = orjson.dumps(value).decode()  # 5 or true: its JSON text, exactly
            if (coerced is MISSING or not _is(coerced, type_name)
                    or not self._in_enum(coerced, enum)):
                self.problems.append(f"{path or '/'}: not {type_name}")
                return value
            value = coerced
            self.coerced += 1
        if not self._in_enum(value, enum):
            self.problems.append(f"{path or '/'}: not one of its enum")
        if isinstance(value, dict):
            return self._object(value, schema, path, depth)
        items = schema.get("items")
        if isinstance(value, list) and isinstance(items, dict):
            return [self.value(item, items, f"{path}/{i}", depth)
                    for i, item in enumerate(value)]
        return value

    def _in_enum(self, value: Any, enum: Any) -> bool:
        """Whether `value` is one of `enum` (no enum: any value is)."""
        if not isinstance(enum, list) or not self.work.members(len(enum)):
            return True
        return any(same(value, member) for member in enum)

    def _object(self, value: dict[str, Any], schema: dict[str, Any], path: str, depth: int,
                ) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        for key in required if isinstance(required, list) else ():
            if isinstance(key, str) and key not in value:
                self.problems.append(f"{path}/{key}: required")
            elif isinstance(key, str) and value[key] == "":
                self.problems.append(f"{path}/{key}: required, empty")
        extra = schema.get("additionalProperties")
        result = {}
        for key, item in value.items():
            if key in properties:
                item = self.value(item, properties[key], f"{path}/{key}", depth)
            elif extra is False:
                self.problems.append(f"{path}/{key}: not a property")
            elif isinstance(extra, dict):
                item = self.value(item, extra, f"{path}/{key}", depth)
            result[key] = item
        return result


def check(arguments: dict[str, Any], parameters: Any) -> Validity:
    """`arguments` checked against the tool's `parameters` schema (see the module)."""
    if not isinstance(parameters, dict) or not parameters:
        return Validity(arguments)
    checker = _Checker(Resolver(parameters), Work(MAX_STEPS))
    checked = checker.value(arguments, parameters, "")
    if checker.work.exhausted or not isinstance(checked, dict):
        return Validity(arguments)  # a schema past the budget is not judged
    return Validity(checked, checker.coerced, tuple(checker.problems[:_MAX_PROBLEMS]))
