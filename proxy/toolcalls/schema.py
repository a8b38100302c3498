"""Coerce parameter values written as text (XML-style formats) by the tool's JSON schema.

A value becomes the schema's type only when it is unambiguously that type; otherwise it stays
the string the model wrote. Nothing is guessed for parameters the schema does not describe.

Schemas are read as clients write them: local `$ref`s into `$defs`/`definitions` (cycle-safe),
`allOf` merged, `anyOf`/`oneOf` tried in turn, `const`/`enum` matched, and the type names
Python programmers write (`int`, `float`, `bool`, `str`, `dict`, `list`) read as JSON's.

Any schema costs a bounded amount of work per value (a request's schema is the client's to
write, and one that branches on every level would otherwise cost time exponential in its
depth): resolved subschemas are memoised per tool, each subschema's result per value, and a
value may take at most MAX_STEPS steps (see Coerced.steps); past them it is kept as written,
and the call says so (BUDGET_EXHAUSTED, among its repairs).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from ..base.frozen import quick_init
from .exact_json import exact_int, loads
from .repair.python_literal import NotLiteral, read_python_literal

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# An integer written with leading zeros (`018956` for a zip the schema types an integer):
# the integer it writes, as vLLM's parsers read it (Python's int; MiniMax-M3's own test).
_LEADING_ZEROS = re.compile(r"-?0[0-9]+")
_MISSING = object()
_IN_PROGRESS = object()  # a subschema whose result for the value is being found
# Type names seen in tool schemas written from Python or SQL (vLLM's own qwen3coder tests use
# `float`; its hy_v4 parser reads the others), read as the JSON type they mean; and what a
# name that starts so means (`uint32`, `int64`, `number_like`), as vLLM's parsers read them.
_TYPE_NAMES = {"float": "number", "int": "integer", "bool": "boolean", "dict": "object",
               "list": "array", "str": "string", "text": "string", "varchar": "string",
               "char": "string", "double": "number", "map": "object", "binary": "boolean"}
_TYPE_PREFIXES = (("int", "integer"), ("uint", "integer"), ("long", "integer"),
                  ("short", "integer"), ("unsigned", "integer"), ("num", "number"),
                  ("float", "number"))
_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_MAX_DEPTH = 32  # nested anyOf/allOf/$ref levels followed, at most
# An integer written with an exponent is read exactly only this far (10^400 has 401 digits).
_MAX_EXPONENT = 400
# The steps one value's coercion may take (see Coerced.steps), each about a microsecond of
# work: far above what real schemas need (a few dozen; 400 for 6 ways on each of 10 levels).
MAX_STEPS = 5_000
# Enum members compared (or joined) per step: a comparison costs far less than a step.
_MEMBERS_PER_STEP = 2
# What a call records when a value's budget ran out and it was kept as written.
BUDGET_EXHAUSTED = "schema_budget_exhausted"


class _Work:
    """The steps one value's coercion has taken, against its budget."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.steps = 0
        self.exhausted = False

    def take(self, steps: int = 1) -> bool:
        """Take `steps` before doing that much work; False (and exhausted) when they would
        pass the limit: then the work is not done, and the value is kept as written."""
        if self.exhausted or self.steps + steps > self.limit:
            self.exhausted = True
            return False
        self.steps += steps
        return True

    def members(self, count: int) -> bool:
        """take() for comparing (or joining) `count` enum members."""
        return self.take(1 + count // _MEMBERS_PER_STEP)

    def stop(self) -> None:
        """Mark the budget spent: the schema asks for more than a value may cost."""
        self.exhausted = True


def _type_name(name: Any) -> Any:
    if not isinstance(name, str) or name in _JSON_TYPES:
        return name
    known = _TYPE_NAMES.get(name)
    if known is not None:
        return known
    lowered = name.lower()
    return next((json for prefix, json in _TYPE_PREFIXES if lowered.startswith(prefix)), name)


def type_name(name: Any) -> Any:
    """The JSON type a schema's `type` names (`int` and `uint32` are `integer`)."""
    return _type_name(name)


def _pointer(root: Any, ref: str, work: _Work) -> Any:
    """The part of `root` a local `$ref` (`#/$defs/Name`, `#/definitions/A/properties/b`)
    points to, or None (a remote or malformed reference)."""
    if not ref.startswith("#") or not work.take(1 + ref.count("/")):
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


def _merged(schemas: list[Any], work: _Work) -> dict[str, Any]:
    """One schema meaning all of `schemas` (allOf): types and enums intersected, properties
    joined; any other keyword is taken from the first schema that has it."""
    result: dict[str, Any] = {}
    for schema in schemas:
        if not isinstance(schema, dict) or not work.take(1 + len(schema)):
            continue
        for key, value in schema.items():
            if key not in result:
                result[key] = value
            elif key == "type":
                mine = result[key] if isinstance(result[key], list) else [result[key]]
                theirs = value if isinstance(value, list) else [value]
                if work.take(len(mine) + len(theirs)):
                    names = {_type_name(t) for t in theirs}
                    result[key] = [t for t in mine if _type_name(t) in names]
            elif key == "enum" and isinstance(value, list) and isinstance(result[key], list):
                if work.members(len(result[key]) * len(value)):
                    result[key] = [v for v in result[key] if any(_same(v, w) for w in value)]
            elif key == "const" and not _same(result[key], value):
                result["enum"] = []  # two different constants: nothing fits
            elif key == "properties" and isinstance(value, dict) \
                    and isinstance(result[key], dict) and work.take(len(value) + len(result[key])):
                result[key] = {**value, **result[key]}
    return result


class _Resolver:
    """The subschemas of one tool's schema with their `$ref`s and `allOf`s folded in,
    memoised: each is resolved once however many branches reach it (by the same `$ref`, or
    as the same object), so that a schema branching on every level costs its size, not the
    number of its paths."""

    def __init__(self, root: Any) -> None:
        self.root = root  # the schema `$ref`s point into
        # (what was resolved, its result), by the reference written or the object, and the
        # references followed on the way (a cycle is cut where it closes, so they matter).
        self._memo: dict[tuple[Any, frozenset[str]], tuple[Any, Any]] = {}

    def resolved(self, schema: Any, work: _Work, seen: frozenset[str] = frozenset(),
                 depth: int = 0) -> Any:
        """`schema` with its `$ref` (local, followed until a cycle) and `allOf` folded in
        (`depth`: how many `allOf`s it stands in; past _MAX_DEPTH the budget is spent)."""
        if not isinstance(schema, dict) or work.exhausted:
            return schema
        ref = schema.get("$ref")
        key = (ref if len(schema) == 1 and isinstance(ref, str) else id(schema), seen)
        known = self._memo.get(key)
        if known is not None:
            work.take()
            return known[1]
        result = self._resolve(schema, work, seen, depth)
        if not work.exhausted:  # a result cut short by the budget is never reused
            self._memo[key] = (schema, result)  # holds `schema`, so its id stays its own
        return result

    def _resolve(self, schema: Any, work: _Work, seen: frozenset[str], depth: int) -> Any:
        for _ in range(_MAX_DEPTH):
            if not isinstance(schema, dict) or not work.take(2 + len(schema)):
                return schema
            ref = schema.get("$ref")
            if isinstance(ref, str):
                target = _pointer(self.root, ref, work) if ref not in seen else None
                seen = seen | {ref}
                siblings = {k: v for k, v in schema.items() if k != "$ref"}
                schema = _merged([target if isinstance(target, dict) else {}, siblings], work)
                continue
            parts = schema.get("allOf")
            if isinstance(parts, list) and parts:
                if depth >= _MAX_DEPTH:
                    work.stop()
                    return {}
                own = {k: v for k, v in schema.items() if k != "allOf"}
                schema = _merged([own, *(self.resolved(p, work, seen, depth + 1)
                                         for p in parts)], work)
                continue
            return schema
        return {}


def _types_of(schema: dict[str, Any], work: _Work) -> list[Any]:
    """The alternatives a schema allows, as sub-schemas, in the order written."""
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return [o for o in options if isinstance(o, dict)] if work.take(len(options)) else []
    declared = schema.get("type")
    if isinstance(declared, list):
        if not work.take(len(declared) * (1 + len(schema))):
            return []
        return [{**schema, "type": _type_name(t)} for t in declared]
    if "const" in schema:
        schema = {**schema, "enum": [schema["const"]]}
    if declared is None and "enum" in schema:
        enum = schema["enum"] if isinstance(schema["enum"], list) else []
        if not work.members(len(enum)):
            return []
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
    if _INTEGER.fullmatch(stripped) or _LEADING_ZEROS.fullmatch(stripped):
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
        if _INTEGER.fullmatch(stripped) or _LEADING_ZEROS.fullmatch(stripped):
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


class _Coercion:
    """One text value's coercion by one tool's schema: the work it takes, and each
    subschema's result for it, memoised: a subschema reached by many branches is tried once,
    and one reached again inside itself (a cycle of `$ref`s) fits nothing there."""

    def __init__(self, text: str, resolver: _Resolver, work: _Work) -> None:
        self.text = text
        self._resolver = resolver
        self._work = work
        self._results: dict[int, tuple[Any, Any]] = {}  # by id: (schema, its result)
        self._typed: dict[str, Any] = {}  # the text read as each JSON type

    def value(self, schema: Any, depth: int = 0) -> Any:
        """The text's value under `schema`: the first alternative it fits, else the text."""
        text, work = self.text, self._work
        schema = self._resolver.resolved(schema, work)
        if not isinstance(schema, dict) or not schema or depth > _MAX_DEPTH or work.exhausted:
            return text
        known = self._results.get(id(schema))
        if known is not None:
            work.take()
            return text if known[1] is _IN_PROGRESS else known[1]
        self._results[id(schema)] = (schema, _IN_PROGRESS)  # holds `schema`: its id stays
        value = self._first_fit(schema, depth)
        self._results[id(schema)] = (schema, value)
        return value

    def _first_fit(self, schema: dict[str, Any], depth: int) -> Any:
        text, work = self.text, self._work
        options = []
        for option in _types_of(schema, work):
            options.append(self._resolver.resolved(option, work))
            if work.exhausted:
                return text
        # Try the non-string alternatives first: "42" under anyOf[integer, string] is 42.
        ordered = sorted((o for o in options if isinstance(o, dict)),
                         key=lambda o: _type_name(o.get("type")) == "string")
        for option in ordered:
            if not work.take():
                return text
            if "anyOf" in option or "oneOf" in option:
                value = self.value(option, depth + 1)
                if value is not text:
                    return value
                continue
            value = self._as_type(_type_name(option.get("type")))
            if value is _MISSING:
                continue
            if "enum" in option or "const" in option:
                enum = option["enum"] if "enum" in option else [option["const"]]
                if not work.members(len(enum) if isinstance(enum, list) else 0):
                    return text
                value = _in_enum(value, text, enum)
                if value is _MISSING:
                    continue
            return value
        return text

    def _as_type(self, type_name: Any) -> Any:
        """_as_type of the text, read once per type name."""
        if not isinstance(type_name, str):
            return _as_type(self.text, type_name)
        if type_name not in self._typed:
            self._typed[type_name] = _as_type(self.text, type_name)
        return self._typed[type_name]


@quick_init
@dataclass(frozen=True)
class Coerced:
    """A text parameter's value under its schema, and the work that took.

    `steps` counts the work done, so that tests can bound it: one step per subschema
    resolved or looked up again, per keyword merged (`allOf`), per alternative listed or
    tried, per member of an enum compared or of a type list copied, per token of a `$ref`
    followed. A value may take MAX_STEPS; past them (`exhausted`) it is kept as written.
    """

    value: Any
    steps: int
    exhausted: bool = False


class ToolSchema:
    """One tool's parameters schema, coercing its text parameters; resolved subschemas are
    shared by all of them, each has its own budget of steps."""

    def __init__(self, parameters: Any, max_steps: int = MAX_STEPS) -> None:
        self._parameters = parameters
        self._resolver = _Resolver(parameters)
        self._max_steps = max_steps

    def coerce(self, name: str, text: str) -> Coerced:
        """The value of parameter `name` written as `text` (the text when the schema does
        not describe it, or nothing fits better)."""
        work = _Work(self._max_steps)
        schema = self._property(name, work)
        return _finished(text, schema, self._resolver, work)

    def _property(self, name: str, work: _Work) -> Any:
        """The schema of one top-level parameter, or None when the tool does not describe it."""
        if not isinstance(self._parameters, dict):
            return None
        schema = self._resolver.resolved(self._parameters, work)
        properties = schema.get("properties") if isinstance(schema, dict) else None
        return properties.get(name) if isinstance(properties, dict) else None


def _finished(text: str, schema: Any, resolver: _Resolver, work: _Work) -> Coerced:
    """`text` coerced by `schema` within `work`'s budget; as written when that ran out."""
    value = text
    if isinstance(schema, dict) and schema and not work.exhausted:
        value = _Coercion(text, resolver, work).value(schema)
    if work.exhausted:
        return Coerced(text, work.steps, exhausted=True)
    return Coerced(value, work.steps)


def coerce_counted(text: str, schema: Any, max_steps: int = MAX_STEPS) -> Coerced:
    """The value of a text parameter under `schema`, whose `$ref`s point into itself, with
    the work it took (see Coerced)."""
    return _finished(text, schema, _Resolver(schema), _Work(max_steps))


def coerce(text: str, schema: Any) -> Any:
    """The value of a text parameter under `schema` (a string when nothing fits better, or
    when the schema costs more than a value may; see Coerced)."""
    return coerce_counted(text, schema).value


# The same reading of a schema, for the validity check of a call's decoded arguments
# (validity.py): `$ref`s and `allOf` resolved, alternatives listed, values compared and read.
Resolver = _Resolver
Work = _Work
alternatives = _types_of
same = _same
as_type = _as_type
MISSING = _MISSING
