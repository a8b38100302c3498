"""Mistral calls, both generations.

    [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "a1b2c3d4e"}]     (v1–v3 tokenizers)
    [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[CALL_ID]a1b2c3d4e[ARGS]{...}     (v11+ tokenizers)
    [TOOL_CALLS]f{...}[TOOL_CALLS]g{...}       (v11+, `[ARGS]` dropped by the detokenizer)

The format has no closing marker: the complete JSON value ends the frame, and text after it
stays content (vLLM reads the call and ignores what trails it). A frame that text follows
must begin its line or a sentence; whether the text around it on its line makes it a
mention is the context rules' to say, as for every format.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from ..framing.json_payload import json_frame
from ..framing.steps import OpenerMatches, at_line_start
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec, StructuralTag

NAME = "mistral"
_OPEN = "[TOOL_CALLS]"
MARKERS = (_OPEN,)
_OPENER = re.compile(
    re.escape(_OPEN)
    + r"\s*+(?:(?=\{\s*+[\"}]|\[\s*+[{\]])"  # a JSON list (or object) of calls
    + r"|([A-Za-z0-9_.\-]{1,200}+)(?:\[CALL_ID\][A-Za-z0-9_\-]{1,64}+)?(?:\[ARGS\])?"
    + r"\s*+(?=\{))"
)
_EOS = re.compile(r"\s*+</s>")
_EOS_ON_LINE = re.compile(r"[ \t]*+</s>")
_SENTENCE_END = re.compile(r"[.!?。！？…][ \t]*+\Z")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `[TOOL_CALLS]` with its JSON list of calls, or its NAME[ARGS]{arguments}."""
    text = doc.text
    openers = OpenerMatches(doc, _OPENER, _OPEN)
    for match in openers:
        start = match.start()
        body = doc.skip_space(match.end())
        frame = json_frame(doc, NAME, start, body, close=_EOS, opener=_OPEN, name=match[1],
                           listed=match[1] is None)
        if frame is None:  # text follows the JSON: the frame ends with it (the format has
            end = doc.json_end(body)  # no close); the prose around it says call or mention
            if end is None or not (at_line_start(text, start)
                                   or _SENTENCE_END.search(text, max(0, start - 80), start)):
                continue  # with no close of its own, a frame that text follows must begin
                # its line or a sentence ("Mistral writes [TOOL_CALLS][…]\nlike that.")
            eos = _EOS_ON_LINE.match(text, end)
            frame = Frame(NAME, start, end if eos is None else eos.end(),
                          json_text=text[body:end], name=match[1], listed=match[1] is None)
        elif "missing_close_tag" in frame.repairs:  # `</s>` is optional: no repair to record
            frame = replace(frame, closed=True, repairs=())
        yield frame
        openers.taken_to = frame.end


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("[TOOL_CALLS]"),
    vllm=("mistral", "xlam"),
    sglang=("mistral",),
    llama_cpp=("Mistral Nemo", "Magistral", "Ministral 3"),
    doctor_parser="mistral",
    doctor_markers=(("[TOOL_CALLS]", "mistral"),),
    # the v11+ tokenizers' shape (Mistral Small 3.2, Magistral, Devstral): name, `[ARGS]`, object
    structural_tag=StructuralTag("[TOOL_CALLS]", "[TOOL_CALLS]{name}[ARGS]", ""),
)
