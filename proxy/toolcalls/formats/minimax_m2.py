"""MiniMax-M2 calls: XML invokes with text parameters, coerced later by the tool's schema.

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    </invoke>
    </minimax:tool_call>
"""

from __future__ import annotations

from collections.abc import Iterator

from ..framing.invoke import invoke_frames, invoke_grammar
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "minimax_m2"
_GRAMMAR = invoke_grammar("", "<minimax:tool_call>", "</minimax:tool_call>")
MARKERS = (_GRAMMAR.invoke_open,)


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<invoke>` inside a `<minimax:tool_call>` block."""
    yield from invoke_frames(doc, NAME, _GRAMMAR)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<invoke", "<minimax:tool_call>"),
    vllm=("minimax_m2",),
    sglang=("minimax-m2",),
    llama_cpp=("MiniMax-M2",),
    doctor_parser="minimax_m2",
    wrapper_tags=("minimax:tool_call", "minimax:tool_calls"),
)
