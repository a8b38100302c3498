"""DeepSeek-V3.2 calls, in its DSML markup (full-width bar), parameters as text.

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

Values are coerced by the tool's schema (`string="false"` values are JSON, which the schema
coercion reads for non-string types).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..framing import invoke_frames, invoke_grammar
from ..scan import Document
from ..types import Frame

NAME = "deepseek_dsml"
_PREFIX = "｜DSML｜"
_GRAMMAR = invoke_grammar(_PREFIX, f"<{_PREFIX}function_calls>", f"</{_PREFIX}function_calls>",
                        exact=True)
MARKERS = (_GRAMMAR.invoke_open,)


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each DSML `invoke` inside a `function_calls` block."""
    yield from invoke_frames(doc, NAME, _GRAMMAR)
