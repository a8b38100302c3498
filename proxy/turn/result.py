"""The turn's result as data: what the model answered once the proxy has normalised it
(content, reasoning, calls, how each choice finished, usage) and what was repaired and
refused on the way. Every front renders it in its own wire format; no name here is one
wire's (chat's `reasoning_field`, Anthropic's `stop_reason` are their fronts' choices)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..base.frozen import quick_init


@quick_init
@dataclass(frozen=True)
class Repair:
    """One repair applied, for logs and metrics."""

    format: str
    repair: str
    tool: str | None


@quick_init
@dataclass(frozen=True)
class TextLeft:
    """A frame that stayed text, and why (a call refused: unknown tool, not the chosen
    one, arguments that are no object, …)."""

    format: str
    reason: str
    tool: str | None


@quick_init
@dataclass(frozen=True)
class SchemaInvalid:
    """A call delivered whose arguments do not fit its tool's schema (after what could be
    coerced without doubt), and what does not fit: for logs, metrics and a constrained
    re-ask."""

    format: str
    tool: str
    problems: tuple[str, ...]
    call_id: str = ""  # the delivered call's (a call left out is not counted)


@dataclass
class Outcome:
    """What normalisation decided for one answer: calls, formats, repairs, what stayed
    text, the calls delivered that do not fit their schema, and each choice's finish before
    and after (filled in as the answer is read)."""

    tool_calls: int = 0
    formats: list[str] = field(default_factory=list)
    call_formats: list[str] = field(default_factory=list)  # one entry per emitted call
    repairs: list[Repair] = field(default_factory=list)
    left_as_text: list[TextLeft] = field(default_factory=list)
    schema_invalid: list[SchemaInvalid] = field(default_factory=list)
    finish_before: list[str | None] = field(default_factory=list)
    finish_after: list[str] = field(default_factory=list)


@quick_init
@dataclass(frozen=True)
class Call:
    """One tool call delivered: its id (`call_…`), the offered tool's name, its arguments
    (always a JSON object, as text, byte for byte what the client gets) and the format it
    was read from (`native`: the upstream's parser had it)."""

    id: str
    name: str
    arguments: str
    format: str = "native"


# How a choice finished, in the turn's own words (those of its upstream, a chat completion).
STOP = "stop"  # a natural end, or a stop string (`stop_sequence` names it)
LENGTH = "length"  # cut by the token limit
TOOL_CALLS = "tool_calls"  # ended with calls (whenever it holds any)
CONTENT_FILTER = "content_filter"


@quick_init
@dataclass(frozen=True)
class Choice:
    """One answer of the model: its visible text (`content`), its reasoning, its calls, how
    it finished (`finish`: `STOP`, `LENGTH`, `TOOL_CALLS`, or the upstream's own word),
    the stop string that ended it when upstream named one (`stop_sequence`), a refusal,
    and the token log-probabilities when they were asked (OpenAI's shape, cleaned)."""

    index: int
    content: str | None
    reasoning: str | None = None
    calls: tuple[Call, ...] = ()
    finish: str = STOP
    stop_sequence: str | None = None
    refusal: str | None = None
    logprobs: Mapping[str, Any] | None = None


@quick_init
@dataclass(frozen=True)
class Usage:
    """The tokens the turn used, as upstream counted them (None: not reported), with the
    details it gave (`cached_tokens`, `reasoning_tokens`, …)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_details: Mapping[str, int] = field(default_factory=dict)
    completion_details: Mapping[str, int] = field(default_factory=dict)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens read from the prefix cache (0 when not reported)."""
        return self.prompt_details.get("cached_tokens", 0)

    @property
    def reasoning_tokens(self) -> int:
        """Completion tokens spent on reasoning (0 when not reported)."""
        return self.completion_details.get("reasoning_tokens", 0)


@quick_init
@dataclass(frozen=True)
class TurnResult:
    """The turn's answer, ready for any front to render: the upstream's identity for it
    (`id`, `created`: None when upstream gave none, `model`, `system_fingerprint`,
    `service_tier`), its choices, its usage, and what normalisation repaired and refused
    (`outcome`)."""

    id: str | None
    created: int | None
    model: str
    choices: tuple[Choice, ...]
    usage: Usage | None = None
    system_fingerprint: str | None = None
    service_tier: str | None = None
    outcome: Outcome = field(default_factory=Outcome, compare=False)

    @property
    def first(self) -> Choice:
        """The first choice: the whole answer for APIs without `n` (Responses, Messages)."""
        return self.choices[0]

    def record(self) -> dict[str, Any]:
        """The result as JSON data (objects and lists: the log line's `sent` under
        `log_bodies`, which redaction walks like any body)."""
        data = dataclasses.asdict(self)
        del data["outcome"]
        record: dict[str, Any] = orjson.loads(orjson.dumps(data))
        return record


def first_calls_only(result: TurnResult) -> tuple[TurnResult, int]:
    """`parallel_tool_calls: false`: each choice keeps its first call only; the result (with
    an outcome of its own, its counts kept to the calls delivered), and how many calls were
    dropped."""
    dropped = sum(max(len(choice.calls) - 1, 0) for choice in result.choices)
    if not dropped:
        return result, 0
    choices = tuple(dataclasses.replace(choice, calls=choice.calls[:1])
                    for choice in result.choices)
    kept = {choice.calls[0].id for choice in choices if choice.calls}
    outcome = dataclasses.replace(
        result.outcome, tool_calls=result.outcome.tool_calls - dropped,
        call_formats=[choice.calls[0].format for choice in choices if choice.calls],
        schema_invalid=[s for s in result.outcome.schema_invalid if s.call_id in kept])
    return dataclasses.replace(result, choices=choices, outcome=outcome), dropped
