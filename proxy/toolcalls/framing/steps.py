"""Shared frame-building steps, so that each format stays one small module and adding one
touches no other: the "JSON after an opening marker, then a close marker or not" decision,
and the `<invoke name=…><parameter name=…>` grammar that several model families share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .repair import NotJson, loads_repaired
from .scan import Document
from .scan.spans import outermost as outermost  # (the formats' shared step, read here)
from .text_values import Tail, ValueTags, stray_tags, value_end
from .types import Frame


class OpenerMatches:
    """A format's opening markers in order, for its frame loop (every format loops this way):
    one that starts inside the frame taken last (before `taken_to`, which the loop moves) is
    skipped, and so is one right after a backtick (an inline-code mention), unless
    `keep_backticked` (the context check then reports it as inline code)."""

    def __init__(self, doc: Document, pattern: re.Pattern[str], markers: str | tuple[str, ...],
                 offset: int = 0, *, keep_backticked: bool = False) -> None:
        self._doc = doc
        self._pattern = pattern
        self._markers = markers
        self._offset = offset  # how far into a match its marker stands (Document.finditer)
        self._keep_backticked = keep_backticked
        self.taken_to = 0

    def __iter__(self) -> Iterator[re.Match[str]]:
        text = self._doc.text
        keep = self._keep_backticked
        for match in self._doc.finditer(self._pattern, self._markers, offset=self._offset):
            start = match.start()
            if start >= self.taken_to and (keep or start == 0 or text[start - 1] != "`"):
                yield match


def next_or_end(text: str, marker: str, pos: int) -> int:
    """Where the next `marker` at or after `pos` starts, or the end of the text: how far an
    unbalanced frame reaches."""
    found = text.find(marker, pos)
    return len(text) if found < 0 else found


def ends_or_opens(doc: Document, pos: int, opener: str) -> bool:
    """Whether only space stands between `pos` and the end of the text or the next
    `opener`: where a frame whose close is missing may end."""
    after = doc.skip_space(pos)
    return after >= len(doc.text) or doc.text.startswith(opener, after)


def section_call_end(doc: Document, pos: int, call_end: re.Pattern[str],
                     section_end: re.Pattern[str], next_call: re.Pattern[str],
                     ) -> tuple[int, bool, tuple[str, ...]] | None:
    """(end, closed, repairs) of a call in a section of calls whose arguments end at `pos`:
    after its call-end token and the section's end token if that follows; without its
    call-end token (a repair) when only space, the next call or the section's end follows;
    None when anything else follows (not a call we read)."""
    text = doc.text
    closing = call_end.match(text, pos)
    if closing is not None:
        pos, closed, repairs = closing.end(), True, ()
    elif (doc.skip_space(pos) >= len(text) or next_call.match(text, doc.skip_space(pos))
          or section_end.match(text, pos)):
        closed, repairs = False, ("missing_close_tag",)
    else:
        return None
    section = section_end.match(text, pos)
    return (pos if section is None else section.end()), closed, repairs


def at_line_start(text: str, pos: int) -> bool:
    """Whether only space (at most 64 characters) stands between the start of the line (or
    text) and `pos`."""
    line = text.rfind("\n", 0, pos) + 1
    return pos - line <= 64 and not text[line:pos].strip()


def whole_values(doc: Document, spans: list[tuple[int, int]]) -> list[Any] | None:
    """The JSON values at `spans`, decoded; None when one does not decode."""
    values = []
    for start, end in spans:
        try:
            values.append(doc.loads_repaired(doc.text[start:end])[0])
        except NotJson:
            return None
    return values


def cut_list_head(doc: Document, body: int) -> list[Any] | None:
    """The whole values a JSON list opening at `body` holds before where it was cut (the
    list never ends), decoded; None when it holds none (see Frame.head)."""
    if not doc.text.startswith("[", body):
        return None
    spans, _, _ = json_run(doc, body + 1, commas=True)
    return whole_values(doc, spans) if spans else None


def json_frame(doc: Document, fmt: str, start: int, body: int, *,
               close: re.Pattern[str] | None, opener: str, name: str | None = None,
               listed: bool = False, arguments_key: str = "arguments",
               repairs: tuple[str, ...] = ()) -> Frame | None:
    """The frame whose JSON payload opens at `body`, or None when it is not one we read.
    `close` (matched right after the JSON, leading space included) is the format's closing
    marker; None means the format has none and a complete JSON value ends the frame. A missing
    close is forgiven only when the JSON is complete and nothing but space or the next
    `opener` follows. Unbalanced JSON becomes an incomplete frame up to the next `opener`, so
    that its text stays text and no other format reads inside it."""
    text = doc.text
    if body >= len(text) or text[body] not in "{[":
        return None
    end = doc.json_end(body)
    if end is None:
        stop = next_or_end(text, opener, body)
        return Frame(fmt, start, stop, closed=False, complete=False, json_text=text[body:stop],
                     name=name, listed=listed, arguments_key=arguments_key, repairs=repairs,
                     head=cut_list_head(doc, body) if stop == len(text) else None)
    payload = text[body:end]
    if close is None:
        return Frame(fmt, start, end, json_text=payload, name=name, listed=listed,
                     arguments_key=arguments_key, repairs=repairs)
    closing = close.match(text, end)
    if closing is not None:
        return Frame(fmt, start, closing.end(), json_text=payload, name=name, listed=listed,
                     arguments_key=arguments_key, repairs=repairs)
    if ends_or_opens(doc, end, opener):
        return Frame(fmt, start, end, closed=False, json_text=payload, name=name, listed=listed,
                     arguments_key=arguments_key, repairs=(*repairs, "missing_close_tag"))
    return None


def json_frames(doc: Document, fmt: str, pattern: re.Pattern[str], opener: str, *,
                close: re.Pattern[str] | None, keep_backticked: bool = False,
                listed: bool = False, arguments_key: str = "arguments") -> Iterator[Frame]:
    """The frames of a format that writes an `opener` (matched by `pattern`) and then one
    JSON payload, as json_frame reads them."""
    openers = OpenerMatches(doc, pattern, opener, keep_backticked=keep_backticked)
    for match in openers:
        frame = json_frame(doc, fmt, match.start(), doc.skip_space(match.end()), close=close,
                           opener=opener, listed=listed, arguments_key=arguments_key)
        if frame is not None:
            yield frame
            openers.taken_to = frame.end


def reshaped(frame: Frame, reshape: Callable[[Any], Any]) -> Frame:
    """A whole JSON frame decoded here and reshaped into call envelope(s) by `reshape` (a
    format's own keys turned into `name`/`arguments`; None when the value is not that
    format's): refused as `invalid_json` or `unrecognised_shape` when it cannot be. An
    incomplete frame is returned as it is (its text stays), the whole calls before where
    it was cut reshaped too."""
    if not frame.complete or frame.json_text is None:
        if frame.head is None:
            return frame
        head = reshape(frame.head)
        return Frame(frame.format, frame.start, frame.end, closed=False, complete=False,
                     listed=frame.listed, head=head or None)
    try:
        value, repairs = loads_repaired(frame.json_text)
    except NotJson:
        return Frame(frame.format, frame.start, frame.end, refused="invalid_json")
    calls = reshape(value)
    if calls is None:
        return Frame(frame.format, frame.start, frame.end, refused="unrecognised_shape")
    return Frame(frame.format, frame.start, frame.end, closed=frame.closed, listed=frame.listed,
                 value=calls, repairs=(*frame.repairs, *repairs))


def section_start(doc: Document, section_open: re.Pattern[str], start: int, taken_to: int,
                  in_section: bool) -> int | None:
    """Where the frame of a call opening at `start` begins: at its section's opening tag (a
    pattern ending in `\\Z`, searched just before `start`), or at `start` when it follows the
    previous call of a section still open; None when the call stands outside any section (a
    mention, not a call)."""
    section = section_open.search(doc.text, max(taken_to, start - 200), start)
    if section is not None:
        return section.start()
    return start if in_section and doc.skip_space(taken_to) == start else None


def json_run(doc: Document, pos: int, *, commas: bool = False,
             ) -> tuple[list[tuple[int, int]], int, bool]:
    """JSON values written one after another from `pos` (separated by space, or by commas when
    `commas`): their spans, where reading stopped (the end of the last value, or the start of
    an unbalanced one), and whether a value was left unbalanced. Stops at anything else; each
    value after the first costs a candidate of the document's budget."""
    text = doc.text
    spans: list[tuple[int, int]] = []
    stop = pos
    pos = doc.skip_space(pos)
    while pos < len(text) and text[pos] in "{[" and (not spans or doc.spend()):
        end = doc.json_end(pos)
        if end is None:
            return spans, pos, True
        spans.append((pos, end))
        stop = end
        pos = doc.skip_space(end)
        if commas and text.startswith(",", pos):
            pos = doc.skip_space(pos + 1)
    return spans, stop, False


def joined(text: str, spans: list[tuple[int, int]]) -> str:
    """The payload of a run of JSON values: the one value, or a JSON array of them all."""
    if len(spans) == 1:
        return text[spans[0][0]:spans[0][1]]
    return "[" + ",".join(text[a:b] for a, b in spans) + "]"


def template_value(value: str) -> str:
    """A text value without the one newline a template puts on each side of it."""
    if value.startswith("\n"):
        value = value[1:]
    return value[:-1] if value.endswith("\n") else value


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


def unsure_frame(doc: Document, fmt: str, start: int, name: str | None,
                 complete: bool) -> Frame:
    """The frame from `start` of a call whose text value never ended (cut, or not a value we
    read: incomplete) or has no sure end (`ambiguous_value`): it takes the rest of the text,
    which may all be that value and may quote other frames, and stays text."""
    if not complete:
        return Frame(fmt, start, len(doc.text), closed=False, complete=False, name=name)
    return Frame(fmt, start, len(doc.text), name=name, refused="ambiguous_value")


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


@dataclass(frozen=True)
class PairGrammar:
    """One dialect of `<call>NAME<key>K</key><value>V</value>…</call>` (a name, then its
    parameters as key/value tags), with the section tags that may wrap a run of calls. A
    value ends at the closing tag the frame's structure shows to be its own (`tags`, see
    text_values), so that a value holding the dialect's tags is read whole."""

    marker: str  # a literal every call's opening holds, `offset` characters in
    offset: int
    head: re.Pattern[str]  # the opening and the name (group 1), up to the first parameter
    key: re.Pattern[str]  # space, a key (group 1) and what opens its value
    tags: ValueTags  # a value's closing tag (`next_item` is `key`)
    close: re.Pattern[str]  # space and the call's closing tag
    section_open: re.Pattern[str] | None = None  # matched right before the first call
    section_close: re.Pattern[str] | None = None  # matched right after the last
    value: Callable[[str], str] | None = None  # a value's text from what is written (CDATA)


def _pair_tail(doc: Document, grammar: PairGrammar) -> Tail:
    """Where a call's frame ends after a value's close, when the call ends there: after its
    closing tag (and the section's, if that follows), or at the end of the text."""
    text = doc.text

    def tail(pos: int) -> int | None:
        close = grammar.close.match(text, pos)
        if close is None:
            return pos if doc.skip_space(pos) >= len(text) else None
        section = grammar.section_close.match(text, close.end()) if grammar.section_close else None
        return close.end() if section is None else section.end()
    return tail


def _pair_args(doc: Document, grammar: PairGrammar, pos: int, tail: Tail,
               ) -> tuple[list[tuple[str, str]], int, bool, bool] | None:
    """The (key, text value) pairs of a call from `pos`, where they end, whether the last
    value closed, and whether every value's tags were balanced; None when the document's
    budget ran out."""
    text = doc.text
    args: list[tuple[str, str]] = []
    balanced = True
    while (key := grammar.key.match(text, pos)) is not None:
        if not doc.spend():
            return None
        found = value_end(doc, key.end(), grammar.tags, tail)
        if found is None:
            return None if doc.budget.exhausted else (args, len(text), False, balanced)
        value = text[key.end():found.at]
        args.append((key[1].strip(), value if grammar.value is None else grammar.value(value)))
        balanced = balanced and found.balanced
        pos = found.end
    return args, pos, True, balanced


def pair_frames(doc: Document, fmt: str, grammar: PairGrammar) -> Iterator[Frame]:
    """One frame per call of a key/value grammar (values coerced later by the tool's schema);
    a section's tags go with its first and last call. A call cut before its close is an
    incomplete frame (its text stays); one whose values have no sure end stays text
    (`ambiguous_value`), and so does one holding anything else or setting a parameter twice
    (which value is meant is a guess)."""
    text = doc.text
    tail = _pair_tail(doc, grammar)
    openers = OpenerMatches(doc, grammar.head, grammar.marker, offset=grammar.offset)
    for match in openers:
        start = match.start()
        if grammar.section_open is not None:
            section = grammar.section_open.search(text, max(openers.taken_to, start - 200),
                                                  start)
            start = start if section is None else section.start()
        name = match[1].strip()
        read = _pair_args(doc, grammar, match.end(), tail)
        if read is None:
            return  # out of budget: better no frame than one with parameters missing
        args, pos, complete, balanced = read
        if not (complete and balanced):
            yield unsure_frame(doc, fmt, start, name, complete)
            return
        close = grammar.close.match(text, pos)
        if close is None:
            if doc.skip_space(pos) >= len(text):  # cut before its close: its text stays
                yield Frame(fmt, start, len(text), closed=False, complete=False, name=name)
                return
            continue  # anything else inside the call: not one we read; it stays text
        pos = close.end()
        after = grammar.section_close.match(text, pos) if grammar.section_close else None
        pos = after.end() if after is not None else pos
        twice = len({key for key, _ in args}) < len(args)
        yield Frame(fmt, start, pos, name=name, text_args=tuple(args),
                    refused="repeated_parameter" if twice else None)
        openers.taken_to = pos
