"""MiniMax-M3 calls: XML invokes whose every tag is led by MiniMax's namespace token.

    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="create_order">]<]minimax[>[<user_id>42]<]minimax[>[</user_id>
    ]<]minimax[>[<shipping>]<]minimax[>[<city>Singapore]<]minimax[>[</city>]<]minimax[>[</shipping>
    ]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

(vLLM's and SGLang's `minimax_m3`.) A parameter is a tag named for it; a tag holding tags is
an object, an array's elements are `<item>`s, and a name written twice in one object makes a
list. Leaf values are text, coerced by the schema the tool declares for them (by property,
`items`, `prefixItems` or `additionalProperties`); space between the token and its tag is
allowed. A leaf's text is kept as written (a string keeps its whitespace, as the reference
parser reads it, up to the tag's namespaced close); a text value holding the namespace token
and a tag leaves the rest of the text as text (`ambiguous_value`): where it ends is unsure.
One frame per invoke: the block's tags go with the first and last one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..framing.steps import OpenerMatches, section_start, unsure_frame
from ..opener_patterns import literals
from ..scan import Document
from ..schema import coerce
from ..types import Frame
from .spec import FormatSpec

NAME = "minimax_m3"
_NS = "]<]minimax[>["
MARKERS = (_NS,)
_TOKEN = re.escape(_NS) + r"[ \t\r\n]*+"
_INVOKE = re.compile(_TOKEN + r'<invoke name="([^"<>\n]{1,200}+)">')
_TAG = re.compile(r"\s*+" + _TOKEN + r"<(/?)([^<>/\s]{1,200}+)>")
_BLOCK_OPEN = re.compile(_TOKEN + r"<tool_call>\s*+\Z")
_BLOCK_CLOSE = re.compile(r"\s*+" + _TOKEN + r"</tool_call>")
_MAX_DEPTH = 64


def _child_schema(parent: Any, tag: str, index: int) -> Any:
    """The schema of `tag` under `parent`'s: a property, an array's `item`, or None."""
    if not isinstance(parent, dict):
        return None
    if tag == "item" and ("items" in parent or "prefixItems" in parent):
        prefix = parent.get("prefixItems")
        if isinstance(prefix, list) and index < len(prefix):
            return prefix[index]
        return parent.get("items")
    properties = parent.get("properties")
    if isinstance(properties, dict) and tag in properties:
        return properties[tag]
    extra = parent.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _types(schema: Any) -> set[Any]:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return set(kind) if isinstance(kind, list) else {kind}


def _add(parent: dict[str, Any] | list[Any], tag: str, value: Any) -> None:
    """`value` into its parent: appended to a list; a name written again makes a list (as
    the reference parsers build it)."""
    if isinstance(parent, list):
        parent.append(value)
    elif tag not in parent:
        parent[tag] = value
    elif isinstance(parent[tag], list):
        parent[tag].append(value)
    else:
        parent[tag] = [parent[tag], value]


def _opened(doc: Document, pos: int, child: Any) -> tuple[Any, int]:
    """The value a tag opening at `pos` starts, and where its content ends: the text up to
    the next token, as written (coerced by the tag's schema), when it holds text or its
    schema is a scalar's, else an empty container (an array's when the schema says so)."""
    text = doc.text
    leaf_end = text.find(_NS, pos)
    leaf = text[pos:len(text) if leaf_end < 0 else leaf_end]
    types = _types(child)
    if leaf.strip() or (types & _SCALARS and not types & _CONTAINERS):
        return (coerce(leaf, child) if isinstance(child, dict) else leaf), pos + len(leaf)
    return ([] if "array" in types else {}), pos


_SCALARS = {"string", "integer", "number", "boolean", "null"}
_CONTAINERS = {"object", "array"}


def _arguments(doc: Document, pos: int, schema: Any) -> tuple[dict[str, Any] | None, int]:
    """An invoke's body from `pos` as arguments, and where its `</invoke>` ends; None as the
    arguments when the body is not this grammar (unbalanced, cut, out of budget)."""
    text = doc.text
    root: dict[str, Any] = {}
    stack: list[tuple[str, Any, Any]] = [("invoke", schema, root)]  # (tag, schema, value)
    while (tag := _TAG.match(text, pos)) is not None and doc.spend():
        pos, name = tag.end(), tag[2]
        if tag[1]:  # a closing tag: it must close the innermost open one
            if stack[-1][0] != name:
                return None, pos
            closed = stack.pop()
            if not stack:
                return root, pos
            _add(stack[-1][2], name, closed[2])
            continue
        parent = stack[-1]
        if len(stack) > _MAX_DEPTH or not isinstance(parent[2], dict | list):
            return None, pos  # too deep, or a tag inside a text value: not this grammar
        index = len(parent[2]) if isinstance(parent[2], list) else 0
        child = _child_schema(parent[1], name, index)
        value, pos = _opened(doc, pos, child)
        stack.append((name, child, value))
    return None, pos


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each namespaced invoke inside a `<tool_call>` block."""
    text = doc.text
    in_block = False
    openers = OpenerMatches(doc, _INVOKE, _NS, keep_backticked=True)
    for match in openers:
        start = section_start(doc, _BLOCK_OPEN, match.start(), openers.taken_to, in_block)
        if start is None:
            continue  # an invoke outside a block: a mention
        name = match[1]
        arguments, pos = _arguments(doc, match.end(), doc.schemas.get(name))
        if arguments is None:  # cut off, or not this grammar (a text value holding a tag):
            # where the invoke ends is unsure, so the rest of the text stays text
            if not doc.budget.exhausted:
                yield unsure_frame(doc, NAME, start, name, doc.skip_space(pos) < len(text))
            return
        after = _BLOCK_CLOSE.match(text, pos)
        in_block = after is None
        pos = after.end() if after is not None else pos
        yield Frame(NAME, start, pos, value={"name": name, "arguments": arguments})
        openers.taken_to = pos


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=literals("]<]minimax[>["),
    vllm=("minimax_m3",),
    sglang=("minimax-m3",),
    doctor_parser="minimax_m3",
)
