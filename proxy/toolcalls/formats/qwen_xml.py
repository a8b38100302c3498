"""Qwen3-Coder / Qwen3.5 XML calls.

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

The `<tool_call>` wrapper is optional (Seed-OSS writes `<seed:tool_call>`). Values are text,
coerced later by the tool's schema; one leading and one trailing newline around a value
belong to the template, not the value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing import Openers, template_value
from ..scan import Document
from ..types import Frame

NAME = "qwen_xml"
MARKERS = ("<function=",)
# Only a `<function=NAME>` followed by what can follow it in a call (a parameter, its close,
# the wrapper's close, the end), so that a megabyte of mentions is skipped at regex speed.
_FUNCTION = re.compile(r"<function=([^<>\n]{1,200}+)>"
                       r"(?=\s*+(?:<parameter=|</function>|</(?:seed:)?tool_call>|\Z))")
# The wrapper: Qwen's `<tool_call>`, or Seed-OSS's `<seed:tool_call>` around the same calls.
_WRAP_OPEN = re.compile(r"<(?:seed:)?tool_call>\s*\Z")
_WRAP_CLOSE = re.compile(r"\s*</(?:seed:)?tool_call>")
_PARAMETER = re.compile(r"\s*<parameter=([^<>\n]{1,200}+)>")
_FUNCTION_CLOSE = re.compile(r"\s*</function>")
# Where a parameter value can end: its own close tag, or (when that is missing) the next tag.
_VALUE_END = re.compile(r"</parameter>|<parameter=|</function>|<function=|</(?:seed:)?tool_call>")


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<function=NAME>` block with its parameters, and its `<tool_call>` wrapper if any."""
    text = doc.text
    openers = Openers(doc, _FUNCTION, "<function=", keep_backticked=True)  # unless wrapped
    for match in openers:
        start = match.start()
        wrapper = _WRAP_OPEN.search(text, max(openers.taken_to, start - 64), start)
        wrapped = wrapper is not None
        if wrapped:
            start = wrapper.start()
        elif start > 0 and text[start - 1] == "`":
            continue  # an inline-code mention
        name = match.group(1).strip()
        args: list[tuple[str, str]] = []
        repairs: list[str] = []
        pos = match.end()
        complete = True
        closed = False
        while True:
            parameter = _PARAMETER.match(text, pos)
            if parameter is None:
                break
            if not doc.spend():
                return  # out of budget: better no frame than one with parameters missing
            value_end = _VALUE_END.search(text, parameter.end())
            if value_end is None:
                complete = False
                pos = len(text)
                break
            value = template_value(text[parameter.end():value_end.start()])
            args.append((parameter.group(1).strip(), value))
            if value_end.group() == "</parameter>":
                pos = value_end.end()
            else:
                repairs.append("missing_parameter_close")
                pos = value_end.start()
        if complete:
            function_close = _FUNCTION_CLOSE.match(text, pos)
            if function_close is not None:
                pos = function_close.end()
                closed = True
            elif (args or wrapped) and (doc.skip_space(pos) >= len(text)
                                        or _WRAP_CLOSE.match(text, pos)):
                repairs.append("missing_function_close")
            else:
                continue  # unexpected text inside the function block: not a frame we read
        if wrapped:
            wrap_close = _WRAP_CLOSE.match(text, pos)
            if wrap_close is not None:
                pos = wrap_close.end()
            else:
                closed = False
                if complete:
                    repairs.append("missing_close_tag")
        yield Frame(NAME, start, pos, closed=closed, complete=complete, name=name,
                    text_args=tuple(args), repairs=tuple(repairs))
        openers.taken_to = pos
