"""LiquidAI LFM2 / LFM2.5 calls: a list of calls between LFM2's call tokens.

    <|tool_call_start|>[get_weather(city="Paris"), read(path="/a")]<|tool_call_end|>
    <|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|tool_call_end|>

The list is pythonic (vLLM's and SGLang's `lfm2`, read as the `pythonic` format reads lists:
literals only, never evaluated) or JSON (SGLang's `lfm2`, llama.cpp's "LFM2 with JSON
tools"). The list ends where its own syntax ends it (a string may name the end token); the
end token may be missing when the list closes the content.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import json_frame
from ..framing.steps import OpenerMatches
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .pythonic import wrapped_list
from .spec import FormatSpec

NAME = "lfm2"
_OPEN = "<|tool_call_start|>"
_CLOSE = "<|tool_call_end|>"
MARKERS = (_OPEN[1:],)  # not `<`-anchored: that group is the one every text is searched for
_OPENER = re.compile(re.escape(_OPEN) + r"\s*+(?=\[\s*+[A-Za-z_{\]]|\{\s*+[\"}])")
_JSON_CLOSE = re.compile(r"\s*+" + re.escape(_CLOSE))


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<|tool_call_start|>` list, JSON or pythonic, to its end token."""
    text = doc.text
    openers = OpenerMatches(doc, _OPENER, MARKERS[0], offset=1)
    for match in openers:
        start, body = match.start(), match.end()
        if text.startswith("[", body) and not text.startswith("{", doc.skip_space(body + 1)):
            frame: Frame | None = wrapped_list(doc, start, body, _CLOSE, NAME)
        else:
            frame = json_frame(doc, NAME, start, body, close=_JSON_CLOSE, opener=_OPEN,
                               listed=True)
        if frame is not None:
            yield frame
            openers.taken_to = frame.end


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<|tool_call_start|>"),
    vllm=("lfm2",),
    sglang=("lfm2",),
    llama_cpp=("LFM2 with JSON tools", "LFM2"),
    doctor_parser="lfm2",
    doctor_markers=(("<|tool_call_start|>", "lfm2"),),
)
