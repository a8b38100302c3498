"""The data that flows through the extraction engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.frozen import quick_init


@quick_init
@dataclass(frozen=True)
class Frame:
    """A span of model text that one format's parser believes holds tool call(s).

    A parser fills one of: `json_text` alone (a JSON call envelope `{"name", "arguments"}` or
    a list of them); `value` alone (such an envelope already decoded, e.g. from Python
    literals); `name` and `json_text` (the JSON arguments of call `name`); or `name` and
    `text_args` (parameters written as text, coerced later by the tool's schema). `listed`
    says the format natively writes several calls in one frame (not a repair when it does);
    `arguments_key` is the envelope key the format natively uses for arguments. A parser that
    recognises a frame it must not take sets `refused` to the reason, so the span stays text.
    """

    format: str
    start: int
    end: int
    closed: bool = True  # the format's closing marker was seen
    complete: bool = True  # the payload itself is whole (balanced JSON, closed parameters)
    json_text: str | None = None
    name: str | None = None
    text_args: tuple[tuple[str, str], ...] = ()
    repairs: tuple[str, ...] = ()
    listed: bool = False
    arguments_key: str = "arguments"
    refused: str | None = None
    value: Any = field(default=None, compare=False, repr=False)
    # A list of calls cut before its end: its whole leading call envelopes, read only when the
    # output was cut by `length` (the cut call is left out, the complete ones before it kept).
    head: Any = field(default=None, compare=False, repr=False)


@quick_init
@dataclass(frozen=True)
class ToolCall:
    """One extracted call: `arguments` is always a string holding a JSON object.

    `repairs` names what was done to read it, for logs and metrics: each repair applied,
    and `schema_budget_exhausted` when a text parameter's schema cost more than a value may
    and the value was kept as written, `schema_coerced` when a value was coerced to its
    schema's type (validity.py)."""

    name: str
    arguments: str
    format: str
    repairs: tuple[str, ...] = ()
    start: int = -1  # the span of the frame it came from, in the text given to extract()
    end: int = -1
    # What of its arguments does not fit the tool's schema (see validity.py; empty: valid).
    schema_problems: tuple[str, ...] = ()


@quick_init
@dataclass(frozen=True)
class Refusal:
    """Why a frame, or one call in it, is not taken for a call: returned as a value (the
    engine reads frames into calls and refusals), never raised."""

    reason: str
    name: str | None = None  # the tool the refused call names, when it names one


@quick_init
@dataclass(frozen=True)
class LeftAsText:
    """A frame that was not taken for a call, and why."""

    format: str
    start: int
    end: int
    reason: str
    name: str | None = None


@dataclass
class Extraction:
    """The result of reading one model output for tool calls: `content` is the text the
    model wrote for the user, without the frames taken, the markup around them, nor the
    reasoning found beside them."""

    content: str
    calls: list[ToolCall] = field(default_factory=list)
    left_as_text: list[LeftAsText] = field(default_factory=list)

    text: str = ""  # the text given to extract(), which the calls' spans index
    # The model's reasoning found around the calls (Harmony's analysis channel), for the
    # reasoning field; and the spans of text left out of `content` besides the frames:
    # (start, end, "markup" or "reasoning").
    reasoning: str = ""
    left_out: list[tuple[int, int, str]] = field(default_factory=list)

    def between(self, start: int, end: int) -> bool:
        """Whether the text between two frames holds anything but space."""
        return bool(self.text[start:end].strip())

    @property
    def formats(self) -> list[str]:
        """The formats of the extracted calls, in order, without repeats."""
        return list(dict.fromkeys(call.format for call in self.calls))


ToolSchemas = dict[str, dict[str, Any]]
"""The request's tools: function name → its JSON-schema `parameters` (may be empty)."""
