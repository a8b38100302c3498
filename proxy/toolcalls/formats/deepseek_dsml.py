"""DeepSeek V3.2, V4 and V4.1 calls, in DeepSeek's DSML markup (full-width bar).

    <｜DSML｜function_calls>                                          (V3.2; V4: tool_calls)
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

    <｜DSML｜ calls>                                                          (V4.1: spaced)
    <｜DSML｜ invoke name="get_weather">
    <｜DSML｜ parameter name="city" string="true">Paris</｜DSML｜ parameter>
    </｜DSML｜ invoke>
    </｜DSML｜ calls>

The block tag's spellings the V4 and V4.1 checkpoints are known to write (vLLM's
`deepseek_v4`/`deepseek_v41` configs: `toolcalls`, `tool`; `calls` without its space,
`call`) are read too. An invoke may hold its arguments as one JSON object instead of
parameter tags (SGLang's V4.1 structural tag writes that; the V3.2 parser reads it). Text
values are coerced by the tool's schema (`string="false"` values are JSON, which the schema
coercion reads for non-string types).

An invoke written without its block, at the start of a line, is a call all the same, as
SGLang's V4 detector reads it ("a parsed invoke establishes the protocol boundary even when its
outer wrapper is damaged"), named `missing_open_tag`: its name must be an offered tool's. The
text after a call is the answer's, joined to the text before as SGLang's V4 detector joins it:
the text before without the blank line the template writes before the block
(`_extract_preamble`: `text[:start].removesuffix("\n\n")`), then the text after the block as
written (`finish`): `Let me check.\n\n<block>\n\nDone.` gives `Let me check.\n\nDone.`
(vLLM's `deepseek_v32`/`deepseek_v4` keep the text before as written, `Let me check. `, and
drop the rest).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..framing.invoke import invoke_frames, invoke_grammar
from ..framing.steps import outermost
from ..opener_patterns import literals
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "deepseek_dsml"
_BAR = "｜DSML｜"
_UNSPACED = invoke_grammar(
    _BAR,
    tuple(f"<{_BAR}{block}>" for block in ("function_calls", "tool_calls", "toolcalls", "tool")),
    tuple(f"</{_BAR}{block}>" for block in ("function_calls", "tool_calls", "toolcalls", "tool")),
    exact=True, json_body=True, unwrapped=True)
_SPACED = invoke_grammar(  # V4.1
    _BAR + " ",
    tuple(f"<{_BAR}{block}>" for block in (" calls", "calls", " call")),
    tuple(f"</{_BAR}{block}>" for block in (" calls", "calls", " call")),
    exact=True, json_body=True, unwrapped=True)
MARKERS = (_UNSPACED.invoke_open, _SPACED.invoke_open)


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each DSML `invoke` inside a calls block, in either spelling (a call of one spelling
    quoted in a value of the other is that value's text)."""
    yield from outermost(*(invoke_frames(doc, NAME, grammar) for grammar in (_UNSPACED, _SPACED)
                           if doc.has(grammar.invoke_open)))


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<｜DSML｜"),
    vllm=("deepseek_v32", "deepseek_v4"),
    sglang=("deepseekv32", "deepseekv4"),
    aliases=("deepseek_v41", "deepseekv41"),
    text_joined=True,
    call_separator="\n\n",
    doctor_parser="deepseek_v32",
    thinking_opened=("deepseek_v4", "deepseekv4"),
    doctor_markers=(("<｜DSML｜tool_calls>", "deepseek_v4"),),
)
