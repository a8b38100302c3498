"""Upstream chat completion → the turn's typed result (`TurnResult`), calls extracted and
repaired, and what was repaired and refused.

Only what OpenAI's schema has is read: whatever a server adds (vLLM's `prompt_logprobs`,
`kv_transfer_params`, `token_ids`, …) never reaches a client. One fact beyond it is kept for
the fronts to render or not: vLLM's `stop_reason` when it names the stop string that ended a
choice (`Choice.stop_sequence`: the Messages front tells a stop sequence from a natural end
by it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..base import text_search
from ..base.frozen import quick_init
from ..base.ids import random_alnum
from ..toolcalls import Extraction, ToolCall, ToolSchemas, extract
from ..toolcalls.exact_json import has_long_digit_run
from ..toolcalls.exact_json import loads as exact_loads
from ..toolcalls.names import NAME_MATCHED, UNKNOWN_TOOL, ToolNames
from ..toolcalls.prose.answer import plain_answer
from ..toolcalls.repair import NotJson, loads_repaired
from ..toolcalls.validity import SCHEMA_COERCED, check
from .result import (
    STOP,
    TOOL_CALLS,
    Call,
    Choice,
    Outcome,
    Repair,
    SchemaInvalid,
    TextLeft,
    TurnResult,
    Usage,
)
from .thinking import LONE_CLOSE_RULE, ThinkingRule, answer_thinking

_PROMPT_DETAILS = ("cached_tokens", "audio_tokens")
_COMPLETION_DETAILS = ("reasoning_tokens", "audio_tokens", "accepted_prediction_tokens",
                       "rejected_prediction_tokens")
# Thinking written into the content by templates without a reasoning parser: `<think>`, and
# Seed-OSS's `<seed:think>`.
_THINK_TAGS = (("<think>", "</think>"), ("<seed:think>", "</seed:think>"))
_THINK_OPEN_AT_START = re.compile(r"\s*+<(think|seed:think)>")


class UpstreamShapeError(ValueError):
    """The upstream answered 200 with something that is not a chat completion."""


@quick_init
@dataclass(frozen=True)
class ExtractionSettings:
    """How calls written as text are looked for in this request."""

    tools: ToolSchemas
    only: str | None = None
    formats: Sequence[str] = ("auto",)
    # Whether the client sees the reasoning at all (`Choice.reasoning`, else None): yes, unless
    # a front says otherwise (chat, whose `reasoning_field` may drop it; how a wire names the
    # reasoning is its front's alone).
    reasoning_shown: bool = True
    # A leading think block in the content is the reasoning (see `turn.thinking`), and how
    # text before a lone closer is read (`thinking_opened_by_template`).
    reasoning_from_content: bool = True
    # A call the model plainly made to a name that matches no tool is delivered as written
    # (`unknown_tool_calls: deliver`); False keeps it out (native) or as text.
    deliver_unknown: bool = True
    thinking: ThinkingRule = LONE_CLOSE_RULE


def mint_call_id(taken: set[str]) -> str:
    """`call_` + 24 random letters and digits, unique in its last 9 characters among `taken`."""
    while True:
        call_id = "call_" + random_alnum(24)
        if call_id[-9:] not in taken:
            taken.add(call_id[-9:])
            return call_id


def _count(value: Any) -> bool:
    """Whether `value` is a token count: an integer (a JSON `true` is none)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _usage_of(usage: Any) -> Usage | None:
    """The upstream's usage, its integer counts and the details OpenAI's schema has."""
    if not isinstance(usage, dict):
        return None
    counts = {key: usage[key] for key in ("prompt_tokens", "completion_tokens", "total_tokens")
              if _count(usage.get(key))}
    details = []
    for key, allowed in (("prompt_tokens_details", _PROMPT_DETAILS),
                         ("completion_tokens_details", _COMPLETION_DETAILS)):
        found = usage.get(key)
        details.append({k: v for k, v in found.items() if k in allowed and _count(v)}
                       if isinstance(found, dict) else {})
    return Usage(**counts, prompt_details=details[0], completion_details=details[1])


def _object_text(value: Any, repair: str) -> tuple[str | None, str | None]:
    """A decoded object written back as JSON text, with the repair that needed it; or no
    text and why, when orjson cannot write it (nested past the 254 levels it writes): then
    no call is made of it, as the extraction engine does with such a value written as text."""
    try:
        return orjson.dumps(value).decode(), repair
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None, "unserialisable_arguments"


def _native_arguments(raw: Any) -> tuple[str | None, str | None, Any]:
    """A parsed call's arguments as a JSON-object string, and the repair applied (if any);
    no string when they are not an object, and then (if known) why. Third: the object that
    string was read as, when it came as it was written (None: to be read)."""
    if isinstance(raw, dict):
        return (*_object_text(raw, "arguments_as_object"), None)
    if raw is None or (isinstance(raw, str) and raw.strip() in ("", "null")):
        return "{}", "empty_arguments", None
    if not isinstance(raw, str):
        return None, None, None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            value, _ = loads_repaired(raw)
        except NotJson:
            return None, None, None
        if isinstance(value, dict):
            return (*_object_text(value, "invalid_json_arguments"), None)
    if isinstance(value, dict):
        return raw, None, value
    if isinstance(value, str):  # double-encoded: a JSON string holding the object
        try:
            inner, _ = loads_repaired(value)  # big integers kept exact, as everywhere
        except NotJson:
            return None, None, None
        if isinstance(inner, dict):
            return (*_object_text(inner, "double_encoded_arguments"), None)
    return None, None, None


def _native_name(name: str, settings: ExtractionSettings, names: ToolNames,
                 outcome: Outcome) -> str | None:
    """The name a parsed call is delivered under: the offered tool it matches (a name
    written a little off is repaired), or, when it matches none, the name as written
    (`deliver_unknown`, logged as `unknown_tool`); None when the call is left out (not the
    function a named `tool_choice` asks for, or unknown under the strict rule)."""
    match = names.match(name)
    if match is not None and match.repaired:
        outcome.repairs.append(Repair("native", NAME_MATCHED, match.name))
    if match is None and (settings.only is not None or not settings.deliver_unknown
                          or not ToolNames.plausible(name)):
        outcome.left_as_text.append(TextLeft("native", UNKNOWN_TOOL, name))
        return None
    if match is None:
        outcome.repairs.append(Repair("native", UNKNOWN_TOOL, name))
        return name
    if settings.only is not None and match.name != settings.only:
        outcome.left_as_text.append(TextLeft("native", "not_the_chosen_tool", match.name))
        return None
    return match.name


def _native_calls(calls: Any, finish: str | None, settings: ExtractionSettings,
                  outcome: Outcome, taken_ids: set[str]) -> list[Call]:
    """Tool calls the upstream already parsed, with arguments made JSON-object strings;
    names checked as _native_name says (as they would be if the model had written the call
    as text)."""
    kept: list[Call] = []
    if not isinstance(calls, list) or not calls:
        return kept  # (the usual answer: no call parsed, no names to look up)
    names = ToolNames(settings.tools)
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(function, dict) or not isinstance(name, str) or not name:
            outcome.left_as_text.append(TextLeft("native", "call_without_name", None))
            continue
        name = _native_name(name, settings, names, outcome)
        if name is None:
            continue
        arguments, repair, value = _native_arguments(function.get("arguments"))
        if arguments is None:
            reason = ("cut_by_length" if finish == "length"
                      else repair or "arguments_not_object")
            outcome.left_as_text.append(TextLeft("native", reason, name))
            continue
        if repair:
            outcome.repairs.append(Repair("native", repair, name))
        arguments, problems = _schema_checked(name, arguments, settings, outcome, value)
        call_id = call.get("id")
        if isinstance(call_id, str) and call_id and call_id[-9:] not in taken_ids:
            taken_ids.add(call_id[-9:])
        else:
            call_id = mint_call_id(taken_ids)
        if problems:
            outcome.schema_invalid.append(SchemaInvalid("native", name, problems, call_id))
        kept.append(Call(call_id, name, arguments))
    return kept


def _schema_checked(name: str, arguments: str, settings: ExtractionSettings,
                    outcome: Outcome, read: Any = None) -> tuple[str, tuple[str, ...]]:
    """A parsed call's arguments (a JSON object's text; `read`: what it was read as, if it
    was) checked against its tool's schema (toolcalls.validity): coerced where that is
    without doubt (then written again, the repair recorded in `outcome`), and what still
    does not fit. The text is read once: again only when it holds an integer orjson may
    have read as a float (`exact_loads` keeps it exact)."""
    parameters = settings.tools.get(name)
    if not parameters:
        return arguments, ()
    if read is not None and not has_long_digit_run(arguments):
        value = read
    else:
        try:
            value = exact_loads(arguments)
        except orjson.JSONDecodeError:
            return arguments, ()
    validity = check(value, parameters)
    if not validity.coerced:
        return arguments, validity.problems
    outcome.repairs.append(Repair("native", SCHEMA_COERCED, name))
    return orjson.dumps(validity.arguments).decode(), validity.problems


def split_thinking(content: str) -> tuple[str, tuple[int, int] | None, str]:
    """(everything up to the end of the thinking, the thinking's span, the visible rest).

    Thinking is a `<think>…</think>` (or `<seed:think>…</seed:think>`) block at the start of
    the content, or everything before a lone closing tag (templates that open the block in
    the prompt). An unclosed opening tag at the start makes the whole content thinking.
    """
    opening = _THINK_OPEN_AT_START.match(content)
    body_start = opening.end() if opening else 0
    for think_open, think_close in _THINK_TAGS:
        if opening is not None and opening[1] != think_open[1:-1]:
            continue
        close = text_search.find(content, think_close, body_start)  # from its `<`
        if close < 0:
            continue
        if opening is None and think_open in content[:close]:
            return "", None, content  # a <think> in the middle of the text: not the thinking
        end = close + len(think_close)
        return content[:end], (body_start, close), content[end:].lstrip()
    if opening is None:
        return "", None, content
    return content, (body_start, len(content)), ""


def _split_outside_calls(content: str, settings: ExtractionSettings, finish: str | None,
                         ) -> tuple[str, tuple[int, int] | None, str]:
    """split_thinking, unless the closing tag it splits at stands inside a call written in
    the content (a value whose text says `</think>`, a call's frame delimiting it): then
    there is no thinking to split off, and the call is read whole."""
    head, think, tail = split_thinking(content)
    if think is None or not head or think[1] >= len(content):
        return head, think, tail
    found = extract(content, settings.tools, only=settings.only, formats=settings.formats,
                    truncated=finish == "length", deliver_unknown=settings.deliver_unknown)
    if any(call.start < think[1] < call.end for call in found.calls):
        return "", None, content
    return head, think, tail


def _joined(*texts: str | None) -> str:
    """Texts one after another, a line apart (the empty ones left out)."""
    return "\n".join(text for text in texts if text)


def _extract(text: str, settings: ExtractionSettings, finish: str | None,
             outcome: Outcome, reasoning: bool = False) -> Extraction:
    """Calls written as text in `text`; what stayed text is recorded in `outcome`. A call
    recovered from the reasoning (`reasoning`) must name an offered tool."""
    found = extract(text, settings.tools, only=settings.only, formats=settings.formats,
                    truncated=finish == "length",
                    deliver_unknown=settings.deliver_unknown and not reasoning)
    for left in found.left_as_text:
        outcome.left_as_text.append(TextLeft(left.format, left.reason, left.name))
    return found


def _last_block(found: Extraction) -> list[ToolCall]:
    """The calls of the last run of frames with nothing but space between them: the model's
    final decision, not the drafts it revised on the way ("… hmm no, Rome: <tool_call>…")."""
    block: list[ToolCall] = []
    for call in found.calls:
        if block and call.start != block[-1].start and found.between(block[-1].end, call.start):
            block = []
        block.append(call)
    return block


def _add_calls(calls: list[Call], found: Extraction, outcome: Outcome,
               taken_ids: set[str], from_reasoning: bool = False) -> None:
    """Append the extracted calls, recording formats and repairs."""
    seen = set()
    for call in _last_block(found) if from_reasoning else found.calls:
        if from_reasoning:
            if (call.name, call.arguments) in seen:
                continue  # a call drafted twice in the reasoning is still one call
            seen.add((call.name, call.arguments))
            outcome.repairs.append(Repair(call.format, "from_reasoning", call.name))
        calls.append(Call(mint_call_id(taken_ids), call.name, call.arguments, call.format))
        outcome.repairs.extend(Repair(call.format, r, call.name) for r in call.repairs)
        if call.schema_problems:
            outcome.schema_invalid.append(SchemaInvalid(call.format, call.name,
                                                        call.schema_problems, calls[-1].id))
        outcome.call_formats.append(call.format)
    outcome.formats.extend(f for f in found.formats if f not in outcome.formats)


def _without_framing(content: str | None, reasoning: str | None,
                     settings: ExtractionSettings, outcome: Outcome,
                     ) -> tuple[str | None, str | None]:
    """The content without the tokens that frame an answer in the configured formats
    (Harmony's headers, Command's response pair, …), and the reasoning they held joined."""
    if not (content and settings.tools and settings.formats):
        return content, reasoning
    answer, framed = plain_answer(content, settings.formats)
    if answer == content and not framed:
        return content, reasoning
    outcome.repairs.append(Repair("content", "answer_markup", None))
    return answer, _joined(reasoning, framed) or reasoning


def _normalize_choice(choice: Any, position: int, settings: ExtractionSettings,
                      outcome: Outcome, taken_ids: set[str]) -> Choice:
    """One upstream choice as the turn's: thinking moved to the reasoning, calls read
    (parsed by upstream, or written as text) and checked, the finish corrected."""
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise UpstreamShapeError("a choice without a message")
    message = choice["message"]
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    content = message.get("content")
    content = content if isinstance(content, str) else None
    reasoning = message.get("reasoning_content")
    if not isinstance(reasoning, str):
        reasoning = message.get("reasoning") if isinstance(message.get("reasoning"), str) else None
    if settings.reasoning_from_content and content and not reasoning:
        thinking = answer_thinking(content, settings.thinking, finish)
        if thinking is not None:
            reasoning, content, how = thinking
            outcome.repairs.append(Repair("content", how, None))

    calls = _native_calls(message.get("tool_calls"), finish, settings, outcome, taken_ids)
    if calls:
        outcome.formats.append("native")
        outcome.call_formats.extend("native" for _ in calls)
    elif content and settings.tools:
        head, think, tail = _split_outside_calls(content, settings, finish)
        found = _extract(tail, settings, finish, outcome)
        if found.calls:
            content = head + ("\n\n" if head and found.content else "") + found.content
            reasoning = _joined(reasoning, found.reasoning) or reasoning
            _add_calls(calls, found, outcome, taken_ids)
        elif not tail.strip() and think is not None and finish != "length":
            # Nothing visible (no call, no answer): a call written in the thinking is recovered.
            found = _extract(content[think[0]:think[1]], settings, finish, outcome, True)
            if found.calls:
                content = (content[:think[0]] + _joined(found.reasoning, found.content)
                           + content[think[1]:])
                _add_calls(calls, found, outcome, taken_ids, from_reasoning=True)
    content, reasoning = _without_framing(content, reasoning, settings, outcome)
    if (not calls and reasoning and settings.tools and finish != "length"
            and not (content and split_thinking(content)[2].strip())):
        # Nothing visible and no call: one written in the reasoning field is recovered, once.
        found = _extract(reasoning, settings, finish, outcome, True)
        if found.calls:
            reasoning = _joined(found.reasoning, found.content)
            _add_calls(calls, found, outcome, taken_ids, from_reasoning=True)

    if calls:
        new_finish = TOOL_CALLS
        if content == "":
            content = None
    else:
        new_finish = STOP if finish in (None, TOOL_CALLS) else finish
    outcome.tool_calls += len(calls)
    outcome.finish_before.append(finish)
    outcome.finish_after.append(new_finish)

    index = choice.get("index")
    refusal = message.get("refusal")
    stop_string = choice.get("stop_reason")  # vLLM's: the stop string that ended it
    return Choice(index if isinstance(index, int) else position, content,
                  reasoning if settings.reasoning_shown else None, tuple(calls), new_finish,
                  stop_string if isinstance(stop_string, str) else None,
                  refusal if isinstance(refusal, str) else None,
                  _clean_logprobs(choice.get("logprobs")))


def _clean_tokens(tokens: Any, top: bool = True) -> list[dict[str, Any]] | None:
    """Token log-probabilities with only OpenAI's fields (vLLM adds its own), each of its
    type or null (a value of another shape, nested deep, would not be written back)."""
    if not isinstance(tokens, list):
        return None
    clean = []
    for item in tokens:
        if not isinstance(item, dict):
            continue
        token, logprob, raw = item.get("token"), item.get("logprob"), item.get("bytes")
        entry = {"token": token if isinstance(token, str) else None,
                 "logprob": logprob if isinstance(logprob, (int, float)) else None,
                 "bytes": raw if isinstance(raw, list) and all(
                     isinstance(b, int) for b in raw) else None}
        if top:
            entry["top_logprobs"] = _clean_tokens(item.get("top_logprobs"), top=False) or []
        clean.append(entry)
    return clean


def _clean_logprobs(logprobs: Any) -> dict[str, Any] | None:
    """A choice's `logprobs` as OpenAI's schema has it: `content` and `refusal` lists."""
    if not isinstance(logprobs, dict):
        return None
    return {"content": _clean_tokens(logprobs.get("content")),
            "refusal": _clean_tokens(logprobs.get("refusal"))}


def normalize(upstream: Any, settings: ExtractionSettings) -> TurnResult:
    """The turn's result for an upstream chat completion (UpstreamShapeError when it is
    not one), with what was repaired and refused in its `outcome`."""
    if not isinstance(upstream, dict):
        raise UpstreamShapeError("the body is not a JSON object")
    choices = upstream.get("choices")
    if not isinstance(choices, list) or not choices:
        raise UpstreamShapeError("no choices")
    outcome = Outcome()
    taken_ids: set[str] = set()
    # A choice left empty because a call was left out is still an answer (a 200): the
    # client sees the turn end, never an error it would retry (issue 26, item 6).
    read = tuple(_normalize_choice(choice, i, settings, outcome, taken_ids)
                 for i, choice in enumerate(choices))
    answer_id, created, model = (upstream.get(key) for key in ("id", "created", "model"))
    fingerprint, tier = upstream.get("system_fingerprint"), upstream.get("service_tier")
    return TurnResult(
        answer_id if isinstance(answer_id, str) else None,
        created if _count(created) else None,
        model if isinstance(model, str) else "",
        read, _usage_of(upstream.get("usage")),
        fingerprint if isinstance(fingerprint, str) else None,
        tier if isinstance(tier, str) else None, outcome)
