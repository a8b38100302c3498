"""StepFun Step-3 calls: `steptml` invokes inside DeepSeek-like call tokens.

    <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>get_weather
    <steptml:invoke name="get_weather"><steptml:parameter name="city">Tokyo</steptml:parameter>
    </steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>

(vLLM's `step3` parser; `function<｜tool_sep｜>NAME` before the invoke is optional, and calls
may be separated by `<｜tool_sep｜>`.) Values are text, coerced by the tool's schema. A call is
read only inside a `tool_calls_begin` section (right after it or the previous call).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.invoke import invoke_grammar, invoke_parameters
from ..framing.steps import OpenerMatches, unsure_frame
from ..opener_patterns import literals
from ..scan import Document
from ..text_values import Tail
from ..types import Frame
from .deepseek import CALLS_OPENER
from .spec import FormatSpec

NAME = "step3"
_GRAMMAR = invoke_grammar("steptml:", "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>")
MARKERS = ("<steptml:invoke",)
_BEGIN_MARKERS = ("tool_call_begin",)  # after `<｜` or `<|`


def _token(name: str) -> str:
    return r"<[｜|]" + name + r"[｜|]>"


_HEAD = re.compile(_token("tool_call_begin") + r"\s*+(?:function\s*+" + _token("tool_sep")
                   + r"\s*+(?:([^\s<>]{1,200}+)\s*+)?)?(?=<steptml:invoke\s)")
_SECTION_BEGIN = re.compile(_token("tool_calls_begin") + r"\s*+\Z")
_CALL_END = re.compile(r"\s*+" + _token("tool_call_end") + r"(?:\s*+" + _token("tool_sep") + ")?")
_SECTION_END = re.compile(r"\s*+" + _token("tool_calls_end"))


def _tail(doc: Document) -> Tail:
    """Where a call's frame ends after a value's close, when the invoke ends there: after
    `</steptml:invoke>`, its call-end token and the section's end if that follows; or at the
    end of the text."""
    text = doc.text

    def tail(pos: int) -> int | None:
        close = _GRAMMAR.invoke_close.match(text, pos)
        call_end = _CALL_END.match(text, close.end()) if close is not None else None
        if call_end is None:
            return pos if doc.skip_space(pos) >= len(text) else None
        section_end = _SECTION_END.match(text, call_end.end())
        return call_end.end() if section_end is None else section_end.end()
    return tail


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `tool_call_begin … steptml:invoke … tool_call_end` call inside a section."""
    text = doc.text
    tail = _tail(doc)
    openers = OpenerMatches(doc, _HEAD, _BEGIN_MARKERS, offset=2)
    for head in openers:
        start = head.start()
        cursor = openers.taken_to
        section = _SECTION_BEGIN.search(text, max(cursor, start - 40), start)
        if section is not None:
            start = section.start()
        elif not (cursor and doc.skip_space(cursor) == start):
            continue  # outside a section: a mention, not a call
        invoke = _GRAMMAR.invoke.match(text, head.end())
        if invoke is None:
            continue
        read = invoke_parameters(doc, _GRAMMAR, invoke.end(), tail)
        if read is None:
            return  # out of budget
        args, pos, complete, balanced = read
        if not (complete and balanced):
            yield unsure_frame(doc, NAME, start, invoke[1], complete)
            return
        refused = "unrecognised_shape" if head[1] not in (None, invoke[1]) else None
        close = _GRAMMAR.invoke_close.match(text, pos)
        call_end = _CALL_END.match(text, close.end()) if close is not None else None
        if call_end is not None:
            pos = call_end.end()
            section_end = _SECTION_END.match(text, pos)
            pos = section_end.end() if section_end is not None else pos
            yield Frame(NAME, start, pos, name=invoke[1], text_args=tuple(args),
                        refused=refused)
            openers.taken_to = pos
        elif doc.skip_space(close.end() if close is not None else pos) >= len(text):
            end = close.end() if close is not None else pos
            yield Frame(NAME, start, end, closed=False, name=invoke[1], text_args=tuple(args),
                        repairs=("missing_close_tag",), refused=refused)
            return
        # Anything else after the invoke: not a call we read; it stays text.


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(*literals("<steptml:invoke"), CALLS_OPENER),
    vllm=("step3",),
    sglang=("step3",),
    doctor_parser="step3",
)
