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
than that is not judged. A flat schema (an object of scalar-typed properties, as most tools
have) is read once, cached by its canonical JSON, and checked without the walk, with what
the walk gives (tests/toolcalls/test_flat_check.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from ..base.frozen import quick_init
from .schema import MAX_STEPS, MISSING, Resolver, Work, alternatives, as_type, same
from .schema import type_name as json_type_name

SCHEMA_COERCED = "schema_coerced"  # the repair a call records when a value was coerced
_MAX_PROBLEMS = 8  # named per call (the rest are counted by the first ones' presence)
_MAX_DEPTH = 64  # schemas nested, at most (a value nested deeper is not judged)
_COERCIBLE = frozenset({"integer", "number", "boolean", "object", "array"})


@quick_init
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


def _coerced(value: Any, type_name: str) -> Any:
    """`value`, not of JSON type `type_name`, as a value of it where that is without doubt
    (see the module), or MISSING (or a value still not of it, which then does not fit)."""
    if isinstance(value, str) and type_name in _COERCIBLE:
        return as_type(value, type_name)
    if type_name == "string" and isinstance(value, int):
        return orjson.dumps(value).decode()  # 5 or true: its JSON text, exactly
    return MISSING


def _unfilled(value: dict[str, Any], required: Iterable[Any], path: str) -> list[str]:
    """The problems of the `required` keys (those that are strings) `value` leaves out or
    gives an empty string."""
    problems = []
    for key in required:
        if isinstance(key, str) and key not in value:
            problems.append(f"{path}/{key}: required")
        elif isinstance(key, str) and value[key] == "":
            problems.append(f"{path}/{key}: required, empty")
    return problems


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
            coerced = _coerced(value, type_name) if self.coerce else MISSING
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
        self.problems += _unfilled(value, required if isinstance(required, list) else (), path)
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


# A flat schema, checked without the walk: an object of scalar-typed properties (or
# properties any value fits), nothing the walk would resolve, branch on or recurse into.
_FLAT_ROOT = frozenset({"type", "properties", "required", "additionalProperties",
                        "description", "title", "$schema"})
_FLAT_TYPES = frozenset({"string", "integer", "number", "boolean"})
_FLAT_PROPERTY = frozenset({"type", "description", "title", "default", "examples"})
_ANY = ""  # a property any value fits (a schema that is empty or not a schema)
# The canonical JSON a schema's flat reading is cached by: keys sorted, and what JSON does
# not hold refused (a subclass of str, int, dict or list, a date, a dataclass), as an integer
# past 64 bits and a key not a string are. A longer schema is walked, uncached.
_CANONICAL = (orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS
              | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS)
_MAX_CANONICAL = 8_192  # bytes: the cache holds at most _CACHED times that and its reading
_CACHED = 256  # schemas (tools sent again and again are hit; a request's new ones evict)


@dataclass(frozen=True)
class _Flat:
    """A flat schema as the walk reads it: the schema as its canonical JSON reads (only a
    schema equal to it has this reading), each property's type (_ANY: none), the required
    keys in order, and whether other properties are closed off."""

    schema: dict[str, Any]
    types: dict[str, str]
    required: tuple[str, ...]
    closed: bool


def _flat(parameters: dict[str, Any]) -> _Flat | None:
    """`parameters` (as JSON reads) as a _Flat, or None when the walk is needed (or could
    run past its budget: the steps it would take, at most, are counted as it counts them)."""
    properties = parameters.get("properties", {})
    extra = parameters.get("additionalProperties")
    if (not _FLAT_ROOT.issuperset(parameters) or parameters.get("type") != "object"
            or not isinstance(properties, dict) or isinstance(extra, dict)):
        return None
    types: dict[str, str] = {}
    steps = 3 + len(parameters)  # the root resolved (2 + its keys) and taken
    for key, schema in properties.items():
        if isinstance(schema, dict) and schema:
            declared = schema.get("type")
            if (not _FLAT_PROPERTY.issuperset(schema) or not isinstance(declared, str)
                    or declared not in _FLAT_TYPES):
                return None
            types[key] = declared
        else:
            types[key] = _ANY
        steps += 3 + (len(schema) if isinstance(schema, dict) else 0)
    required = parameters.get("required")
    keys = tuple(k for k in required if isinstance(k, str)) if isinstance(required, list) else ()
    return _Flat(parameters, types, keys, extra is False) if steps <= MAX_STEPS else None


@lru_cache(maxsize=_CACHED)
def _compiled(canonical: bytes) -> _Flat | None:
    """The _Flat of the schema `canonical` writes (a pure function of those bytes: a bounded
    cache shared by requests that send the same tools)."""
    try:
        schema = orjson.loads(canonical)
    except orjson.JSONDecodeError:  # a Fragment's text, or an integer it reads as infinity
        return None
    return _flat(schema) if isinstance(schema, dict) else None


def _flat_of(parameters: dict[str, Any]) -> _Flat | None:
    """The flat reading of `parameters`, or None: the walk reads it. Found by the schema's
    canonical JSON, and taken only when `parameters` equals what that JSON reads: one holding
    what JSON writes as something else (an orjson.Fragment, a tuple, NaN) is walked."""
    try:
        canonical = orjson.dumps(parameters, option=_CANONICAL)
    except TypeError:  # not JSON (an integer past 64 bits, a key not a string)
        return None
    if len(canonical) > _MAX_CANONICAL:
        return None
    flat = _compiled(canonical)
    return flat if flat is not None and flat.schema == parameters else None


def _flat_check(arguments: dict[str, Any], flat: _Flat) -> Validity:
    """check() of `arguments` under a flat schema: what the walk gives, without it."""
    problems = _unfilled(arguments, flat.required, "")
    types, coerced, result = flat.types, 0, {}
    for key, item in arguments.items():
        type_name = types.get(key)
        if type_name is None:
            if flat.closed:
                problems.append(f"/{key}: not a property")
        elif type_name and _is(item, type_name) is False:
            value = _coerced(item, type_name)
            if value is MISSING or not _is(value, type_name):
                problems.append(f"/{key}: not {type_name}")
            else:
                item, coerced = value, coerced + 1
        result[key] = item
    return Validity(result, coerced, tuple(problems[:_MAX_PROBLEMS]))


def check(arguments: dict[str, Any], parameters: Any) -> Validity:
    """`arguments` checked against the tool's `parameters` schema (see the module)."""
    if not isinstance(parameters, dict) or not parameters:
        return Validity(arguments)
    flat = _flat_of(parameters) if isinstance(arguments, dict) else None
    if flat is not None:
        return _flat_check(arguments, flat)
    return walked(arguments, parameters)


def walked(arguments: dict[str, Any], parameters: dict[str, Any]) -> Validity:
    """check() by the walk over any schema (the reference a flat schema's check matches)."""
    checker = _Checker(Resolver(parameters), Work(MAX_STEPS))
    checked = checker.value(arguments, parameters, "")
    if checker.work.exhausted or not isinstance(checked, dict):
        return Validity(arguments)  # a schema past the budget is not judged
    return Validity(checked, checker.coerced, tuple(checker.problems[:_MAX_PROBLEMS]))
