"""The shared pipeline: parsers find frames; here they are decoded, repaired, checked
against the request's tools, coerced by schema and assembled. Text that is not a call stays."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..base.bulk_decode import PAUSE_FROM, collector_paused
from ..base.frozen import quick_init
from . import schema
from .context import Context
from .exact_json import ORJSON_INTS
from .names import NAME_MATCHED, UNKNOWN_TOOL, ToolNames, tool_names
from .prose import cleanup
from .registry import (
    CONTENT_MARKUP,
    MARKERS,
    TEXT_JOINED,
    made_with_markers,
    resolved_markers,
    runnable,
)
from .repair import NotJson, envelope, loads_repaired
from .scan import Document, Spans, space_before
from .types import Extraction, Frame, LeftAsText, Refusal, ToolCall, ToolSchemas
from .validity import SCHEMA_COERCED, check

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


Call = tuple[str, dict[str, Any] | None]
"""A call's name and decoded arguments (None: none written), before they are checked against
the tools."""
Decode = Callable[[str], tuple[Any, tuple[str, ...]]]
"""Reads a frame's JSON payload: its value and the repairs that took (see loads_repaired)."""


def _arguments_object(value: Any, repairs: list[str]) -> dict[str, Any] | Refusal:
    """A call's arguments as a dict (a string holding JSON is decoded once), or why not."""
    if isinstance(value, str):
        try:
            decoded, inner = loads_repaired(value) if value.strip() else ({}, ())
        except NotJson:
            return Refusal("arguments_not_json")
        repairs.append("arguments_json_string")
        repairs.extend(inner)
        value = decoded
    if not isinstance(value, dict):
        return Refusal("arguments_not_object")
    return value


def _calls_from_json(value: Any, repairs: list[str], frame: Frame, reading: Reading,
                     ) -> list[Call | Refusal]:
    """The call, or the refusal, of each envelope in a decoded JSON frame, under any of the
    spellings repair/envelope.py reads (one bad sibling does not drop the good calls of a list)."""
    found = envelope.calls_of(value, reading.names, reading.tools, repairs, frame.arguments_key)
    if len(found) > 1 and not frame.listed:
        repairs.append("several_calls_in_frame")
    calls: list[Call | Refusal] = []
    for item in found:
        if isinstance(item, Refusal):
            calls.append(item)
            continue
        name, written = item
        if written is None:
            calls.append((name, None))
            continue
        arguments = _arguments_object(written, repairs)
        calls.append(Refusal(arguments.reason, name) if isinstance(arguments, Refusal)
                     else (name, arguments))
    return calls


def _decoded_calls(frame: Frame, reading: Reading, decode: Decode,
                   ) -> tuple[list[Call | Refusal], list[str]]:
    """The calls (or refusals) a frame's payload decodes to, and the repairs that took; a
    frame that holds no call at all gives one refusal."""
    if frame.refused is not None:
        return [Refusal(frame.refused, frame.name)], []
    if reading.truncated and not (frame.closed and frame.complete):
        if frame.head:  # the whole calls before the cut one
            repairs = list(frame.repairs)
            return [*_calls_from_json(frame.head, repairs, frame, reading),
                    Refusal("cut_by_length", frame.name)], repairs
        return [Refusal("cut_by_length", frame.name)], []
    if not frame.complete:
        return [Refusal("incomplete_frame", frame.name)], []
    repairs = list(frame.repairs)
    if frame.value is not None:
        return _calls_from_json(frame.value, repairs, frame, reading), repairs
    if frame.json_text is not None:
        try:
            value, applied = decode(frame.json_text)
        except NotJson:
            return [Refusal("invalid_json", frame.name)], []
        repairs.extend(applied)
        if frame.name is None:
            return _calls_from_json(value, repairs, frame, reading), repairs
        arguments = _arguments_object(value, repairs)
        return [arguments if isinstance(arguments, Refusal) else (frame.name, arguments)], repairs
    name = frame.name or ""
    if _ambiguous_parameters(frame.text_args):
        return [Refusal("ambiguous_value", name)], []
    return [(name, _coerced_arguments(frame.text_args, reading.parameters(name), repairs))], repairs


def _ambiguous_parameters(text_args: tuple[tuple[str, str], ...]) -> bool:
    """A key written twice: which of its values is meant is a guess. (A key the tool does
    not declare is read, as a string unless its text is typed otherwise: ambiguity is about
    the markers inside a value, which text_values decides, not about the schema.)"""
    keys = [key for key, _ in text_args]
    return len(set(keys)) < len(keys)


def _coerced_arguments(text_args: tuple[tuple[str, str], ...], parameters: dict[str, Any],
                       repairs: list[str]) -> dict[str, Any]:
    """Parameters written as text, coerced by the tool's schema; a value whose schema cost
    more than a value may is kept as written, and the call says so."""
    tool = schema.ToolSchema(parameters)
    arguments = {}
    for key, text in text_args:
        coerced = tool.coerce(key, text)
        arguments[key] = coerced.value
        if coerced.exhausted and schema.BUDGET_EXHAUSTED not in repairs:
            repairs.append(schema.BUDGET_EXHAUSTED)
    return arguments


def _why_unserialisable(value: Any) -> str:
    """Why orjson could not write `value` (found only after it failed), for diagnostics."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return "invalid_unicode"
        elif isinstance(item, int) and not isinstance(item, bool):
            if item not in ORJSON_INTS:
                return "integer_out_of_range"
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return "unserialisable_arguments"  # e.g. nested deeper than orjson writes


def _serialised(arguments: dict[str, Any]) -> str | Refusal:
    """`arguments` as the JSON string a call carries, or why it cannot be written (lone
    surrogates, integers past 64 bits, extreme depth): then the frame stays text."""
    try:
        return orjson.dumps(arguments).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return Refusal(_why_unserialisable(arguments))


def _looks_like_schema(arguments: dict[str, Any], parameters: dict[str, Any]) -> bool:
    """Arguments that are a JSON schema (the tool's definition echoed), not values for it."""
    declared = parameters.get("properties")
    declared = declared if isinstance(declared, dict) else {}
    return (isinstance(arguments.get("properties"), dict) and "properties" not in declared
            and (arguments.get("type") == "object" or isinstance(arguments.get("required"),
                                                                   list)))


@quick_init
@dataclass(frozen=True)
class Reading:
    """What a frame's calls are checked against: the request's tools (`names` matches a name
    written a little off, see names.py), a named `tool_choice` (`only`), whether the output
    was cut by `length`, and whether a call to a name that matches no tool is delivered as
    written when the frame has markers of its own (`deliver_unknown`)."""

    tools: ToolSchemas
    names: ToolNames
    only: str | None = None
    truncated: bool = False
    deliver_unknown: bool = True

    def parameters(self, written: str) -> dict[str, Any]:
        """The parameters schema of the tool `written` names ({} for none)."""
        match = self.names.match(written)
        return self.tools.get(match.name, {}) if match is not None else {}


def _no_parameters_needed(parameters: Any) -> bool:
    """A tool whose parameters are all optional (or that has none)."""
    required = parameters.get("required") if isinstance(parameters, dict) else None
    return not required


def _checked_call(name: str, arguments: dict[str, Any] | None, reading: Reading, marked: bool,
                  ) -> tuple[str, str, tuple[str, ...], tuple[str, ...]] | Refusal:
    """The call to `name` as taken: the tool's name, the serialised arguments (coerced to
    the tool's schema where that is without doubt), the repairs of its own and what of them
    still does not fit the schema (validity.py); or why it is not taken. A name matching no
    tool is taken as written only when the frame has markers of its own (`marked`) and
    `reading.deliver_unknown`."""
    match = reading.names.match(name)
    repairs: tuple[str, ...] = ()
    if match is None:
        if (reading.only is not None or not (marked and reading.deliver_unknown)
                or not ToolNames.plausible(name)):
            return Refusal(UNKNOWN_TOOL, name)
        parameters: dict[str, Any] = {}
        repairs = (UNKNOWN_TOOL,)
    else:
        parameters = reading.tools[match.name]
        if match.repaired:
            name, repairs = match.name, (NAME_MATCHED,)
        if reading.only is not None and name != reading.only:
            return Refusal("not_the_chosen_tool", name)
    if arguments is None:
        if match is None or not _no_parameters_needed(parameters):
            return Refusal("missing_arguments", name)
        arguments, repairs = {}, (*repairs, "missing_arguments_empty")
    if _looks_like_schema(arguments, parameters):
        return Refusal("schema_not_arguments", name)
    validity = check(arguments, parameters)
    if validity.coerced:
        repairs = (*repairs, SCHEMA_COERCED)
    serialised = _serialised(validity.arguments)
    if isinstance(serialised, Refusal):
        return Refusal(serialised.reason, name)
    return name, serialised, repairs, validity.problems


def read_frame(frame: Frame, reading: Reading, decode: Decode = loads_repaired,
               marked: bool = True) -> tuple[list[ToolCall], list[Refusal]]:
    """The calls a frame holds and the refusals of its other items (a list may hold bad
    siblings); when it holds no call, the one refusal that says why it stays text. `decode`
    reads a JSON payload: the frame's document's, which reuses what its scan decoded.
    `marked`: the frame has markers of its own (see registry.made_with_markers)."""
    items, repairs = _decoded_calls(frame, reading, decode)
    calls: list[ToolCall] = []
    refusals: list[Refusal] = []
    for item in items:
        if isinstance(item, Refusal):
            refusals.append(item)
            continue
        checked = _checked_call(*item, reading, marked)
        if isinstance(checked, Refusal):
            refusals.append(checked)
            continue
        name, serialised, own, problems = checked
        calls.append(ToolCall(name, serialised, frame.format, (*repairs, *own), frame.start,
                              frame.end, problems))
    return (calls, refusals) if calls else ([], refusals[:1])


def _kept_in_context(text: str, taken: list[tuple[Frame, list[ToolCall]]],
                     left: list[LeftAsText]) -> list[tuple[Frame, list[ToolCall]]]:
    """The frames that the prose around them shows to be calls, sorted; the others (shown in
    code, mentioned mid-sentence, introduced as examples) are added to `left`."""
    taken.sort(key=lambda item: item[0].start)
    context = Context(text)
    kept = []
    # A call cut by `length` ends the text: a frame, not prose, after the calls before it.
    cut = min((item.start for item in left if item.reason == "cut_by_length"),
              default=len(text) + 1)
    for i, (frame, calls) in enumerate(taken):
        previous_end = taken[i - 1][0].end if i else -1
        next_start = taken[i + 1][0].start if i + 1 < len(taken) else len(text) + 1
        if frame.end <= cut < next_start:
            next_start = cut
        reason = context.refusal(frame.start, frame.end, previous_end, next_start,
                                 by_shape=not MARKERS.get(frame.format))
        if reason is None:
            kept.append((frame, calls))
        else:
            left.extend(LeftAsText(frame.format, frame.start, frame.end, reason, call.name)
                        for call in calls)
    return kept


def _without(text: str, spans: Sequence[tuple[int, int]],
             joined: Sequence[tuple[int, int]] = ()) -> str:
    """`text` without `spans` (they may overlap); whitespace at each seam is trimmed and the
    pieces are a line apart, but at a seam where a frame of a format whose parser joins the
    text around its calls as written stood (`joined`, see FormatSpec.text_joined): there the
    pieces are kept as written and joined, but for space alone between two such frames (the
    calls of one section: the section's)."""
    if not spans:
        return text
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    glued = [any(start <= a and b <= end for a, b in joined) for start, end in merged]
    # The text before the first frame, cut once (a long answer's prose is not copied twice).
    pieces = [text[:merged[0][0] if glued[0] else space_before(text, merged[0][0])]]
    pos = merged[0][1]
    for start, end in merged[1:]:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    out = pieces[0]
    for i, piece in enumerate(pieces[1:]):
        last = i + 1 == len(merged)
        if glued[i]:
            if not last and glued[i + 1] and not piece.strip():
                continue
            out += piece if last or glued[i + 1] else piece.rstrip()
            continue
        piece = piece.lstrip() if last or glued[i + 1] else piece.strip()
        if piece:
            out = f"{out.rstrip()}\n{piece}" if _holds_text(out) else piece
    return out if _holds_text(out) else ""  # space alone is no content


def _holds_text(text: str) -> bool:
    """`bool(text.strip())` without the copy: whether `text` holds more than whitespace."""
    return bool(text) and not text.isspace()


def _with_separator(text: str, span: tuple[int, int], separator: str) -> tuple[int, int]:
    """A joined frame's span with the separator its template writes before a call, where the
    text before it ends with one (FormatSpec.call_separator)."""
    start, end = span
    if separator and text.endswith(separator, 0, start):
        start -= len(separator)
    return start, end


def _drop_enclosed(frame: Frame, claims: Spans, doc: Document,
                   taken: list[tuple[Frame, list[ToolCall]]], left: list[LeftAsText]) -> None:
    """Forget the frames earlier formats found inside `frame`: they are text of its payload
    (a file that quotes a call), not calls of their own, whatever `frame` turns out to be."""
    def inside(start: int, end: int) -> bool:
        return frame.start <= start and end <= frame.end

    claims.remove_inside(frame.start, frame.end)
    doc.claimed.remove_inside(frame.start, frame.end)
    taken[:] = [item for item in taken if not inside(item[0].start, item[0].end)]
    left[:] = [item for item in left
               if item.reason == "parser_error" or not inside(item.start, item.end)]


def extract(
    text: str,
    tools: ToolSchemas,
    *,
    only: str | None = None,
    formats: Sequence[str] = ("auto",),
    truncated: bool = False,
    deliver_unknown: bool = True,
) -> Extraction:
    """Find the tool calls written as text in a model's output.

    `tools` maps the request's function names to their parameter schemas; a call to any
    other name stays text, and with `only` (a named `tool_choice`) so does any other call.
    `truncated` means the output was cut by `length`: frames missing their close stay text.
    A name written a little off one tool's is that tool's (names.py); a call to a name that
    matches none is taken as written when its frame has markers of its own and
    `deliver_unknown` (the agent can answer "no such tool"), else it stays text.

    A long text is read with the collector paused (see bulk_decode.collector_paused): what
    its decodes build is dropped by the time `_extract` returns, inside the pause.
    """
    if not text or not tools:
        return Extraction(content=text)
    if len(text) < PAUSE_FROM:  # (no context manager made for the many short texts)
        return _extract(text, tools, only, formats, truncated, deliver_unknown)
    with collector_paused(len(text)):
        return _extract(text, tools, only, formats, truncated, deliver_unknown)


def _extract(text: str, tools: ToolSchemas, only: str | None, formats: Sequence[str],
             truncated: bool, deliver_unknown: bool) -> Extraction:
    """extract's work, on a text and tools that are not empty."""
    names = tuple(formats)
    offered = frozenset(tools)
    doc = Document(text, resolved_markers(names), offered, tools, tool_names(offered))
    reading = Reading(tools, doc.names, only, truncated, deliver_unknown)
    claims = Spans()  # taken by earlier formats: a frame overlapping one is dropped
    taken: list[tuple[Frame, list[ToolCall]]] = []
    left: list[LeftAsText] = []
    # A format none of whose markers occurs cannot find a frame: not tried.
    for name, find_frames in runnable(names, doc.present):
        spans: list[tuple[int, int]] = []
        try:
            for frame in find_frames(doc):
                if claims.overlaps(frame.start, frame.end):
                    if not claims.encloses(frame.start, frame.end):
                        continue
                    _drop_enclosed(frame, claims, doc, taken, left)
                spans.append((frame.start, frame.end))
                doc.claimed.add(frame.start, frame.end)
                calls, refusals = read_frame(frame, reading, doc.loads_repaired,
                                             made_with_markers(frame, text))
                if calls:
                    taken.append((frame, calls))
                left.extend(LeftAsText(frame.format, frame.start, frame.end, refusal.reason,
                                       refusal.name or frame.name) for refusal in refusals)
        except Exception:  # a parser's bug must not fail the response: its text stays text
            left.append(LeftAsText(name, 0, len(text), "parser_error"))
        if spans:
            claims.add_all(spans)
    if doc.budget.exhausted:
        left.append(LeftAsText("*", 0, len(text), "scan_budget_exhausted"))
    if taken:
        taken = _kept_in_context(text, taken, left)
    if not taken:
        return Extraction(content=text, left_as_text=left, text=text)
    frames = [(frame.start, frame.end) for frame, _ in taken]
    left_out = [(start, end, "markup")
                for start, end in cleanup.around_calls(text, frames, left, truncated)]
    for name in dict.fromkeys(frame.format for frame, _ in taken):
        hook = CONTENT_MARKUP.get(name)
        if hook is not None:
            markup, reasoning = hook(text, frames)
            left_out += [(start, end, "markup") for start, end in markup]
            left_out += [(start, end, "reasoning") for start, end in reasoning]
    left_out.sort()
    joined = [_with_separator(text, span, TEXT_JOINED[frame.format])
              for span, (frame, _) in zip(frames, taken, strict=True)
              if frame.format in TEXT_JOINED]
    return Extraction(
        content=_without(text, frames + joined + [(start, end) for start, end, _ in left_out],
                         joined),
        calls=[call for _, calls in taken for call in calls],
        left_as_text=left,
        text=text,
        reasoning="\n".join(piece for start, end, kind in left_out
                            if kind == "reasoning" and (piece := text[start:end].strip())),
        left_out=left_out,
    )
