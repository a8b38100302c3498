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
belong to Qwen's template, not the value (as vLLM's parser reads them). Seed-OSS's template
writes `<parameter=K>V</parameter>`, no newline around a value: inside `<seed:tool_call>` a
value is kept exactly as written (vLLM's `seed_oss` strips a newline at each end all the
same, cutting a file's last one). A value ends at the
`</parameter>` the frame's structure shows to be its own (see text_values): one followed by
the next `<parameter=` or by `</function>` (and, in a wrapper, `</tool_call>`), so that a
file whose text says `</parameter>` or `</tool_call>` is read whole. A parameter written
without its close ends at the next tag only when no `</parameter>` follows it at all and the
frame goes on from that tag.

A value holding a `<parameter=K>` that no `</parameter>` of its own closes is read one of two
ways: the model forgot the value's close and K is the next parameter (as vLLM reads it), or
the value names the tag. The next parameter only when K begins a line, is not given yet, is
one the tool declares (when it declares any), and no call opens in the value before it (a
quoted call's parameters are its own); else the tag is the value's text, every character kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.steps import OpenerMatches, at_line_start, template_value, unsure_frame
from ..opener_patterns import literals
from ..scan import Document
from ..text_values import Tail, ValueTags, value_end
from ..types import Frame
from .spec import FormatSpec

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
_PARAMETER_CLOSE = "</parameter>"
_PARAMETER_TAG = re.compile(r"<parameter=([^<>\n]{1,200}+)>")
_FUNCTION_CLOSE = re.compile(r"\s*</function>")
_TAGS = ValueTags(
    tokens=re.compile(r"<(?:(parameter=[^<>\n]{1,200}+>)|/parameter>)"),
    next_item=_PARAMETER,
    stray=re.compile(r"<(?:(/(?:parameter|function|(?:seed:)?tool_call)>)"
                     r"|function=|(?:seed:)?tool_call>)"),
)
# Where a value without its close tag may end: the call's next tag, when the frame's
# structure goes on from there.
_UNCLOSED_END = re.compile(r"<parameter=|</function>|</(?:seed:)?tool_call>")


def _tail(doc: Document, wrapped: bool) -> Tail:
    """Where a frame ends after a value's close, when the call ends there: `</function>`
    (then the wrapper's close, or the end of the text), or, without `</function>`, the
    wrapper's close or the end of the text (repairs the frame loop records)."""
    text = doc.text

    def tail(pos: int) -> int | None:
        close = _FUNCTION_CLOSE.match(text, pos)
        if close is not None:
            pos = close.end()
            if not wrapped:
                return pos
        wrap = _WRAP_CLOSE.match(text, pos) if wrapped else None
        if wrap is not None:
            return wrap.end()
        return pos if close is not None or doc.skip_space(pos) >= len(text) else None
    return tail


def _declared(doc: Document, name: str) -> frozenset[str]:
    """The parameters tool `name` declares (none when it is not offered or declares none)."""
    schema = doc.schemas.get(name)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return frozenset(properties) if isinstance(properties, dict) else frozenset()


def _forgotten_close(text: str, start: int, stop: int, given: set[str],
                     declared: frozenset[str]) -> int | None:
    """Where a value (text[start:stop]) holding a `<parameter=K>` it does not close ends when
    it forgot its own close: at the first such tag that begins a line and names a parameter
    not given yet and declared (when the tool declares any), with no call opened before it
    in the value. None: the tags are the value's text."""
    for inner in _PARAMETER_TAG.finditer(text, start, stop):
        if text.find("<function=", start, inner.start()) >= 0:
            return None  # a call quoted in the value: its parameters are its own
        key = inner[1].strip()
        if (at_line_start(text, inner.start()) and key not in given
                and (not declared or key in declared)):
            return inner.start()
    return None


def _parameters(doc: Document, pos: int, tail: Tail, name: str, exact: bool = False,
                ) -> tuple[list[tuple[str, str]], int, bool, list[str], bool] | None:
    """The parameters from `pos` of a call to `name`: (key, value) pairs, where they end,
    whether the last one ended, repairs, and whether every value's tags were balanced; None
    out of budget. `exact`: values as written (Seed-OSS), else without Qwen's template
    newlines."""
    text = doc.text
    args: list[tuple[str, str]] = []
    repairs: list[str] = []
    balanced = True
    while (parameter := _PARAMETER.match(text, pos)) is not None:
        if not doc.spend():
            return None
        found = value_end(doc, parameter.end(), _TAGS, tail)
        if found is not None:
            end, pos = found.at, found.at + len(_PARAMETER_CLOSE)
            if not found.balanced:
                given = {key for key, _ in args} | {parameter.group(1).strip()}
                cut = _forgotten_close(text, parameter.end(), found.at, given,
                                       _declared(doc, name))
                if cut is not None:
                    end = pos = cut
                    repairs.append("missing_parameter_close")
        elif doc.budget.exhausted:
            return None
        else:  # no close follows at all: the value may end at the call's next tag
            unclosed = _UNCLOSED_END.search(text, parameter.end())
            end = -1 if unclosed is None else unclosed.start()
            if end < 0 or (_PARAMETER.match(text, end) is None and tail(end) is None):
                return args, len(text), False, repairs, balanced
            pos = end
            repairs.append("missing_parameter_close")
        value = text[parameter.end():end]
        args.append((parameter.group(1).strip(), value if exact else template_value(value)))
    return args, pos, True, repairs, balanced


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<function=NAME>` block with its parameters, and its `<tool_call>` wrapper if any."""
    text = doc.text
    openers = OpenerMatches(doc, _FUNCTION, "<function=", keep_backticked=True)  # unless wrapped
    for match in openers:
        start = match.start()
        wrapper = _WRAP_OPEN.search(text, max(openers.taken_to, start - 64), start)
        wrapped = wrapper is not None
        if wrapper is not None:
            start = wrapper.start()
        elif start > 0 and text[start - 1] == "`":
            continue  # an inline-code mention
        seed = wrapped and text.startswith("<seed:", start)
        read = _parameters(doc, match.end(), _tail(doc, wrapped), match.group(1).strip(),
                           exact=seed)
        if read is None:
            return  # out of budget: better no frame than one with parameters missing
        args, pos, complete, repairs, balanced = read
        if not balanced:
            yield unsure_frame(doc, NAME, start, match.group(1).strip(), complete=True)
            return
        closed = False
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
        yield Frame(NAME, start, pos, closed=closed, complete=complete,
                    name=match.group(1).strip(), text_args=tuple(args), repairs=tuple(repairs))
        openers.taken_to = pos


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("<function=", "<tool_call>", "<seed:tool_call>"),
    vllm=("qwen3_coder", "qwen3_xml", "seed_oss", "mimo", "step3p5"),
    sglang=("qwen3_coder", "mimo", "step3p5"),
    llama_cpp=("Qwen3 Coder", "Seed-OSS"),
    doctor_parser="qwen3_coder",
    wrapper_tags=("tool_call", "seed:tool_call", "seed:tool_calls", "function"),
)
