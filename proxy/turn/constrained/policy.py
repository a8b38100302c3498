"""When a turn asks upstream once more, and how: a small state machine over the core's
decisions, `step(state, decision) -> (state, Next)`.

A constrained re-ask is for what the model did not write, never to make it write what it
left out: a grammar that forces a missing argument makes the model invent one. So a call the
model wrote whole on a turn that did not demand one is delivered as written, off its schema
or not (counted `schema_invalid`; the agent's own validation tells the model), and asked
again only where (a) the client demanded a call (`tool_choice`) that did not come or does
not fit its schema, or (b) a marked frame's text cannot be read at all (`unreadable`).

    first decision                       next
    Answer, a frame unread (setting      ReAsk(unreadable, dialect) for the tool the frame
      `demanded+unreadable`): a marked   names (any, one call, when its name is unread),
      frame whose arguments cannot be    the answer kept as fallback
      read, no call taken, not gone
      out live (`held`)
    Answer, demanded, a call off its     ReAsk(demanded, dialect), the answer kept as
      schema (setting not `off`)         fallback
    Answer                               deliver it (a call off its schema: as written)
    Failure ask_again (demanded unmet)   ReAsk(demanded, dialect) where a dialect carries it,
                                         else ReAsk(demanded, unconstrained) while
                                         `required_call_retries` last (today's retry)
    after a constrained re-ask
    refused (4xx naming the field)       the field remembered (Next.refused); the fallback
                                         where there is one, else (demanded unmet) today's
                                         unconstrained retry
    Answer with calls                    delivered, each call repaired `constrained`
    Answer without                       the fallback, as today
    Failure ask_again (still unmet)      the fallback, else today's 502
                                         tool_call_required_unmet
    any other Failure                    the fallback, else that failure

One constrained re-ask at most per turn: no storms. The turn machine (`turn.machine.asks`)
builds the re-ask's body (`dialects.constrained_body`) and tells the decisions; the shell
only sends it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...base.frozen import quick_init
from ...toolcalls.registry import SPECS
from ..core import Answer, Decision, Failure, required_call_unmet
from ..result import Repair
from .dialects import Dialect, refused_field

OFF = "off"
DEMANDED = "demanded"
UNREADABLE = "unreadable"
SETTINGS = (OFF, DEMANDED, f"{DEMANDED}+{UNREADABLE}")  # `constrained_reask`, per model
FORMER = {"demanded+botched": SETTINGS[2]}  # a setting's former name, read as the new one
CONSTRAINED = "constrained"  # the repair a constrained re-ask's calls carry

# Why a frame stayed text when its text cannot be read as a call's arguments, so that
# another generation constrained to its tool would read: not its length (`cut_by_length`),
# and not a call written whole without arguments (`missing_arguments`: constrained, the
# model would have to invent every one).
UNREADABLE_REASONS = frozenset({
    "arguments_not_json", "arguments_not_object", "invalid_json", "incomplete_frame",
    "schema_not_arguments", "ambiguous_value", "unrecognised_shape",
})

# The formats whose frames carry markers of their own (a frame of one is plainly a call).
MARKED = frozenset(spec.name for spec in SPECS if spec.markers)


@quick_init
@dataclass(frozen=True)
class ReAsk:
    """What the next upstream call asks: why (`demanded`, `unreadable`), in which dialect
    (None: unconstrained, today's retry), and for an unreadable frame, its tool (None: its
    name was not read either; any tool, one call)."""

    reason: str
    dialect: Dialect | None = None
    tool: str | None = None

    @property
    def label(self) -> str:
        """`reason:dialect` for logs and metrics (`unconstrained` without one)."""
        return f"{self.reason}:{self.dialect.name if self.dialect else 'unconstrained'}"


# Given why and (unreadable) for which tool: the dialect the upstream takes for it, or None.
Chooser = Callable[[str, "str | None"], "Dialect | None"]


@dataclass(frozen=True)
class Asking:
    """The state: the setting, the unconstrained retries a demanded call may have, whether
    the turn demands a call (`tool_choice`), the re-asks made, and the answer a re-ask falls
    back to (one that held a frame unread, or a demanded call off its schema)."""

    setting: str = SETTINGS[2]
    retries: int = 1
    demanded: bool = False
    asked: tuple[ReAsk, ...] = ()
    fallback: Answer | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "setting", FORMER.get(self.setting, self.setting))

    @property
    def last(self) -> ReAsk | None:
        """The re-ask whose answer is being decided (None: the first answer)."""
        return self.asked[-1] if self.asked else None


@quick_init
@dataclass(frozen=True)
class Next:
    """What the waiting machine is told (`decision`: a Failure with `ask_again` when `ask`
    is set), the next call's re-ask, and a field the upstream refused (to remember)."""

    decision: Decision
    ask: ReAsk | None = None
    refused: str | None = None


def budget(setting: str, retries: int, demanded: bool) -> int:
    """How many further upstream calls a turn may make for its calls (the waiting machine's
    bound; this machine decides which): a constrained re-ask and, refused, the retries."""
    setting = FORMER.get(setting, setting)
    if setting == OFF:
        return retries if demanded else 0
    if demanded:
        return 1 + retries
    return 1 if setting == SETTINGS[2] else 0


def unreadable_tool(answer: Answer, tools: Mapping[str, Any]) -> str | bool:
    """The offered tool of a frame the model clearly began but whose text cannot be read,
    when the answer took no call and was not cut by length: a frame of a format with markers
    (or naming an offered tool) refused for its arguments' text; True where the frame's name
    could not be read either (any tool, then); False: nothing unreadable. A call taken, off
    its schema or not, is never this: the model wrote it whole."""
    outcome = answer.outcome
    if "length" in outcome.finish_before or outcome.tool_calls:
        return False
    for left in outcome.left_as_text:
        if left.reason not in UNREADABLE_REASONS:
            continue
        if left.tool is not None and left.tool in tools:
            return left.tool
        if left.tool is None and left.format in MARKED:
            return True
    return False


def off_schema(answer: Answer) -> bool:
    """Whether a call the answer delivers does not fit its tool's schema."""
    return bool(answer.outcome.schema_invalid)


def step(state: Asking, decision: Decision, choose: Chooser,
         tools: Mapping[str, Any], held: bool = True) -> tuple[Asking, Next]:
    """The next state, and what to tell the waiting machine, for the core's `decision`.
    `held`: whatever of the answer could be a call has not gone out (always, buffered; in
    the streamed mode, while the hold-back still keeps some content): an answer is asked
    again only then, as text a client has shown cannot be taken back."""
    last = state.last
    if last is not None and last.dialect is not None:
        return _after_constrained(state, last, last.dialect, decision)
    if isinstance(decision, Answer):
        ask = _reask_of(state, decision, choose, tools) if held and last is None else None
        if ask is None:
            return state, Next(decision)
        return _ask(state, ask, decision, fallback=decision)
    if not decision.ask_again:
        return state, Next(_final(state, decision))
    if last is None and state.setting != OFF:
        dialect = choose(DEMANDED, None)
        if dialect is not None:
            return _ask(state, ReAsk(DEMANDED, dialect), decision)
    return _retry_or_fail(state, decision)


def _reask_of(state: Asking, answer: Answer, choose: Chooser,
              tools: Mapping[str, Any]) -> ReAsk | None:
    """The constrained re-ask a first answer calls for (None: deliver it): a demanded call
    off its schema, under the demand's constraint; an unreadable frame, constrained to the
    tool it names."""
    if state.setting == OFF:
        return None
    if state.demanded and off_schema(answer):
        dialect = choose(DEMANDED, None)
        return None if dialect is None else ReAsk(DEMANDED, dialect)
    if state.setting != SETTINGS[2]:
        return None
    found = unreadable_tool(answer, tools)
    if found is False:
        return None
    tool = found if isinstance(found, str) else None
    dialect = choose(UNREADABLE, tool)
    return None if dialect is None else ReAsk(UNREADABLE, dialect, tool)


def _after_constrained(state: Asking, last: ReAsk, dialect: Dialect,
                       decision: Decision) -> tuple[Asking, Next]:
    """The answer to a constrained re-ask."""
    if isinstance(decision, Answer):
        if decision.outcome.tool_calls:
            return state, Next(constrained(decision))
        return state, Next(state.fallback or decision)
    status = decision.upstream_status
    if status is not None and refused_field(status, decision.received, dialect):
        if last.reason == DEMANDED and state.fallback is None:
            state, then = _retry_or_fail(state, decision)
            return state, dataclasses.replace(then, refused=dialect.field)
        return state, Next(_final(state, decision), refused=dialect.field)
    if last.reason == DEMANDED and decision.ask_again and state.fallback is None:
        return state, Next(_unmet(state, decision))
    return state, Next(_final(state, decision))


def _retry_or_fail(state: Asking, decision: Decision) -> tuple[Asking, Next]:
    """Today's unconstrained retry while `retries` last, then the 502."""
    unconstrained = sum(1 for ask in state.asked if ask.dialect is None)
    if unconstrained < state.retries:
        return _ask(state, ReAsk(DEMANDED), decision)
    return state, Next(_unmet(state, decision))


def _ask(state: Asking, ask: ReAsk, decision: Decision,
         fallback: Answer | None = None) -> tuple[Asking, Next]:
    state = dataclasses.replace(state, asked=(*state.asked, ask),
                                fallback=fallback or state.fallback)
    outcome = decision.outcome
    failure = Failure(required_call_unmet(0), outcome, decision.notes,
                      decision.upstream_status, decision.received, ask_again=True)
    return state, Next(failure, ask)


def _unmet(state: Asking, decision: Decision) -> Failure:
    """The 502 of a demanded call that no answer held (counting every generation)."""
    generations = 1 + sum(1 for ask in state.asked if ask.reason == DEMANDED)
    return Failure(required_call_unmet(generations - 1), decision.outcome, decision.notes,
                   decision.upstream_status, decision.received)


def _final(state: Asking, decision: Decision) -> Decision:
    """A decision nothing more is asked for: the first answer where one was kept."""
    if state.fallback is not None:
        return state.fallback
    if isinstance(decision, Failure) and decision.ask_again:
        return dataclasses.replace(decision, ask_again=False)
    return decision


def constrained(answer: Answer) -> Answer:
    """`answer` with each of its calls recorded as repaired `constrained`."""
    repairs = [Repair(call.format, CONSTRAINED, call.name)
               for choice in answer.result.choices for call in choice.calls]
    outcome = dataclasses.replace(answer.outcome, repairs=[*answer.outcome.repairs, *repairs])
    result = dataclasses.replace(answer.result, outcome=outcome)
    return dataclasses.replace(answer, result=result)
