"""Cohere Command calls: a JSON list of `{"tool_name", "parameters"}` actions.

    <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather",
                      "parameters": {"city": "Paris"}}]<|END_ACTION|>    (Command R7B, Command A)
    Action: ```json
    [{"tool_name": "get_weather", "parameters": {"city": "Paris"}}]
    ```                                                                   (Command R, R+)

(vLLM's `cohere_command3`/`cohere_command4`, SGLang's `cohere_command4`, llama.cpp's "Command
R7B"; Command R's `Action:` block as its template writes it, at the start of a line; the
fence may follow the colon without a space or on the next line, and hold the list on its own
line or on the fence's.) Each
action becomes a `{"name", "arguments"}` call; an item of any other shape is left out as a
bad sibling, and a list holding no action stays text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..framing.json_payload import json_frame, reshaped
from ..framing.steps import OpenerMatches, at_line_start
from ..opener_patterns import Opener, literals, seq
from ..prose.markup import SHORT_TEXT, at_end
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "command_r"
_OPEN = "<|START_ACTION|>"
_ACTION = "Action:"
MARKERS = (_OPEN[1:], _ACTION)  # not `<`-anchored: the group every text is searched for
_OPENERS = ((re.compile(r"<\|START_ACTION\|>\s*+(?=[\[{])"), _OPEN[1:], 1),
            (re.compile(r"Action:[ \t]*+(?:\n[ \t]*+)?```(?:json)?[ \t]*+(?:\n\s*+)?(?=[\[{])"),
             _ACTION, 0))
_END_ACTION = re.compile(r"\s*+<\|END_ACTION\|>")
_FENCE_END = re.compile(r"\s*+```")
_ACTION_KEYS = {"tool_call_id", "tool_name", "parameters"}


def _call(item: Any) -> Any:
    """An action as a call envelope; anything else as it is (the engine refuses what no
    envelope spelling reads), and Cohere's `directly_answer`, which says the model answers
    without a tool, as None (which the engine refuses)."""
    if isinstance(item, dict) and item.get("tool_name") == "directly_answer":
        return None
    if isinstance(item, dict) and "tool_name" in item and set(item) <= _ACTION_KEYS:
        call = {"name": item["tool_name"]}
        if "parameters" in item:
            call["arguments"] = item["parameters"]
        return call
    return item


def _calls(value: Any) -> list[Any]:
    return [_call(item) for item in (value if isinstance(value, list) else [value])]


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each action list, after `<|START_ACTION|>` (to `<|END_ACTION|>`) or in an `Action:`
    fence at the start of a line."""
    for pattern, marker, offset in _OPENERS:
        yield from _frames(doc, pattern, marker, offset)


def _frames(doc: Document, pattern: re.Pattern[str], marker: str, offset: int,
            ) -> Iterator[Frame]:
    text = doc.text
    token = offset == 1  # the special token, else the `Action:` fence
    openers = OpenerMatches(doc, pattern, marker, offset=offset, keep_backticked=True)
    for match in openers:
        start = match.start()
        if not token and not at_line_start(text, start):
            continue  # `Action:` in the middle of a sentence: prose
        frame = json_frame(doc, NAME, start, match.end(), opener=_OPEN if token else _ACTION,
                           close=_END_ACTION if token else _FENCE_END, listed=True)
        if frame is None or (not token and frame.complete and not frame.closed):
            continue  # a fence must close
        if not token and frame.complete and not _ends_turn(doc, frame.end):
            continue  # prose after the block: a block shown, not the turn's action
        openers.taken_to = frame.end
        yield reshaped(frame, _calls)


def _ends_turn(doc: Document, pos: int) -> bool:
    """Whether only space, special tokens or another action follow `pos`: Command R's turn
    ends with its action block."""
    rest = doc.text[doc.skip_space(pos):doc.skip_space(pos) + 64]
    return not rest or rest.startswith(("<|", "Action:"))


# A plain answer in Command's tokens: `<|START_RESPONSE|>…<|END_RESPONSE|>` (or the
# `<|START_TEXT|>` pair; Command R7B/A), possibly several; Command R's turn header
# (`<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>`) before it, and the turn's end token after it.
_ANSWER_OPEN = re.compile(r"\s*+(?:<\|START_OF_TURN_TOKEN\|>\s*+)?(?:<\|CHATBOT_TOKEN\|>\s*+)?"
                          r"(<\|START_(?:RESPONSE|TEXT)\|>)?")
_ANSWER_TOKENS = re.compile(r"<\|(?:START|END)_(?:RESPONSE|TEXT)\|>|<\|END_OF_TURN_TOKEN\|>")
_ANSWER_CLOSE = re.compile(r"(?:<\|END_(?:RESPONSE|TEXT)\|>\s*+)?"
                           r"(?:<\|END_OF_TURN_TOKEN\|>\s*+)?\Z")
# What every piece of markup `answer_markup` looks for holds (none in a plain answer).
_MARKUP_NEEDLE = '<'


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The turn and response tokens around (and between the pieces of) an answer: the turn's
    header and end token wherever they frame it, the response pairs inside an answer one
    opens."""
    if len(text) <= SHORT_TEXT and _MARKUP_NEEDLE not in text:  # (every token holds it)
        return [], []
    opening = _ANSWER_OPEN.match(text)
    assert opening is not None  # (every part of it is optional)
    spans = [opening.span()] if opening[0].strip() else []
    closing = at_end(_ANSWER_CLOSE, text, opening.end())
    if closing is not None and closing[0].strip():
        spans.append(closing.span())
    if opening[1] is not None:
        stop = closing.start() if closing is not None else len(text)
        spans += [token.span() for token in _ANSWER_TOKENS.finditer(text, opening.end(), stop)]
    return sorted(spans), []


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(*literals("<|START_ACTION|>", "<|START_RESPONSE|>", "<|START_TEXT|>",
                       "<|END_RESPONSE|>", "<|END_TEXT|>", "<|END_OF_TURN_TOKEN|>",
                       "<|START_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>"),
             Opener(seq("Action:"), "line")),
    vllm=("cohere_command3", "cohere_command4"),
    sglang=("cohere_command4",),
    llama_cpp=("Command R7B",),
    aliases=("command_r7b",),
    doctor_parser="cohere_command3",
    answer_markup=answer_markup,
)
