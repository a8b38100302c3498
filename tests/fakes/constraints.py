"""A decoding constraint as the fakes see it once each server has read it from its own request
fields, the text a constrained model writes under it, and the check that a text fits it.

Kinds: `json_schema` (value: the schema), `json_object` (None), `regex` (the pattern),
`choice` (the list of strings), `grammar` (EBNF/GBNF/Lark source), `structural_tag` (the tag as
a dict: vLLM's/SGLang's legacy `{"structures", "triggers"}` or xgrammar's `{"format": …}`).
A regex or a grammar cannot be honoured by a general generator: a test scripts the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tests.fakes.schema import instance_of, schema_errors

KINDS = ("json_schema", "json_object", "regex", "choice", "grammar", "structural_tag")


@dataclass(frozen=True)
class Constraint:
    """What the server constrains the answer to."""

    kind: str
    value: Any = None


def optional(constraint: Constraint) -> bool:
    """Whether the constraint leaves free text free and constrains only what follows a trigger
    (a call the model opens): a legacy structural tag (its `triggers`), xgrammar's
    `triggered_tags` without `at_least_one`, or a lazy grammar (llama.cpp's tool grammar)."""
    value = constraint.value if isinstance(constraint.value, dict) else {}
    if constraint.kind != "structural_tag":
        return False
    if "structures" in value:  # SGLang's legacy tag may demand one (at_least_one)
        return not value.get("at_least_one", False)
    node = value.get("format") or {}
    return node.get("type") == "triggered_tags" and not node.get("at_least_one", False)


class UnscriptedConstraint(LookupError):
    """A regex or grammar constraint no test scripted an answer for."""


Script = Callable[[Constraint], str] | str | None
# What a model writes for a tool's arguments where a tag leaves them free (no schema); or,
# where a schema binds them, what it means to write (kept when it fits: the mask lets it by).
FreeArguments = Callable[[dict[str, Any]], Any]


def _free_json(schema: Any, begin: str, tools: list[dict[str, Any]],
               free: FreeArguments | None, meant: FreeArguments | None = None) -> str:
    """The JSON a model writes in a tagged span: what it `meant` to write for the tool the
    tag's begin names where that fits `schema` (a mask passes a valid text through), else an
    instance of `schema`; where the tag sets none (`{}`, as SGLang's for a tool that is not
    `strict`), the arguments the model would write anyway (`free`; default: fitting ones).
    `True` (any JSON, vLLM's for a tool that says `strict: false`) leaves them free too."""
    if schema and schema is not True:
        function = _named_in(begin, tools)
        wanted = meant(function) if meant is not None and function is not None else None
        if wanted is not None and not schema_errors(wanted, schema):
            return orjson.dumps(wanted).decode()
        return orjson.dumps(instance_of(schema)).decode()
    function = _named_in(begin, tools)
    if function is None:
        return "{}"
    value = free(function) if free else instance_of(function.get("parameters") or {})
    return orjson.dumps(value).decode()


def fitting_text(constraint: Constraint, script: Script = None,
                 tools: list[dict[str, Any]] | None = None,
                 free: FreeArguments | None = None, meant: FreeArguments | None = None) -> str:
    """The text a model writes when decoding is constrained by `constraint`. For
    `json_object`, a call-shaped object for the first of `tools` (a bare `{}` without); in a
    structural tag's span, `meant`'s arguments where they fit its schema, and without a
    schema `free`'s (see _free_json)."""
    kind, value, tools = constraint.kind, constraint.value, tools or []
    if kind == "json_schema":
        return orjson.dumps(instance_of(value)).decode()
    if kind == "json_object":
        if not tools:
            return "{}"
        function = tools[0].get("function") or {}
        return orjson.dumps({"name": function.get("name"),
                             "arguments": instance_of(function.get("parameters") or {})}).decode()
    if kind == "choice":
        return value[0]
    if kind == "structural_tag":
        return _structural_text(value, script, tools, free, meant)
    if script is None:
        raise UnscriptedConstraint(f"no scripted answer for a {kind} constraint")
    return script(constraint) if callable(script) else script


def _structural_text(tag: dict[str, Any], script: Script, tools: list[dict[str, Any]],
                     free: FreeArguments | None, meant: FreeArguments | None) -> str:
    if "structures" in tag:  # the legacy form: begin, schema, end; triggers
        first = _shown(tag["structures"], tools, meant)
        return first["begin"] + _free_json(first.get("schema"), first["begin"], tools, free,
                                           meant) + first["end"]
    return _format_text(tag["format"], script, tools, free, begin="", meant=meant)


def _named_in(begin: str, tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The function of `tools` a tag's begin names (the longest name in it), or None."""
    named = [t.get("function") or {} for t in tools
             if (t.get("function") or {}).get("name") and t["function"]["name"] in begin]
    return max(named, key=lambda f: len(f["name"])) if named else None


def _shown(tags: list[dict[str, Any]], tools: list[dict[str, Any]],
           meant: FreeArguments | None = None) -> dict[str, Any]:
    """The tag for the tool the model means to call (`meant` has arguments for it), else the
    first for a tool it was shown (its begin names one), else the first: a model calls what
    its prompt offers it."""
    shown = [tag for tag in tags if _named_in(tag.get("begin", ""), tools)]
    wanted = [tag for tag in shown if meant is not None
              and meant(_named_in(tag.get("begin", ""), tools) or {}) is not None]
    return (wanted or shown or tags)[0]


def _format_text(node: dict[str, Any], script: Script, tools: list[dict[str, Any]],
                 free: FreeArguments | None, begin: str = "",
                 meant: FreeArguments | None = None) -> str:
    """The text for one xgrammar structural-tag format node (the first alternative of each
    choice; one tag where tags may repeat)."""
    kind = node.get("type")
    if kind == "const_string":
        return node["value"]
    if kind == "json_schema":
        return _free_json(node["json_schema"], begin, tools, free, meant)
    if kind == "any_text":
        return ""
    if kind == "sequence":
        return "".join(_format_text(e, script, tools, free, begin, meant)
                       for e in node["elements"])
    if kind == "or":
        return _format_text(node["elements"][0], script, tools, free, begin, meant)
    if kind == "tag":
        return node["begin"] + _format_text(node["content"], script, tools, free,
                                            node["begin"], meant) + node["end"]
    if kind in ("triggered_tags", "tags_with_separator"):
        return _format_text(_shown(node["tags"], tools, meant), script, tools, free, begin,
                            meant)
    if script is None:
        raise UnscriptedConstraint(f"no scripted answer for a structural tag's {kind}")
    return script(Constraint("structural_tag", node)) if callable(script) else script


def fit_errors(constraint: Constraint, text: str) -> list[str]:
    """Where `text` breaks `constraint` (empty: it fits). A grammar is not checked."""
    kind, value = constraint.kind, constraint.value
    if kind in ("json_schema", "json_object"):
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError as error:
            return [f"not JSON: {error}"]
        if kind == "json_object":
            return [] if isinstance(parsed, dict) else ["not a JSON object"]
        return schema_errors(parsed, value)
    if kind == "choice":
        return [] if text in value else [f"{text!r} is none of the choices"]
    if kind == "regex":
        return [] if re.fullmatch(value, text) else [f"{text!r} does not match {value!r}"]
    if kind == "structural_tag":
        return _structural_errors(value, text)
    return []


def _tags_of(tag: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(begin, JSON schema, end) of each tag a structural tag allows, in either form."""
    if "structures" in tag:
        return [(s["begin"], s.get("schema") or {}, s["end"]) for s in tag["structures"]]
    found: list[tuple[str, dict[str, Any], str]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            content = node.get("content")
            if node.get("type") == "tag" and isinstance(content, dict) \
                    and content.get("type") == "json_schema":
                found.append((node["begin"], content["json_schema"], node["end"]))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(tag.get("format"))
    return found


def _structural_errors(tag: dict[str, Any], text: str) -> list[str]:
    """Every tagged span in `text` has a tag's begin, JSON fitting its schema, and its end;
    at least one span is there."""
    errors: list[str] = []
    spans = 0
    for begin, schema, end in _tags_of(tag):
        for match in re.finditer(re.escape(begin) + "(.*?)" + re.escape(end), text, re.S):
            spans += 1
            try:
                errors += schema_errors(orjson.loads(match.group(1)), schema)
            except orjson.JSONDecodeError as error:
                errors.append(f"{begin}…{end}: not JSON: {error}")
    if spans or optional(Constraint("structural_tag", tag)):
        return errors
    return ["no tagged span"]
