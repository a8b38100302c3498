"""Llama 3.x JSON calls.

    <|python_tag|>{"name": "f", "parameters": {...}}; {"name": "g", "parameters": {...}}
    {"name": "f", "parameters": {...}}; {"name": "g", "parameters": {...}}   (whole content)
    <function=f>{"a": 1}</function>                                           (Llama 3.1 custom)
    <function name="f">{"a": 1}</function>                   (the same, as llama.cpp reads it)
    <|python_tag|>brave_search.call(query="…")<|eom_id|>     (a built-in tool, as llama.cpp)

`parameters` is the native key. Calls separated by `;` without the tag are taken only when
they are the whole content (one object alone is bare JSON, read by that format). A built-in
tool's call (Meta's `brave_search`, `wolfram_alpha`) is read when the request declares a tool
of that name, its keyword arguments as the `pythonic` format reads them (literals only).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.json_payload import whole_values
from ..framing.steps import OpenerMatches, next_or_end, outermost
from ..opener_patterns import CALL_OBJECT, Opener, literals
from ..scan import Document
from ..types import Frame
from .pythonic import list_frame
from .spec import FormatSpec, StructuralTag

NAME = "llama3"
_TAG = "<|python_tag|>"
_FUNCTION_OPENS = ("<function=", '<function name="')
# `;`: calls separated by it, as the whole content. The attribute spelling's marker leaves out
# its `<` (anchored on `=`), so as not to grow the `<`-anchored group every text is searched for.
MARKERS = (_TAG, "<function=", 'function name="', ";")
_TAGGED = re.compile(re.escape(_TAG) + r'(?=\s*+\{\s*+["}])')
_END_TOKEN = re.compile(r"\s*+(?:<\|eom_id\|>|<\|eot_id\|>)")
_FUNCTION = re.compile(r'<function(?:=([A-Za-z0-9_.\-]{1,200}+)| name="([A-Za-z0-9_.\-]{1,200}+)")>'
                       r"(?=\s*+\{)")
_FUNCTION_CLOSE = re.compile(r"\s*+</function>")
_BUILT_IN = re.compile(re.escape(_TAG) + r"\s*+([A-Za-z_]\w{0,64}+)\.call(?=\()")
_CALL_END = re.compile(r"\)\s*+(?:<\|eom_id\|>|<\|eot_id\|>)?\s*+\Z")


def _objects_by_semicolons(doc: Document, pos: int) -> tuple[list[tuple[int, int]], int, bool]:
    """JSON objects from `pos` separated by `;`: their spans, where reading stopped, and
    whether an object was left unbalanced."""
    text = doc.text
    spans: list[tuple[int, int]] = []
    while pos < len(text) and text[pos] == "{" and doc.spend():
        end = doc.json_end(pos)
        if end is None:
            return spans, pos, True
        spans.append((pos, end))
        after = doc.skip_space(end)
        if not text.startswith(";", after):
            return spans, end, False
        pos = doc.skip_space(after + 1)
    return spans, (spans[-1][1] if spans else pos), False


def _as_json_list(text: str, spans: list[tuple[int, int]]) -> str:
    return "[" + ",".join(text[a:b] for a, b in spans) + "]"


def _tagged_calls(doc: Document) -> Iterator[Frame]:
    text = doc.text
    openers = OpenerMatches(doc, _TAGGED, _TAG, keep_backticked=True)
    for match in openers:
        start = match.start()
        spans, end, unbalanced = _objects_by_semicolons(doc, doc.skip_space(match.end()))
        if unbalanced:
            stop = next_or_end(text, _TAG, match.end())
            head = whole_values(doc, spans) if spans and stop == len(text) else None
            yield Frame(NAME, start, stop, closed=False, complete=False,
                        json_text=text[match.end():stop], arguments_key="parameters",
                        listed=True, head=head)
            openers.taken_to = stop
            continue
        if not spans:
            continue
        token = _END_TOKEN.match(text, end)
        if token is not None:
            end = token.end()
        elif text.startswith(";", doc.skip_space(end)):  # a trailing separator
            end = doc.skip_space(end) + 1
        yield Frame(NAME, start, end, json_text=_as_json_list(text, spans), listed=True,
                    arguments_key="parameters")
        openers.taken_to = end


def _built_in_call(doc: Document) -> Iterator[Frame]:
    """A built-in tool's `NAME.call(…)` after the tag, closing the content."""
    text = doc.text
    for match in OpenerMatches(doc, _BUILT_IN, _TAG):
        end = _CALL_END.search(text, match.end())
        if end is not None:
            source = f"[{match[1]}{text[match.end():end.start() + 1]}]"
            yield list_frame(doc, match.start(), end.end(), source, NAME)
        return


def _semicolon_separated_content(doc: Document) -> Iterator[Frame]:
    text = doc.text
    first = doc.skip_space(0)
    if not doc.has(";") or first >= len(text) or text[first] != "{":
        return
    spans, end, unbalanced = _objects_by_semicolons(doc, first)
    if unbalanced or len(spans) < 2:
        return
    after = doc.skip_space(end)
    if text.startswith(";", after):
        end, after = after + 1, doc.skip_space(after + 1)
    if after == len(text):
        yield Frame(NAME, first, end, json_text=_as_json_list(text, spans), listed=True,
                    arguments_key="parameters")


def _function_tag_calls(doc: Document) -> Iterator[Frame]:
    text = doc.text
    openers = OpenerMatches(doc, _FUNCTION, _FUNCTION_OPENS)
    for match in openers:
        start = match.start()
        name = match[1] or match[2]
        body = doc.skip_space(match.end())
        end = doc.json_end(body)
        if end is None:  # unbalanced: it never ends (cut, or not ours); its text stays
            yield Frame(NAME, start, len(text), closed=False, complete=False, name=name)
            return
        close = _FUNCTION_CLOSE.match(text, end)
        if close is not None:
            frame = Frame(NAME, start, close.end(), name=name, json_text=text[body:end])
        elif doc.skip_space(end) == len(text):
            frame = Frame(NAME, start, end, closed=False, name=name,
                          json_text=text[body:end], repairs=("missing_close_tag",))
        else:
            continue
        yield frame
        openers.taken_to = frame.end


def find_frames(doc: Document) -> Iterator[Frame]:
    """Tagged calls, `;`-separated calls as the whole content, and `<function=NAME>` calls
    (a tag quoted in a `<function=NAME>` call's string is text of that call)."""
    functions = any(doc.has(marker) for marker in _FUNCTION_OPENS)
    if doc.has(_TAG):
        yield from outermost(_tagged_calls(doc), _built_in_call(doc),
                             _function_tag_calls(doc) if functions else iter(()))
        return
    whole = list(_semicolon_separated_content(doc))
    if whole:
        yield from whole
    elif functions:
        yield from _function_tag_calls(doc)


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    # `{…}; {…}` as the whole content
    openers=(*literals("<|python_tag|>", "<function=", '<function name="'),
             Opener(CALL_OBJECT.pattern, "start")),
    vllm=("llama3_json", "llama4_json"),
    sglang=("llama3",),
    llama_cpp=("Llama 3.x", "Llama 3.x with built-in tools", "Functionary v3.1 Llama 3.1"),
    doctor_parser="llama3_json",
    doctor_markers=(("<|python_tag|>", "llama3_json"),),
    own_markers_at_start=("<|python_tag|>{", "<function"),
    # Meta's JSON call (`{"name": function name, "parameters": {…}}`) behind the tag that
    # marks it as a call wherever it stands (bare, it is a call only as the whole content)
    structural_tag=StructuralTag("<|python_tag|>",
                                 '<|python_tag|>{"name": "{name}", "parameters": ', "}"),
)
