"""Kimi K2 calls, between section markers.

    <|tool_calls_section_begin|>
    <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}<|tool_call_end|>
    <|tool_calls_section_end|>

The call id is `functions.NAME:INDEX` (the prefix and index are sometimes missing). The
section markers around the calls are taken with the first and last call, in either spelling
(`<|tool_calls_section_begin|>` or the singular `<|tool_call_section_begin|>`), and so are
stray words the model writes between the section's opening marker and its first call or
between its last call and the closing marker (vLLM's kimi_k2 tests: `<|tool_calls_section_begin|>
noise text <|tool_call_begin|>`): its parser never shows them as content, in either mode.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.steps import OpenerMatches, next_or_end, section_call_end
from ..opener_patterns import literals
from ..prose.markup import holds
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "kimi_k2"
_OPEN = "<|tool_call_begin|>"
MARKERS = (_OPEN,)
_NEXT_CALL = re.compile(re.escape(_OPEN))
_HEAD = re.compile(r"<\|tool_call_begin\|>\s*+(?:functions\.)?([^\s<>:{}\[\]`]{1,200}+)"
                   r"(?::\d{1,6})?\s*+<\|tool_call_argument_begin\|>\s*+(?=[{\[])")
_CALL_END = re.compile(r"\s*+<\|tool_call_end\|>")
# The section's opening marker, and any words (no tag) between it and the first call.
_SECTION_BEGIN = re.compile(r"<\|tool_calls?_section_begin\|>[^<`]{0,200}+\Z")
# Space (and stray words, as before the first call) and the section's closing marker.
_SECTION_END = re.compile(r"\s*+[^<`]{0,200}?<\|tool_calls?_section_end\|>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tool_call_begin|>` call with its JSON arguments."""
    text = doc.text
    openers = OpenerMatches(doc, _HEAD, _OPEN, keep_backticked=True)
    for match in openers:
        start = match.start()
        section = _SECTION_BEGIN.search(text, max(openers.taken_to, start - 240), start)
        if section is not None:
            start = section.start()
        body = match.end()
        end = doc.json_end(body)
        if end is None:
            stop = next_or_end(text, _OPEN, body)
            yield Frame(NAME, start, stop, closed=False, complete=False, name=match[1])
            openers.taken_to = stop
            continue
        ending = section_call_end(doc, end, _CALL_END, _SECTION_END, _NEXT_CALL)
        if ending is None:
            continue  # something else after the arguments: not a frame we read
        pos, closed, repairs = ending
        yield Frame(NAME, start, pos, closed=closed, name=match[1], json_text=text[body:end],
                    repairs=repairs)
        openers.taken_to = pos


# A tool section that holds no call (empty, or only space and K2's other tokens), or one
# opened at the very end: markup of no call, not the answer's words.
_EMPTY_SECTION = re.compile(r"<\|tool_calls?_section_begin\|>"
                            r"(?:\s|<\|(?!tool_call_begin\|)(?!tool_calls?_section_end\|)"
                            r"[a-z_]{1,40}\|>)*+(?:<\|tool_calls?_section_end\|>|\Z)")


# A section marker left in an answer whose calls were taken (or that holds none): the
# markers are markup, the words written between them the answer's.
_STRAY_SECTION = re.compile(r"(?<!`)<\|tool_calls?_section_begin\|>((?:(?!<\|tool_call)[^`])*+)"
                            r"<\|tool_calls?_section_end\|>")


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Each tool section that holds no call, and the markers of a section that holds only
    stray words (not in code)."""
    if not holds(text, "_section_begin|>"):  # (both patterns hold it)
        return [], []
    spans = [found.span() for found in _EMPTY_SECTION.finditer(text)]
    for section in _STRAY_SECTION.finditer(text):
        if not any(start <= section.start() < end for start, end in spans):
            spans += [(section.start(), section.start(1)), (section.end(1), section.end())]
    return sorted(spans), []


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<|tool_call_begin|>", "<|tool_calls_section_begin|>",
                     "<|tool_call_section_begin|>"),
    vllm=("kimi_k2",),
    sglang=("kimi_k2",),
    llama_cpp=("Kimi K2",),
    aliases=("kimi",),
    doctor_parser="kimi_k2",
    thinking_opened=("kimi_k2", "kimi"),
    text_joined=True,
    doctor_markers=(("<|tool_calls_section_begin|>", "kimi_k2"),),
    answer_markup=answer_markup,
)
