"""The shared pipeline: parsers find frames; here they are decoded, repaired, checked
against the request's tools, coerced by schema and assembled. Text that is not a call stays."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

from . import schema
from .context import Context
from .registry import MARKERS, markers_of, resolve
from .repair import NotJson, loads_repaired
from .scan import Document, Spans
from .types import Extraction, Frame, LeftAsText, ToolCall, ToolSchemas

_CALL_KEYS = {"name", "arguments", "parameters", "id", "type"}
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_INT_RANGE = range(-(1 << 63), 1 << 64)  # what orjson writes: int64 and uint64


class _Refused(Exception):
    """A frame that must stay text; the message is the reason, for diagnostics."""

    def __init__(self, reason: str, name: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.name = name


def _arguments_object(value: Any, repairs: list[str]) -> dict[str, Any]:
    """A call's arguments as a dict; a string holding JSON is decoded once."""
    if isinstance(value, str):
        try:
            decoded, inner = loads_repaired(value) if value.strip() else ({}, ())
        except NotJson:
            raise _Refused("arguments_not_json") from None
        repairs.append("arguments_json_string")
        repairs.extend(inner)
        value = decoded
    if not isinstance(value, dict):
        raise _Refused("arguments_not_object")
    return value


def _call_from_item(item: Any, repairs: list[str], frame: Frame) -> tuple[str, dict[str, Any]]:
    """(name, arguments) of one decoded call envelope, or _Refused."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise _Refused("unrecognised_shape")
    if not set(item) <= _CALL_KEYS or item.get("type", "function") != "function":
        raise _Refused("unrecognised_shape", item["name"])
    keys = [key for key in ("arguments", "parameters") if key in item]
    if len(keys) == 1:
        raw = item[keys[0]]
        if keys[0] != frame.arguments_key:
            repairs.append(f"{keys[0]}_as_{frame.arguments_key}")
    elif keys:
        raise _Refused("unrecognised_shape", item["name"])
    else:
        raise _Refused("missing_arguments", item["name"])
    try:
        return item["name"], _arguments_object(raw, repairs)
    except _Refused as refused:
        refused.name = item["name"]
        raise


def _calls_from_json(value: Any, repairs: list[str], frame: Frame,
                     ) -> list[tuple[str, dict[str, Any]] | _Refused]:
    """(name, arguments) or the refusal of each call in a decoded JSON frame; _Refused for
    the whole frame when it holds no call at all."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise _Refused("empty_call_list")
    if isinstance(value, list) and len(items) > 1 and not frame.listed:
        repairs.append("several_calls_in_frame")
    if len(items) == 1:
        return [_call_from_item(items[0], repairs, frame)]
    calls: list[tuple[str, dict[str, Any]] | _Refused] = []
    for item in items:  # one bad sibling does not drop the good calls of a list
        try:
            calls.append(_call_from_item(item, repairs, frame))
        except _Refused as refused:
            calls.append(refused)
    return calls


def _calls_from_frame(frame: Frame, tools: ToolSchemas, truncated: bool,
                      ) -> tuple[list[tuple[str, dict[str, Any]] | _Refused], list[str]]:
    repairs = list(frame.repairs)
    if frame.refused is not None:
        raise _Refused(frame.refused, frame.name)
    if truncated and not (frame.closed and frame.complete):
        raise _Refused("cut_by_length", frame.name)
    if not frame.complete:
        raise _Refused("incomplete_frame", frame.name)
    if frame.value is not None:
        return _calls_from_json(frame.value, repairs, frame), repairs
    if frame.json_text is not None:
        try:
            value, applied = loads_repaired(frame.json_text)
        except NotJson:
            raise _Refused("invalid_json", frame.name) from None
        repairs.extend(applied)
        if frame.name is None:
            return _calls_from_json(value, repairs, frame), repairs
        return [(frame.name, _arguments_object(value, repairs))], repairs
    name = frame.name or ""
    parameters = tools.get(name, {})
    arguments = {key: schema.coerce(text, schema.property_schema(parameters, key))
                 for key, text in frame.text_args}
    return [(name, arguments)], repairs


def _why_unserialisable(value: Any) -> str:
    """Why orjson could not write `value` (found only after it failed), for diagnostics."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return "invalid_unicode"
        elif isinstance(item, int) and not isinstance(item, bool):
            if item not in _INT_RANGE:
                return "integer_out_of_range"
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return "unserialisable_arguments"  # e.g. nested deeper than orjson writes


def _serialised(arguments: dict[str, Any]) -> str:
    """`arguments` as the JSON string a call carries; _Refused when it cannot be written
    (lone surrogates, integers past 64 bits, extreme depth), so the frame stays text."""
    try:
        return orjson.dumps(arguments).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        raise _Refused(_why_unserialisable(arguments)) from None


def _looks_like_schema(arguments: dict[str, Any], parameters: dict[str, Any]) -> bool:
    """Arguments that are a JSON schema (the tool's definition echoed), not values for it."""
    declared = parameters.get("properties")
    declared = declared if isinstance(declared, dict) else {}
    return (isinstance(arguments.get("properties"), dict) and "properties" not in declared
            and (arguments.get("type") == "object" or isinstance(arguments.get("required"),
                                                                   list)))


def _checked(name: str, arguments: dict[str, Any], tools: ToolSchemas,
             only: str | None) -> str:
    """The serialised arguments of a call to `name`, or _Refused."""
    if name not in tools:
        raise _Refused("unknown_tool", name)
    if only is not None and name != only:
        raise _Refused("not_the_chosen_tool", name)
    if _looks_like_schema(arguments, tools[name]):
        raise _Refused("schema_not_arguments", name)
    try:
        return _serialised(arguments)
    except _Refused as refused:
        refused.name = name
        raise


def _read_frame(frame: Frame, tools: ToolSchemas, only: str | None, truncated: bool,
                ) -> tuple[list[ToolCall], list[_Refused]]:
    """The frame's calls and the refusals of its other items (a list may hold bad siblings);
    _Refused when it yields no call."""
    items, repairs = _calls_from_frame(frame, tools, truncated)
    calls: list[ToolCall] = []
    refused: list[_Refused] = []
    for item in items:
        try:
            if isinstance(item, _Refused):
                raise item
            name, arguments = item
            serialised = _checked(name, arguments, tools, only)
        except _Refused as refusal:
            refused.append(refusal)
            continue
        calls.append(ToolCall(name, serialised, frame.format, tuple(repairs), frame.start,
                              frame.end))
    if not calls:
        raise refused[0]
    return calls, refused


def _in_context(text: str, taken: list[tuple[Frame, list[ToolCall]]],
                left: list[LeftAsText]) -> list[tuple[Frame, list[ToolCall]]]:
    """The frames that the prose around them shows to be calls, sorted; the others (shown in
    code, mentioned mid-sentence, introduced as examples) are added to `left`."""
    taken.sort(key=lambda item: item[0].start)
    context = Context(text)
    kept = []
    for i, (frame, calls) in enumerate(taken):
        previous_end = taken[i - 1][0].end if i else -1
        next_start = taken[i + 1][0].start if i + 1 < len(taken) else len(text) + 1
        reason = context.refusal(frame.start, frame.end, previous_end, next_start,
                                 by_shape=not MARKERS.get(frame.format))
        if reason is None:
            kept.append((frame, calls))
        else:
            left.extend(LeftAsText(frame.format, frame.start, frame.end, reason, call.name)
                        for call in calls)
    return kept


def _cut(text: str, frames: Sequence[Frame]) -> str:
    """`text` without the spans of `frames` (sorted); whitespace at each seam is trimmed."""
    if not frames:
        return text
    pieces = []
    pos = 0
    for frame in frames:
        pieces.append(text[pos:frame.start])
        pos = frame.end
    pieces.append(text[pos:])
    trimmed = [pieces[0].rstrip()]
    trimmed += [piece.strip() for piece in pieces[1:-1]]
    trimmed.append(pieces[-1].lstrip())
    return "\n".join(piece for piece in trimmed if piece)


def extract(
    text: str,
    tools: ToolSchemas,
    *,
    only: str | None = None,
    formats: Sequence[str] = ("auto",),
    truncated: bool = False,
) -> Extraction:
    """Find the tool calls written as text in a model's output.

    `tools` maps the request's function names to their parameter schemas; a call to any
    other name stays text, and with `only` (a named `tool_choice`) so does any other call.
    `truncated` means the output was cut by `length`: frames missing their close stay text.
    """
    if not text or not tools:
        return Extraction(content=text)
    chosen = resolve(formats)
    doc = Document(text, markers_of(tuple(name for name, _ in chosen)), frozenset(tools))
    claims = Spans()  # taken by earlier formats: a frame overlapping one is dropped
    taken: list[tuple[Frame, list[ToolCall]]] = []
    left: list[LeftAsText] = []
    for name, find_frames in chosen:
        markers = MARKERS.get(name, ())
        if markers and doc.present.isdisjoint(markers):
            continue  # none of its markers occurs: it cannot find a frame
        spans: list[tuple[int, int]] = []
        try:
            for frame in find_frames(doc):
                if claims.overlaps(frame.start, frame.end):
                    continue
                spans.append((frame.start, frame.end))
                doc.claimed.add(frame.start, frame.end)
                try:
                    calls, siblings = _read_frame(frame, tools, only, truncated)
                    taken.append((frame, calls))
                except _Refused as refused:
                    siblings = [refused]
                left.extend(LeftAsText(frame.format, frame.start, frame.end, refused.reason,
                                       refused.name or frame.name) for refused in siblings)
        except Exception:  # a parser's bug must not fail the response: its text stays text
            left.append(LeftAsText(name, 0, len(text), "parser_error"))
        if spans:
            claims.add_all(spans)
    if doc.budget_exhausted:
        left.append(LeftAsText("*", 0, len(text), "scan_budget_exhausted"))
    if taken:
        taken = _in_context(text, taken, left)
    if not taken:
        return Extraction(content=text, left_as_text=left, text=text)
    return Extraction(
        content=_cut(text, [frame for frame, _ in taken]),
        calls=[call for _, calls in taken for call in calls],
        left_as_text=left,
        text=text,
    )
