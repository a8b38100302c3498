"""MiniCPM 4.x / 5 calls: XML functions with named parameters, values written as text.

    <function name="get_weather"><param name="city">Paris</param><param name="days">3</param>
    </function>

(vLLM's and SGLang's `minicpm5`.) A value may be wrapped in `<![CDATA[…]]>`; the tokenizer's
space marker `Ġ` (or no space at all) may stand between `function`/`param` and `name`.
Values are coerced by the tool's schema. A parameter written twice, or a `<param>` without
a name, leaves the call as text, as the reference parsers do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import Openers, next_or_end
from ..scan import Document
from ..types import Frame

NAME = "minicpm"
MARKERS = ("<function name=", "<function\u0120name=", "<functionname=")
_SPACE = r"(?:\s++|\u0120)?"
_FUNCTION = re.compile(r"<function" + _SPACE + r"name=[\"']([^\"'<>\n]{1,200}+)[\"']\s*+>"
                       r"(?=\s*+(?:<param|</function>))")
_PARAM = re.compile(r"\s*+<param(?:" + _SPACE + r"name=[\"']([^\"'<>\n]{1,200}+)[\"'])?\s*+>")
_PARAM_CLOSE = "</param>"
_FUNCTION_CLOSE = re.compile(r"\s*+</function>")
_CDATA = re.compile(r"\s*+<!\[CDATA\[(.*)\]\]>\s*+\Z", re.DOTALL)


def _value(raw: str) -> str:
    """A parameter's text: a CDATA section's content as written, else the text trimmed."""
    cdata = _CDATA.match(raw)
    return cdata[1] if cdata is not None else raw.strip()


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<function name=…>` block of `<param>`s, to its `</function>`."""
    text = doc.text
    openers = Openers(doc, _FUNCTION, MARKERS)
    for match in openers:
        start, pos = match.start(), match.end()
        limit = next_or_end(text, "</function>", pos)
        args: list[tuple[str, str]] = []
        refused = None
        while (param := _PARAM.match(text, pos, limit)) is not None:
            if not doc.spend():
                return  # out of budget: better no frame than one with parameters missing
            value_end = text.find(_PARAM_CLOSE, param.end(), limit)
            if value_end < 0:
                break
            if param[1] is None or any(key == param[1] for key, _ in args):
                refused = "unrecognised_arguments"
            args.append((param[1] or "", _value(text[param.end():value_end])))
            pos = value_end + len(_PARAM_CLOSE)
        close = _FUNCTION_CLOSE.match(text, pos)
        if close is None:
            if limit >= len(text):  # cut before its close: an incomplete frame, its text stays
                yield Frame(NAME, start, len(text), closed=False, complete=False, name=match[1])
                return
            continue  # something else inside the function: not a call we read
        yield Frame(NAME, start, close.end(), name=match[1], text_args=tuple(args),
                    refused=refused)
        openers.taken_to = close.end()
