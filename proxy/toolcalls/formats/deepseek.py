"""DeepSeek V3 / R1 and V3.1 calls, written with full-width special tokens.

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {...}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>                                 (V3, R1)
    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>…  (V3.1)
    <｜tool▁calls｜>function<｜tool▁sep｜>NAME
    ```json
    {...}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>               (R1 distills, as llama.cpp reads them)

The tokens are also accepted with ASCII `|` and `_`, as some quantised builds and detokenisers
write them; the section opener also as R1's distills write it (`<｜tool▁calls｜>`,
`<｜tool calls begin｜>`, `<｜tool\\_calls\\_begin｜>`). A call without its own
`tool▁call▁begin` is read only right after the section opener or the previous call's end, and
only with its `tool▁call▁end`. The section markers go with the first and last call.

The text around a section is kept as written and joined (`text_joined`): vLLM's
`deepseek_v3`/`deepseek_v31` answer the text before the section as written
(`model_output[:start]`), SGLang's `deepseekv3` detector streams the text after it as written
too (`Let me look.<section>\n\nDone.` gives `Let me look.\n\nDone.`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.steps import OpenerMatches, section_call_end
from ..opener_patterns import Opener, alt, seq
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "deepseek"
_BEGIN_MARKERS = ("tool▁call▁begin", "tool_call_begin")  # a call's own opener
MARKERS = (*_BEGIN_MARKERS,
           "tool▁calls", "tool_calls_begin", "｜tool calls begin", "tool\\_calls\\_begin")


def _token(words: str) -> str:
    return "<[｜|]" + "[▁_]".join(words.split()) + "[｜|]>"


_MARK = re.compile(_token("tool call begin"))
_SEP = _token("tool sep")
_NAME = r"([^\s<>｜|{}\[\]`]{1,200}+)"
_HEAD = re.compile(
    _token("tool call begin")
    + r"\s*+(?:function\s*+" + _SEP + r"\s*+" + _NAME + r"\s*+```(?:json)?[ \t]*+\n?"  # V3
    + r"|" + _NAME + r"\s*+" + _SEP + r")\s*+(?=[{\[])"  # V3.1
)
_FENCE_END = re.compile(r"\s*+```")
_CALL_END = re.compile(r"\s*+" + _token("tool call end"))
# The section opener, as DeepSeek writes it and as R1's distills do (llama.cpp's list).
_SECTION_OPEN = r"<[｜|]tool(?:[▁_ ]|\\_)calls(?:(?:[▁_ ]|\\_)begin)?[｜|]>"
_SECTION_BEGIN = re.compile(_SECTION_OPEN + r"\s*+\Z")
# A call without its own begin token: only after the section opener or the previous call's end.
_BARE_HEAD = re.compile(r"function\s*+" + _SEP + r"\s*+" + _NAME
                        + r"\s*+```(?:json)?[ \t]*+\n?\s*+(?=[{\[])")
_BARE_AFTER = re.compile(r"(?:(" + _SECTION_OPEN + r")|" + _token("tool call end") + r")\s*+\Z")
_SECTION_END = re.compile(r"\s*+" + _token("tool calls end"))


def _calls_without_begin_token(doc: Document) -> Iterator[Frame]:
    """Calls written without their `tool▁call▁begin`, inside a section."""
    text = doc.text
    openers = OpenerMatches(doc, _BARE_HEAD, "function")
    for match in openers:
        start = match.start()
        before = _BARE_AFTER.search(text, max(0, start - 40), start)
        if before is None:
            continue  # not inside a section: prose, or another format
        if before[1] is not None and before.start() >= openers.taken_to:
            start = before.start()  # the section opener goes with its first call
        body = match.end()
        end = doc.json_end(body)
        fence = _FENCE_END.match(text, end) if end is not None else None
        call_end = _CALL_END.match(text, fence.end()) if fence is not None else None
        if call_end is None:
            continue  # without its begin token, a call needs all of its end
        pos = call_end.end()
        section_end = _SECTION_END.match(text, pos)
        if section_end is not None:
            pos = section_end.end()
        yield Frame(NAME, start, pos, name=match[1], json_text=text[body:end])
        openers.taken_to = pos


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `tool▁call▁begin … tool▁call▁end` call, then the calls written without it."""
    yield from _calls_with_begin_token(doc)
    yield from _calls_without_begin_token(doc)


def _calls_with_begin_token(doc: Document) -> Iterator[Frame]:
    """Each `tool▁call▁begin … tool▁call▁end` call with its JSON arguments."""
    text = doc.text
    openers = OpenerMatches(doc, _HEAD, _BEGIN_MARKERS, offset=2)  # after `<｜` or `<|`
    for match in openers:
        start = match.start()
        section = _SECTION_BEGIN.search(text, max(openers.taken_to, start - 40), start)
        if section is not None:
            start = section.start()
        name = match[1] or match[2]
        body = match.end()
        end = doc.json_end(body)
        if end is None:
            following = _MARK.search(text, body)
            stop = len(text) if following is None else following.start()
            yield Frame(NAME, start, stop, closed=False, complete=False, name=name)
            openers.taken_to = stop
            continue
        pos = end
        if match[1] is not None:  # V3: the JSON sits in a code fence
            fence = _FENCE_END.match(text, pos)
            if fence is None:
                continue
            pos = fence.end()
        ending = section_call_end(doc, pos, _CALL_END, _SECTION_END, _MARK)
        if ending is None:
            continue  # something else after the arguments: not a frame we read
        pos, closed, repairs = ending
        yield Frame(NAME, start, pos, closed=closed, name=name, json_text=text[body:end],
                    repairs=repairs)
        openers.taken_to = pos


# `<｜tool▁calls▁begin｜>`, `<|tool_call_begin|>` and the other spellings of DeepSeek's tokens
# (Step 3 writes them too).
CALLS_OPENER = Opener(seq("<", alt("｜", "|"), "tool", alt("▁", "_", " ", "\\_"), "call"))


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(CALLS_OPENER,),
    vllm=("deepseek_v3", "deepseek_v31"),
    sglang=("deepseekv3", "deepseekv31"),
    llama_cpp=("DeepSeek R1", "DeepSeek V3.1"),
    aliases=("deepseek_r1",),
    text_joined=True,
    doctor_parser="deepseek_v3",
    doctor_markers=(("<｜tool▁calls▁begin｜>", "deepseek_v3"),),
)
