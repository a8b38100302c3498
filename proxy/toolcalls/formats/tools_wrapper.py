"""Calls wrapped in an XML-ish tag: one or more JSON call objects, or an array of them.

    <tools>{…}</tools>                                                    (Qwen variants)
    <tool>{…}</tool>  <response>{…}</response>  <json>{…}</json>  <xml>{…}</xml>
    <JSON>{…}</JSON>  <function_call>{…}</function_call>
    ```xml
    <response>{…}</response>
    ```

The other tags are the "good bad" outputs llama.cpp's Hermes-2-Pro parser accepts
(common/chat.cpp): a `{"name": …}` object must follow the tag, the close tag is required,
and the wrapper must stand on its own lines (a tag mentioned inside a sentence is prose). A
wrapper inside a ```xml / ```json fence is read when the fence is the whole content, the
fences going with the frame; a fence with prose around it is an example, and stays text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import joined, json_run
from ..framing.steps import OpenerMatches, at_line_start
from ..opener_patterns import FENCE, literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "tools_wrapper"
_TAGS = ("tools", "tool", "response", "json", "xml", "JSON", "function_call")
_OPENS = tuple(f"<{tag}>" for tag in _TAGS)
# Every frame opens at one of them (a text whose `"name"` is a Hermes call's is not run here).
NEEDS = tuple((tag,) for tag in _OPENS)
# For the engine's gate: every frame holds `<tools>` or a `"name"` key (the other tags require
# one right after them), which keeps this format's six other tags out of the `<`-anchored
# marker group that every document is searched for.
MARKERS = ("<tools>", '"name"')
# `<tools>` may hold any JSON call or list; the other tags only a `{"name": …}` object. Only
# openers followed by what can start one are tried, so that a megabyte of openers is cheap.
_OPENER = re.compile(r'<(?:(tools)>(?=\s*+(?:\{\s*+["}]|\[\s*+[{\]]))'
                     r'|(tool|response|json|xml|JSON|function_call)>(?=\s*+\{\s*+"name"\s*+:))')
_LINE_END = re.compile(r"[ \t]*+(?:\r?\n|\Z)")
_FENCE_OPEN = re.compile(r"```(?:xml|json)?[ \t]*+\r?\n\s*+\Z")
_FENCE_CLOSE = re.compile(r"\s*+```")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each wrapper whose body is a sequence of JSON values (comma or space separated)."""
    text = doc.text
    openers = OpenerMatches(doc, _OPENER, _OPENS if doc.has('"name"') else ("<tools>",))
    for match in openers:
        start = match.start()
        tag = match[1] or match[2]
        strict = tag != "tools"
        spans, pos, unbalanced = json_run(doc, match.end(), commas=True)
        if unbalanced or not spans:
            continue
        close_tag = f"</{tag}>"
        after = doc.skip_space(pos)
        if text.startswith(close_tag, after):
            closed, end = True, after + len(close_tag)
        elif after >= len(text) and not strict:
            closed, end = False, pos
        else:
            continue  # something other than JSON inside the wrapper: not ours to read
        fence = _FENCE_OPEN.search(text, max(openers.taken_to, start - 256), start)
        fence_close = _FENCE_CLOSE.match(text, end) if fence is not None else None
        if fence is not None and fence_close is not None:
            if doc.skip_space(0) != fence.start() or doc.skip_space(fence_close.end()) < len(text):
                yield Frame(NAME, fence.start(), fence_close.end(), refused="example_in_prose")
                openers.taken_to = fence_close.end()
                continue
            start, end = fence.start(), fence_close.end()
        elif strict and not (at_line_start(text, start) and _LINE_END.match(text, end)):
            continue  # a tag mentioned inside a sentence: prose
        repairs = () if closed else ("missing_close_tag",)
        yield Frame(NAME, start, end, closed=closed, json_text=joined(text, spans),
                    repairs=repairs)
        openers.taken_to = end


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS, needs=NEEDS,
    openers=(*literals("<tools>", "<tool>", "<response>", "<json>", "<xml>", "<JSON>",
                       "<function_call>"), FENCE),
    llama_cpp=("Hermes 2 Pro (its `<tools>`/`<response>`/`<json>` variants)",),
    wrapper_tags=("tools", "tool", "response", "json", "xml", "JSON", "function_call"),
)
