"""A re-ask constrained in the upstream's own dialect, from data to data: which request field
carries which constraint on which server (the dialect table, declared once), and the body
that asks for a call the engine cannot leave out or botch.

Two constraints: the model's own call wrapper as a structural tag (the format's spec gives
begin and end, each tool's parameters the schema between them), so the model keeps its
trained shape; or a JSON array of `{name, arguments}` (vLLM's own schema for `required`).
The constrained text comes back as content (the upstream's `tool_choice` is set to "none"
so that no tool parser takes it) and goes through the same extraction as every answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ...toolcalls.formats.spec import FormatSpec, StructuralTag
from ...toolcalls.registry import SPECS, resolve
from .grammar_schema import for_grammar
from .profile import UpstreamProfile

TAG = "tag"  # xgrammar's `triggered_tags` structural tag: may force a call (`at_least_one`)
LEGACY_TAG = "legacy_tag"  # `structures` + `triggers`: arms on a trigger, never forces one
JSON = "json"  # a JSON schema for the whole output: an array of calls


@dataclass(frozen=True)
class Dialect:
    """One way of asking a server for constrained output: its name (logs, metrics, docs),
    the top-level request field that carries it (a server refusing that field retires the
    dialect for it), and the shape of constraint it takes."""

    name: str
    field: str
    shape: str


DIALECTS: dict[str, Dialect] = {d.name: d for d in (
    # vLLM >= 0.12 and SGLang: response_format {"type": "structural_tag", "format": {…}}
    Dialect("structural_tag", "response_format", TAG),
    # vLLM and SGLang: response_format {"type": "structural_tag", "structures", "triggers"}
    Dialect("structural_tag_legacy", "response_format", LEGACY_TAG),
    Dialect("structured_outputs", "structured_outputs", JSON),  # vLLM >= 0.10.2: {"json": …}
    Dialect("guided_json", "guided_json", JSON),  # vLLM before 0.12
    Dialect("json_schema", "json_schema", JSON),  # llama.cpp's own field
    # OpenAI's json_schema response format: vLLM, SGLang, llama.cpp, Ollama's /v1
    Dialect("response_format", "response_format", JSON),
)}

# Per server kind and version range [from, below) (None: open), the dialects it takes, best
# first. Read from each server's request models: vLLM's ChatCompletionRequest
# (`structured_outputs`, `response_format` with both structural-tag shapes; the `guided_*`
# fields until 0.12, ignored since, as every unknown field), SGLang's ChatCompletionRequest
# (`response_format` json_schema / structural tag, legacy with `at_least_one`), llama.cpp's
# `oaicompat_chat_params_parse` (`json_schema`, `response_format`; `grammar` is refused
# beside tools), Ollama's OpenAI-compatible `response_format`.
DIALECT_TABLE: tuple[tuple[str, tuple[int, ...] | None, tuple[int, ...] | None,
                           tuple[str, ...]], ...] = (
    ("vllm", (0, 12), None, ("structural_tag", "structured_outputs", "response_format")),
    ("vllm", (0, 10, 2), (0, 12), ("structural_tag_legacy", "structured_outputs",
                                   "guided_json", "response_format")),
    ("vllm", None, (0, 10, 2), ("structural_tag_legacy", "guided_json", "response_format")),
    ("sglang", None, None, ("structural_tag", "structural_tag_legacy", "response_format")),
    ("llama.cpp", None, None, ("json_schema", "response_format")),
    ("ollama", None, None, ("response_format",)),
    ("openai-compatible", None, None, ("response_format",)),
)
# A server whose version is unknown is taken as its newest row.


def dialects_of(profile: UpstreamProfile) -> tuple[Dialect, ...]:
    """The dialects `profile`'s server takes, best first, without those it refused."""
    version = profile.version_tuple
    for kind, low, below, names in DIALECT_TABLE:
        if kind != profile.kind:
            continue
        if version is not None and ((low is not None and version < low)
                                    or (below is not None and version >= below)):
            continue
        return tuple(DIALECTS[n] for n in names if DIALECTS[n].field not in profile.refused)
    return ()


def wrapper_of(formats: Sequence[str], profile: UpstreamProfile) -> FormatSpec | None:
    """The format whose structural tag the model is asked in: the one the `formats` setting
    names first, when it names formats (not `auto`), else the one the profile saw in the
    chat template; None when that format declares no structural tag."""
    by_name = {spec.name: spec for spec in SPECS}
    named = [by_name[name] for name, _ in resolve(formats)] if "auto" not in formats else []
    spec = named[0] if named else by_name.get(profile.call_wrapper or "")
    return spec if spec is not None and spec.structural_tag is not None else None


def wrappers() -> dict[str, str]:
    """Format name → the trigger of its structural tag, for reading a chat template."""
    return {spec.name: spec.structural_tag.trigger for spec in SPECS
            if spec.structural_tag is not None}


@dataclass(frozen=True)
class Constraint:
    """What a re-ask demands: the tools it may call (name → parameters schema), whether at
    least one call must come (`forced`: a demanded call; else a call the model opens is
    constrained from its first token and free text is untouched), and whether several may."""

    tools: Mapping[str, Mapping[str, Any]]
    forced: bool = True
    parallel: bool = True


def pick(dialects: Sequence[Dialect], constraint: Constraint,
         wrapper: FormatSpec | None) -> Dialect | None:
    """The best dialect that can carry `constraint`: a structural tag in the model's own
    wrapper where there is one (a legacy tag only when nothing must be forced: it arms on
    the trigger and cannot make the model write it), else JSON where a call is forced."""
    for dialect in dialects:
        if dialect.shape == JSON and constraint.forced:
            return dialect
        if dialect.shape == TAG and wrapper is not None:
            return dialect
        if dialect.shape == LEGACY_TAG and wrapper is not None and not constraint.forced:
            return dialect
    return None


def calls_schema(constraint: Constraint) -> dict[str, Any]:
    """The JSON schema of an array of calls to the constraint's tools (at least one; one
    only when calls may not come in parallel)."""
    items = [{"type": "object",
              "properties": {"name": {"type": "string", "enum": [name]},
                             "arguments": _object_schema(parameters)},
              "required": ["name", "arguments"], "additionalProperties": False}
             for name, parameters in constraint.tools.items()]
    schema: dict[str, Any] = {"type": "array", "items": items[0] if len(items) == 1
                              else {"anyOf": items}, "minItems": 1}
    if not constraint.parallel:
        schema["maxItems"] = 1
    return schema


def _object_schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's parameters as the schema of an arguments object (an empty schema: any), in
    the JSON Schema grammar engines compile (OpenAPI's `nullable` said as a type, the
    assertions they compile unevenly left to the check after: `grammar_schema`)."""
    schema: dict[str, Any] = for_grammar(dict(parameters))  # (a dict's is a dict)
    if not schema or "type" not in schema:
        schema.setdefault("type", "object")
    return schema


def _tags(tag: StructuralTag, constraint: Constraint) -> list[tuple[str, dict[str, Any], str]]:
    return [(tag.begin_for(name), _object_schema(parameters), tag.end)
            for name, parameters in constraint.tools.items()]


def fields_for(dialect: Dialect, constraint: Constraint,
               wrapper: FormatSpec | None) -> dict[str, Any]:
    """The request fields that ask `dialect`'s server for `constraint`."""
    if dialect.shape == JSON:
        schema = calls_schema(constraint)
        if dialect.name == "structured_outputs":
            return {"structured_outputs": {"json": schema}}
        if dialect.name == "response_format":
            return {"response_format": {"type": "json_schema", "json_schema": {
                "name": "tool_calls", "schema": schema, "strict": True}}}
        return {dialect.field: schema}
    tag = wrapper.structural_tag if wrapper is not None else None
    if tag is None:
        raise ValueError(f"{dialect.name} needs a format with a structural tag")
    tags = _tags(tag, constraint)
    if dialect.shape == LEGACY_TAG:
        return {"response_format": {
            "type": "structural_tag", "triggers": [tag.trigger],
            "structures": [{"begin": b, "schema": s, "end": e} for b, s, e in tags],
            "at_least_one": constraint.forced}}
    return {"response_format": {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": [tag.trigger],
        "tags": [{"type": "tag", "begin": b, "content": {"type": "json_schema",
                                                          "json_schema": s}, "end": e}
                 for b, s, e in tags],
        "at_least_one": constraint.forced, "stop_after_first": not constraint.parallel}}}


def constrained_body(upstream_body: bytes, dialect: Dialect, constraint: Constraint,
                     wrapper: FormatSpec | None, kind: str) -> bytes:
    """The turn's upstream body asked again with `constraint` in `dialect`. The server's own
    tool parser is kept off the answer (`tool_choice: "none"`: vLLM and llama.cpp refuse a
    constraint beside a named choice, and a parser would take the text the proxy reads);
    a structural tag's markers are special tokens, kept in the text where the server can."""
    body = orjson.loads(upstream_body)
    for name in ("response_format", "structured_outputs", "guided_json", "json_schema",
                 "grammar"):
        body.pop(name, None)
    if body.get("tools"):
        body["tool_choice"] = "none"
    if dialect.shape != JSON and kind in ("vllm", "sglang"):
        body["skip_special_tokens"] = False
    body.update(fields_for(dialect, constraint, wrapper))
    return orjson.dumps(body)


def refused_field(status: int, error: Any, dialect: Dialect) -> bool:
    """Whether an upstream's 4xx answer to a constrained re-ask refuses the dialect's field
    (rather than the request as a whole): the error names the field (vLLM's and SGLang's
    `param`, or the message: llama.cpp's "response_format type must be …"), or speaks of
    a constraint, grammar or structured output."""
    if not 400 <= status < 500 or status in (401, 403, 408, 429):
        return False
    detail = error.get("error", error) if isinstance(error, dict) else error
    text = (orjson.dumps(detail).decode() if not isinstance(detail, str) else detail).lower()
    return any(word in text for word in (dialect.field, "structural", "grammar", "guided",
                                         "structured output", "json_schema", "constraint"))


def constraint_for(tools: Mapping[str, Mapping[str, Any]], only: str | None, parallel: bool,
                   reason: str, tool: str | None) -> Constraint:
    """What a re-ask demands: for an unreadable frame, one call to its tool (to any, when
    its name could not be read); for a demanded one,
    a call to the chosen tool (a named `tool_choice`) or to any, as many as
    `parallel_tool_calls` allows."""
    if reason == "unreadable":
        chosen = {tool: tools[tool]} if tool is not None else tools
        return Constraint(chosen, forced=True, parallel=False)
    if only is not None:
        return Constraint({only: tools[only]}, forced=True, parallel=parallel)
    return Constraint(tools, forced=True, parallel=parallel)
