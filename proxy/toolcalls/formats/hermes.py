"""Hermes / Qwen JSON frames: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.

A frame may hold several call objects one after another (one per line, as Qwen2.5/QwQ write
parallel calls, or separated by commas). A call object that begins the content, a line or what
follows `</think>`, and is closed by an orphan `</tool_call>` (no `<tool_call>` opened since the
previous close), is a frame whose opening tag the model left out (Hermes-4): recovered,
recorded as a repair.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from ..framing.json_payload import cut_list_head, joined, json_run, whole_values
from ..framing.steps import OpenerMatches, next_or_end
from ..opener_patterns import CALL_OBJECT, literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec, StructuralTag

NAME = "hermes"
_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_THINK_END = "</think>"
# The close's marker leaves out its `<`: the engine looks for all formats' markers at once, and
# `<`-anchored ones are the most numerous (its anchor groups are searched per character).
MARKERS = (_OPEN, _CLOSE[1:])
# Only openers followed by something that can start a JSON call (`{"`, `{'`, `{}`, `[{`, `[]`), so
# that a megabyte of `<tool_call>{<tool_call>{…` is skipped at regex speed.
_OPENER = re.compile(re.escape(_OPEN) + r'(?=\s*+(?:\{\s*+["\'}]|\[\s*+[{\]]))')
# Past this many `</tool_call>`, or this many that close no call object, the text is not a
# response's calls: orphan closes are not looked at further (reported as a spent budget).
_MAX_CLOSES = 4_096
_MAX_ORPHAN_MISSES = 64


def _opened_frames(doc: Document) -> Iterator[Frame]:
    """Every `<tool_call>` whose payload is JSON, scanned JSON-aware to its close tag."""
    text = doc.text
    openers = OpenerMatches(doc, _OPENER, _OPEN)
    for match in openers:
        start = match.start()
        body = doc.skip_space(match.end())
        if body >= len(text) or text[body] not in "{[":
            continue  # not JSON: another format's frame (Qwen XML, GLM) or prose
        spans, stop, unbalanced = json_run(doc, body, commas=True)
        if unbalanced or not spans:
            end = next_or_end(text, _OPEN, body)
            head = None
            if end == len(text):  # cut: the whole calls before the cut one (Frame.head)
                head = cut_list_head(doc, body) if text[body] == "[" else whole_values(doc,
                                                                                      spans)
            yield Frame(NAME, start, end, closed=False, complete=False, json_text=text[body:end],
                        head=head or None)
            openers.taken_to = end
            continue
        after = doc.skip_space(stop)
        repairs: tuple[str, ...] = ()
        if text.startswith(",", after):  # `{…}, {…},` then the close
            after, repairs = doc.skip_space(after + 1), ("trailing_comma",)
        if text.startswith(_CLOSE, after):
            yield Frame(NAME, start, after + len(_CLOSE), json_text=joined(text, spans),
                        repairs=repairs)
            openers.taken_to = after + len(_CLOSE)
        elif after >= len(text) or text.startswith(_OPEN, after):
            yield Frame(NAME, start, stop, closed=False, json_text=joined(text, spans),
                        repairs=("missing_close_tag",))
            openers.taken_to = stop
        else:  # something else follows the JSON: a frame we do not understand stays text
            close = text.find(_CLOSE, after)
            following = text.find(_OPEN, after)
            if close >= 0 and (following < 0 or close < following):
                yield Frame(NAME, start, close + len(_CLOSE), refused="unrecognised_shape")
                openers.taken_to = close + len(_CLOSE)


def _object_ending_at(doc: Document, low: int, end: int) -> int | None:
    """Where the JSON object ending at `end` opens, when it opens at `low`, at the start of a
    line or right after `</think>` (never in the middle of prose); else None."""
    text = doc.text
    pos, nested_until = low, low
    while pos < end:
        start = doc.skip_space(pos)
        if start >= end:
            return None
        if start >= nested_until and text[start] == "{":
            if not doc.spend():
                return None
            found = doc.json_end(start)
            if found == end:
                return start
            if found is not None:
                nested_until = found  # openings inside that object are not calls of their own
        newline = text.find("\n", start, end)
        think = text.find(_THINK_END, start, end)
        following = [at for at in (newline + 1 if newline >= 0 else -1,
                                   think + len(_THINK_END) if think >= 0 else -1) if at > pos]
        if not following:
            return None
        pos = min(following)
    return None


def _marker_positions(doc: Document, marker: str) -> list[int] | None:
    """Where `marker` occurs (listed from its anchor, else found one by one); None when it
    occurs too often to be a response's calls."""
    if not doc.has(marker):
        return []
    found = doc.occurrences(marker)
    if found is None:
        found, pos = [], doc.text.find(marker)
        while pos >= 0 and len(found) <= _MAX_CLOSES:
            found.append(pos)
            pos = doc.text.find(marker, pos + 1)
    if len(found) > _MAX_CLOSES:
        doc.budget.exhausted = True
        return None
    return found


def _frames_missing_open_tag(doc: Document) -> Iterator[Frame]:
    """Call objects closed by a `</tool_call>` that no `<tool_call>` opened."""
    text = doc.text
    closes = _marker_positions(doc, _CLOSE)
    opens = _marker_positions(doc, _OPEN)
    if not closes or opens is None:
        return  # none, or too many to tell (pathological text)
    claimed = doc.claimed
    previous, misses = 0, 0
    for close in closes:
        low, previous = previous, close + len(_CLOSE)
        if claimed.end_of(close) is not None:
            continue  # the close of a frame already taken
        if bisect_left(opens, close) > bisect_left(opens, low):
            continue  # opened since the previous close: not an orphan
        i = bisect_right(claimed.starts, close) - 1
        if i >= 0:
            low = max(low, claimed.ends[i])
        end = close
        while end > low and text[end - 1].isspace():
            end -= 1
        if end <= low or text[end - 1] != "}":
            continue
        start = _object_ending_at(doc, low, end)
        if start is None:
            misses += 1
            if misses >= _MAX_ORPHAN_MISSES:
                doc.budget.exhausted = True
                return
            continue
        yield Frame(NAME, start, close + len(_CLOSE), json_text=text[start:end],
                    repairs=("missing_open_tag",))


def find_frames(doc: Document) -> Iterator[Frame]:
    """Opened `<tool_call>` frames, then call objects whose opening tag is missing."""
    yield from _opened_frames(doc)
    yield from _frames_missing_open_tag(doc)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    # CALL_OBJECT: a call object closed by an orphan `</tool_call>` (its opening tag left out)
    openers=(*literals("<tool_call>"), CALL_OBJECT),
    vllm=("hermes", "ernie45", "granite4", "xlam"),
    sglang=("hermes", "qwen", "qwen25", "trinity"),
    llama_cpp=("Hermes 2 Pro", "Xiaomi MiMo", "EXAONE MoE"),
    doctor_parser="hermes",
    wrapper_tags=("tool_call",),
    structural_tag=StructuralTag(_OPEN, _OPEN + '\n{"name": "{name}", "arguments": ',
                                 "}\n" + _CLOSE),
)
