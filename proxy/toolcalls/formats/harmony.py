"""gpt-oss (Harmony) calls, whole or with some of their special tokens left out.

    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}
    <|call|>   (one line in the output; the call token ends the frame)
    <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{…}<|call|>
    commentary to=functions.NAME json{...}           (tokens dropped by detokenising)

The recipient `to=functions.NAME` anchors the frame; only header words (channel names,
`json`, the special tokens) may stand between it and the JSON arguments. Once a call is taken
from the raw text, the other messages around it are read too (`content_markup`): the
analysis channel is the model's reasoning, the final (and commentary) channels its answer,
and the headers and end tokens are neither. A header cut off by the length limit at the end
of the text is markup too.

A server that strips special tokens writes the same messages as words: `analysis…`, then
`assistantcommentary to=functions.NAME json{…}` or `assistantfinal…` (the role and channel
glued, each message's header): read the same way, once the text opens with a channel word
and holds such a glued header (prose that says "analysis" holds none).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence

from ..framing.steps import OpenerMatches, next_or_end
from ..opener_patterns import SPACE, Opener, alt, lit, literals, opt, seq
from ..prose.markup import holds
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "harmony"
_ANCHOR = "to=functions."
MARKERS = (_ANCHOR,)
_HEADER_WORD = (r"(?:<\|channel\|>|<\|constrain\|>|<\|message\|>|commentary|analysis|"
                r"<\|start\|>|assistant|json|code)")
_HEAD = re.compile(r"to=functions\.([A-Za-z0-9_\-]{1,128}+)"
                   r"(?:\s*+" + _HEADER_WORD + r"){0,8}\s*+(?=\{)")
# Header pieces written before the recipient, in the same frame.
_BEFORE = re.compile(r"(?:<\|start\|>\s*+)?(?:assistant\s*+)?(?:<\|channel\|>\s*+)?"
                     r"(?:(?:commentary|analysis)\s*+)?\Z")
_END = re.compile(r"\s*+(?:<\|call\|>|<\|end\|>|<\|return\|>)")


# Tokens that open or close a message: the last one before the recipient tells whether it
# stands in a header (a call) or inside a message's text (a mention of one).
_TOKENS = ("<|message|>", "<|start|>", "<|channel|>", "<|end|>", "<|call|>", "<|return|>")
_LOOK_BACK = 4096


def _in_message_body(text: str, start: int) -> bool:
    """Whether `start` lies in a message's text (after `<|message|>`, before its end)."""
    window = max(0, start - _LOOK_BACK)
    last = max(_TOKENS, key=lambda token: text.rfind(token, window, start))
    return last == "<|message|>" and text.rfind(last, window, start) >= 0


def _function_name(written: str, tools: frozenset[str]) -> tuple[str, tuple[str, ...]]:
    """The function name, and its repair: gpt-oss sometimes glues the `json` of the
    constraint to the name (`to=functions.shelljson`, llama.cpp #15158)."""
    if written not in tools and written.endswith("json") and written[:-4] in tools:
        return written[:-4], ("name_json_suffix",)
    return written, ()


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `to=functions.NAME … {arguments}` call, with the header tokens around it."""
    text = doc.text
    openers = OpenerMatches(doc, _HEAD, _ANCHOR)
    for match in openers:
        start = match.start()
        name, repairs = _function_name(match[1], doc.tools)
        if _in_message_body(text, start):
            yield Frame(NAME, start, match.end(), name=name, refused="in_message_text")
            openers.taken_to = match.end()
            continue
        before = _BEFORE.search(text, max(openers.taken_to, start - 48), start)
        if before is not None:
            start = before.start()
        body = match.end()
        end = doc.json_end(body)
        if end is None:
            stop = next_or_end(text, _ANCHOR, body)
            yield Frame(NAME, start, stop, closed=False, complete=False, name=name)
            openers.taken_to = stop
            continue
        token = _END.match(text, end)
        pos = token.end() if token is not None else end
        yield Frame(NAME, start, pos, name=name, json_text=text[body:end], repairs=repairs)
        openers.taken_to = pos


# A message's header (`<|start|>assistant<|channel|>final<|message|>`, a constraint allowed),
# where its text ends, and the tokens left over between messages.
_HEADER = re.compile(r"(?:<\|start\|>[ \t]*+(?:assistant\b)?[ \t]*+(?:to=[^\s<]{1,64}+[ \t]*+)?)?"
                     r"<\|channel\|>[ \t]*+(\w++)"
                     r"[^<]{0,200}?(?:<\|constrain\|>[^<]{0,64})?<\|message\|>")
_BODY_END = re.compile(r"<\|(?:end|return|call|start|channel)\|>")
_END_TOKENS = ("<|end|>", "<|return|>", "<|call|>")
_STRAY = re.compile(r"<\|start\|>[ \t]*+(?:assistant\b)?|<\|(?:end|return)\|>")


def content_markup(text: str, frames: Sequence[tuple[int, int]],
                   ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Around the taken `frames` (sorted spans): the spans of Harmony's markup (message
    headers, end tokens) and those of the analysis channel's text, which is reasoning; the
    text of other channels is the answer."""
    starts = [start for start, _ in frames]

    def next_frame(pos: int) -> int:
        i = bisect_right(starts, pos)
        return starts[i] if i < len(starts) else len(text)

    # Only the text between frames is looked at (a frame may hold a megabyte of arguments).
    gaps = list(zip([0, *(end for _, end in frames)], [*starts, len(text)], strict=True))
    markup: list[tuple[int, int]] = []
    reasoning: list[tuple[int, int]] = []
    pos = 0
    for header in (h for low, high in gaps for h in _HEADER.finditer(text, low, high)):
        if header.start() < pos:
            continue
        body = header.end()
        stop = next_frame(body)
        end = _BODY_END.search(text, body, stop)
        pos = stop if end is None else end.start()
        markup.append((header.start(), body))
        if header[1] == "analysis":
            reasoning.append((body, pos))
        if end is not None and end.group() in _END_TOKENS:
            markup.append((pos, end.end()))
            pos = end.end()
    covered = sorted(markup + reasoning)
    for token in (t for low, high in gaps for t in _STRAY.finditer(text, low, high)):
        i = bisect_right(covered, (token.start(), len(text))) - 1
        if i < 0 or covered[i][1] <= token.start():
            markup.append(token.span())
    if not markup and not reasoning:
        plain = _plain_markup(text, frames)
        if plain is not None:
            return plain
    if markup or reasoning:
        markup += _cut_header(text, max(pos, gaps[-1][0]))
    return markup, reasoning


# A header cut off at the end of the text (the length limit came first).
_CUT_HEADER = re.compile(r"(?:<\|start\|>[ \t]*+(?:assistant\b)?[ \t]*+)?(?:<\|channel\|>"
                         r"[^<]{0,200}+(?:<\|constrain\|>[^<]{0,64}+)?)?(?:<\|[a-z]{0,9}+\|?)?\Z")


def _cut_header(text: str, low: int) -> list[tuple[int, int]]:
    """The header cut off at the text's end, when the last gap (from `low`) ends with one."""
    cut = _CUT_HEADER.search(text, low)
    return [cut.span()] if cut is not None and cut.end() > cut.start() else []


# Harmony as words (special tokens stripped): the first message's channel opens the text,
# each later message's header is the role glued to its channel, a recipient and `json` after.
_PLAIN_FIRST = re.compile(r"\s*+(?:assistant)?(analysis|final)[ \t]*+")  # start(1) > start(): glued
_PLAIN_HEADER = re.compile(r"assistant(analysis|commentary|final)(?:[ \t]++to=[\w.\-]{1,128}+)?"
                           r"(?:[ \t]*+(?:json|code)\b)?[ \t]*+")


def _plain_markup(text: str, frames: Sequence[tuple[int, int]],
                  ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """Harmony written as words (see the module's docstring): the headers' spans and the
    analysis messages' text (reasoning); None when the text is not that."""
    first = _PLAIN_FIRST.match(text)
    if first is None:
        return None
    starts = [start for start, _ in frames]
    gaps = list(zip([0, *(end for _, end in frames)], [*starts, len(text)], strict=True))
    headers = [(first.start(), first.end(), first[1])]
    headers += [(h.start(), h.end(), h[1]) for low, high in gaps
                for h in _PLAIN_HEADER.finditer(text, max(low, first.end()), high)]
    if len(headers) < 2 and not frames and first.start(1) == first.start():
        return None  # one channel word at the start: prose ("analysis shows…")
    markup: list[tuple[int, int]] = []
    reasoning: list[tuple[int, int]] = []
    bounds = sorted([(start, end) for start, end, _ in headers] + list(frames))
    for start, end, channel in headers:
        markup.append((start, end))
        following = [b for b, _ in bounds if b >= end]
        stop = following[0] if following else len(text)
        if channel == "analysis":
            reasoning.append((end, stop))
    return markup, reasoning


_RAW = re.compile(r"\s*+(?:<\|start\|>|<\|channel\|>)")


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """A plain answer in raw Harmony (it opens with a message header, and holds no call's
    recipient) or in Harmony's words: its headers and end tokens, and its analysis
    channel's text (reasoning). The final channel's text is the answer even when it looks
    like a call."""
    if holds(text, _ANCHOR):
        return [], []
    plain = _plain_markup(text, []) if not holds(text, "<|") else None
    if plain is not None:
        return plain
    if _RAW.match(text) is None or not holds(text, "<|channel|>"):
        return [], []
    return content_markup(text, [])


# A message's header (`<|start|>assistant<|channel|>final<|message|>`), as a regex.
MESSAGE_HEADER = (r"<\|start\|>[ \t]*+(?:assistant\b)?|<\|channel\|>[^<>\n]{0,64}?"
                  r"(?:<\|constrain\|>[^<>\n]{0,32}?)?<\|message\|>"
                  r"|assistant(?:analysis|commentary|final)")  # (Harmony as words)
# gpt-oss: the recipient, and the header pieces before it, which belong to the frame.
_RECIPIENT_OPENER = Opener(lit("to=functions."), lead=seq(
    opt(seq("<|start|>", SPACE)), opt(seq("assistant", SPACE)), opt(seq("<|channel|>", SPACE)),
    opt(seq(alt("commentary", "analysis"), SPACE))))


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    # Raw Harmony text: the engine reads its other messages around a taken call (analysis to
    # the reasoning, headers and end tokens out), so nothing from the first token on is sure
    # to stay.
    openers=(_RECIPIENT_OPENER, *literals("<|channel|>", "<|start|>", "<|message|>",
                                          "<|constrain|>", "<|end|>", "<|call|>", "<|return|>"),
             # Harmony as words: the first channel opens the text; a later header anywhere
             Opener(seq(opt("assistant"), alt("analysis", "final")), "start"),
             Opener(seq("assistant", alt("analysis", "commentary", "final")))),
    vllm=("openai",),
    sglang=("gpt-oss",),
    llama_cpp=("GPT-OSS",),
    aliases=("gpt_oss",),
    doctor_parser="openai",
    content_markup=content_markup,
    answer_markup=answer_markup,
    message_header=MESSAGE_HEADER,
)
