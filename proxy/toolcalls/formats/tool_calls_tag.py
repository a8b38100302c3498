"""Calls in `<tool_calls>…</tool_calls>`: a JSON array of calls, or call objects one per line.

    <tool_calls>[{"name": ..., "arguments": {...}}]</tool_calls>   (Jamba, Hunyuan-A13B, Apriel)
    <tool_calls>
    {"name": ..., "arguments": {...}}
    {"name": ..., "arguments": {...}}
    </tool_calls>                                                           (MiniMax-M1)
    <TOOLCALL>[{"name": ..., "arguments": {...}}]</TOOLCALL>       (NVIDIA Nemotron Nano 2, -H)

(Nemotron's tag as vLLM's `nemotron_json` and llama.cpp's "Nemotron V2" read it; Apriel 1.5's
list as llama.cpp's "Apriel 1.5" reads it.) Apriel frames its answer: its thinking ends with
`[BEGIN FINAL RESPONSE]` (turn.closers: the text before it is the reasoning) and the answer
with `[END FINAL RESPONSE]` and its end token `<|end|>`, which are not the answer's words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import cut_list_head, joined, json_run, whole_values
from ..framing.steps import OpenerMatches, ends_or_opens, next_or_end
from ..opener_patterns import literals
from ..prose.markup import SHORT_TEXT, at_end
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "tool_calls_tag"
_TAGS = ("<tool_calls>", "<TOOLCALL>")
MARKERS = _TAGS
_PAYLOAD = r'(?=\s*+(?:\{\s*+["}]|\[\s*+[{\]]))'


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<tool_calls>` (or `<TOOLCALL>`) block holding JSON calls, to its close (or to
    the end of the text)."""
    for tag in _TAGS:
        if doc.has(tag):
            yield from _blocks(doc, tag, re.compile(re.escape(tag) + _PAYLOAD),
                               re.compile(r"\s*+" + re.escape("</" + tag[1:])))


def _blocks(doc: Document, tag: str, opener: re.Pattern[str], close_tag: re.Pattern[str],
            ) -> Iterator[Frame]:
    text = doc.text
    openers = OpenerMatches(doc, opener, tag)
    for match in openers:
        start = match.start()
        spans, stop, unbalanced = json_run(doc, match.end())
        if unbalanced or not spans:
            end = next_or_end(text, tag, match.end())
            body = doc.skip_space(match.end())
            head = None
            if end == len(text):  # cut: the whole calls before the cut one (Frame.head)
                head = cut_list_head(doc, body) if text[body] == "[" else whole_values(doc,
                                                                                      spans)
            yield Frame(NAME, start, end, closed=False, complete=False,
                        json_text=text[match.end():end], listed=True, head=head or None)
            openers.taken_to = end
            continue
        close = close_tag.match(text, stop)
        if close is not None:
            frame = Frame(NAME, start, close.end(), json_text=joined(text, spans), listed=True)
        elif ends_or_opens(doc, stop, tag):
            frame = Frame(NAME, start, stop, closed=False, json_text=joined(text, spans),
                          listed=True, repairs=("missing_close_tag",))
        else:
            continue  # something else inside the block: not ours to read; it stays text
        yield frame
        openers.taken_to = frame.end


# Apriel's markers around its final answer, at the answer's start and end.
_FINAL_OPEN = re.compile(r"\s*+\[BEGIN FINAL RESPONSE\]")
_FINAL_CLOSE = re.compile(r"\s*+\[END FINAL RESPONSE\](?:\s*+<\|end\|>)?\s*+\Z")
# What every piece of markup `answer_markup` looks for holds (none in a plain answer).
_MARKUP_NEEDLE = ']'


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Apriel's final-response markers where they open and close the answer."""
    if len(text) <= SHORT_TEXT and _MARKUP_NEEDLE not in text:  # (every token holds it)
        return [], []
    spans = []
    opening = _FINAL_OPEN.match(text)
    if opening is not None:
        spans.append(opening.span())
    closing = at_end(_FINAL_CLOSE, text, opening.end() if opening is not None else 0)
    if closing is not None:
        spans.append(closing.span())
    return spans, []


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<tool_calls>", "<TOOLCALL>", "[BEGIN FINAL RESPONSE]",
                     "[END FINAL RESPONSE]"),
    vllm=("jamba", "hunyuan_a13b"),
    llama_cpp=("Apriel 1.5", "Nemotron V2"),
    aliases=("minimax", "minimax_m1", "nemotron_json", "nemotron_nano_v2", "apriel", "nemotron_v2"),
    doctor_parser="jamba",
    wrapper_tags=("tool_calls",),
    answer_markup=answer_markup,
)
