"""The `<invoke name=…><parameter name=…>` grammar several model families share (MiniMax-M2,
DeepSeek's DSML, Step-3, GigaChat, dots, Muse): one dialect compiled per format module
(`invoke_grammar`), read by `invoke_frames`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..scan import Document
from ..text_values import Tail, ValueTags, stray_tags, value_end
from ..types import Frame
from .steps import OpenerMatches, at_line_start, template_value, unsure_frame


@dataclass(frozen=True)
class InvokeGrammar:
    """The compiled tags of one `<invoke name=…><parameter name=…>` dialect."""

    invoke_open: str
    invoke: re.Pattern[str]
    parameter: re.Pattern[str]
    parameter_close: str
    invoke_close: re.Pattern[str]
    block_opened: re.Pattern[str]
    block_closed: re.Pattern[str]
    block_open_len: int
    tags: ValueTags
    value: Callable[[str], str]  # a value as the dialect's own parser reads it
    json_body: bool = False  # an invoke may hold its arguments as one JSON object instead
    unwrapped: bool = False  # an invoke alone at a line's start: a call missing its block's opener


def _one_of(spellings: tuple[str, ...]) -> str:
    """A regex matching any of `spellings` (literals), longest first."""
    return "(?:" + "|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True)) + ")"


def invoke_grammar(prefix: str, block_open: str | tuple[str, ...],
                   block_close: str | tuple[str, ...], *, exact: bool = False,
                   json_body: bool = False, unwrapped: bool = False) -> InvokeGrammar:
    """The grammar for tags starting with `<prefix`, inside `block_open … block_close` (each
    one spelling or several), built once, at import, by the format module. `exact`: values
    are kept as written (a dialect that marks strings as such); else a template's newline on
    each side is not part of the value. With `json_body`, an invoke may hold a JSON object
    of arguments instead of parameter tags."""
    tag = re.escape(prefix)
    invoke_open = "<" + prefix + "invoke"
    opens = (block_open,) if isinstance(block_open, str) else block_open
    closes = (block_close,) if isinstance(block_close, str) else block_close
    parameter = re.compile(r"\s*+<" + tag + r'parameter\s++name="([^"<>\n]{1,200}+)"'
                           r'(?:\s++string="(?:true|false)")?\s*+>')
    parameter_close = "</" + prefix + "parameter>"
    return InvokeGrammar(
        invoke_open=invoke_open,
        invoke=re.compile(re.escape(invoke_open) + r'\s++name="([^"<>\n]{1,200}+)"\s*+(/?)>'),
        parameter=parameter,
        parameter_close=parameter_close,
        invoke_close=re.compile(r"\s*+</" + tag + r"invoke>"),
        block_opened=re.compile(_one_of(opens) + r"\s*+\Z"),
        block_closed=re.compile(r"\s*+" + _one_of(closes)),
        block_open_len=max(map(len, opens)),
        tags=ValueTags(
            tokens=re.compile(r"<(?:(" + tag + r"parameter\s)|/" + tag + r"parameter>)"),
            next_item=parameter,
            stray=stray_tags((parameter_close, "</" + prefix + "invoke>", *closes),
                             (invoke_open, *opens)),
        ),
        value=(lambda value: value) if exact else template_value,
        json_body=json_body,
        unwrapped=unwrapped,
    )


def invoke_parameters(doc: Document, grammar: InvokeGrammar, pos: int, tail: Tail,
                      ) -> tuple[list[tuple[str, str]], int, bool, bool] | None:
    """The `<parameter name="K">V</parameter>` run of an invoke from `pos`: the (key, text
    value) pairs, where they end, whether the last one closed, and whether every value's
    tags were balanced (see text_values; `tail` says where the frame ends after a value's
    close when the invoke ends there); None when the document's budget ran out (better no
    frame than one with parameters missing)."""
    text = doc.text
    args: list[tuple[str, str]] = []
    balanced = True
    while (param := grammar.parameter.match(text, pos)) is not None:
        if not doc.spend():
            return None
        found = value_end(doc, param.end(), grammar.tags, tail)
        if found is None:
            return None if doc.budget.exhausted else (args, pos, False, balanced)
        args.append((param[1], grammar.value(text[param.end():found.at])))
        balanced = balanced and found.balanced
        pos = found.at + len(grammar.parameter_close)
    return args, pos, True, balanced


def _invoke_tail(doc: Document, grammar: InvokeGrammar) -> Tail:
    """Where an invoke's frame ends after a value's close, when the invoke ends there: after
    `</invoke>` (and the block's close, if it follows), or at the end of the text."""
    text = doc.text

    def tail(pos: int) -> int | None:
        close = grammar.invoke_close.match(text, pos)
        if close is None:
            return pos if doc.skip_space(pos) >= len(text) else None
        block = grammar.block_closed.match(text, close.end())
        return close.end() if block is None else block.end()
    return tail


def _json_body(doc: Document, pos: int, limit: int, after: int,
               ) -> tuple[str | None, int, bool]:
    """An invoke's arguments written as one JSON object from `pos` (before `limit`): (its
    text, where it ends, whether it is whole); (None, `after`, True) when none is written."""
    body = doc.skip_space(pos, limit)
    if body >= limit or doc.text[body] != "{":
        return None, after, True
    end = doc.json_end(body)
    if end is None or end > limit:
        return None, limit, False
    return doc.text[body:end], end, True


_INDENT = 4096  # how much space may stand between a block's opening tag and its first invoke


def invoke_frames(doc: Document, fmt: str, grammar: InvokeGrammar) -> Iterator[Frame]:
    """Frames of the `<invoke name="N"><parameter name="K">V</parameter></invoke>` grammar
    (MiniMax-M2, DeepSeek-V3.2 DSML). One frame per invoke: the block's markers go with the
    first and last one. An invoke outside a block is a mention, not a call, unless the
    grammar reads `unwrapped` invokes and it begins a line (after none of the dialect's
    tags): its block's opening tag left out (`missing_open_tag`), its name must be an offered
    tool's, a self-closing one stays text."""
    text = doc.text
    invoke_open, invoke_close = grammar.invoke_open, grammar.invoke_close
    opened, closed_block = grammar.block_opened, grammar.block_closed
    in_block = False
    tail = _invoke_tail(doc, grammar)
    openers = OpenerMatches(doc, grammar.invoke, invoke_open, keep_backticked=True)
    for match in openers:
        start = match.start()
        cursor = openers.taken_to
        floor = max(cursor, start - _INDENT)
        block = opened.search(text, max(floor, len(text[floor:start].rstrip()) + floor
                                        - grammar.block_open_len), start)
        repairs: tuple[str, ...] = ()
        if block is not None:
            start = block.start()
        elif not (in_block and doc.skip_space(cursor) == start):
            if not (grammar.unwrapped and not match[2] and at_line_start(text, start)
                    and text.find(invoke_open[1:-len("invoke")], cursor, start) < 0):
                continue  # a mention (or its dialect's tags stand before it, unread)
            repairs = ("missing_open_tag",)
        if match[2]:  # `<invoke name="N"/>`: a call without arguments (DeepSeek V3.2)
            after = closed_block.match(text, match.end())
            in_block = after is None
            pos = match.end() if after is None else after.end()
            yield Frame(fmt, start, pos, name=match[1])
            openers.taken_to = pos
            continue
        read = invoke_parameters(doc, grammar, match.end(), tail)
        if read is None:
            return  # out of budget: better no frame than one with parameters missing
        args, pos, complete, balanced = read
        body = None
        if grammar.json_body and complete and not args:
            body, pos, complete = _json_body(doc, match.end(), len(text), pos)
        if not (complete and balanced):
            yield unsure_frame(doc, fmt, start, match[1], complete)
            return
        close = invoke_close.match(text, pos)
        if close is not None:
            pos = close.end()
            after = closed_block.match(text, pos)
            in_block = after is None
            pos = after.end() if after is not None else pos
            yield Frame(fmt, start, pos, name=match[1], text_args=tuple(args), json_text=body,
                        repairs=repairs)
            openers.taken_to = pos
        elif doc.skip_space(pos) >= len(text):
            yield Frame(fmt, start, pos, closed=False, name=match[1], text_args=tuple(args),
                        json_text=body, repairs=("missing_close_tag",))
            return
        # Anything else inside the invoke: not a call we read; it stays text.
