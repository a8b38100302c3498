"""JSON calls in a Markdown code fence, when the fence is the call and not an example.

    ```json
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    ```

Taken only when the fences close the content (prose may come before, never after): a fence
followed by more prose is an example shown to the user, and stays text; so is a closing fence
that the line before it introduces as an example ("For example:", "e.g.", "like this").
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..opener_patterns import FENCE
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "code_fence"
_FENCE = "```"
MARKERS = ()  # none: the fences must close the content, which is checked first
# An opening fence at the start of a line, with a language tag that can hold a call.
_OPENING = re.compile(r"```(?:json|xml|tool_call|tool_calls|function_call)?[ \t]*+\n\s*+(?=[{\[])")
_MAX_FENCES = 8
_EXAMPLE_CUE = re.compile(r"\b(?:example|e\.g\.|for instance|such as|like this|would look)\b",
                         re.IGNORECASE)


def _fenced_value(doc: Document, closing: int) -> tuple[int, int, int] | None:
    """(opening fence, JSON start, JSON end) of the fenced block that the fence at `closing`
    closes, when it holds one JSON value: the opening fence is the nearest one at the start
    of a line whose JSON ends right before `closing` (a string in the JSON may itself hold a
    fence)."""
    text = doc.text
    line = closing
    for _ in range(_MAX_FENCES):
        line = text.rfind("\n" + _FENCE, 0, line)
        opening = line + 1 if line >= 0 else 0
        match = _OPENING.match(text, opening)
        if match is not None:
            body_end = doc.json_end(match.end())
            if body_end is not None and doc.skip_space(body_end) == closing:
                return opening, match.end(), body_end
        if line < 0 or not doc.spend():
            return None
    return None


def find_frames(doc: Document) -> Iterator[Frame]:
    """The fenced JSON blocks that end the content, each one JSON value, one fence each."""
    text = doc.text
    end = len(text.rstrip())
    frames: list[Frame] = []
    while len(frames) < _MAX_FENCES and text.endswith(_FENCE, 0, end) and doc.spend():
        found = _fenced_value(doc, end - len(_FENCE))
        if found is None:
            break  # not one JSON value: code, or an example with prose in it
        opening, body, body_end = found
        frames.append(Frame(NAME, opening, end, json_text=text[body:body_end],
                            listed=text[body] == "["))
        end = len(text[:opening].rstrip())
    line_start = max(text.rfind("\n", 0, end) + 1, end - 200)  # the introducing line's end
    if frames and _EXAMPLE_CUE.search(text, line_start, end):
        first = frames[-1]  # the fences are introduced as an example: they stay text
        yield Frame(NAME, first.start, frames[0].end, refused="example_in_prose")
        return
    yield from reversed(frames)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(FENCE,),
    vllm=("xlam",),
)
