"""The key/value pair grammar: `<call>NAME<key>K</key><value>V</value>…</call>` (a name, then
its parameters as key/value tags; MiniCPM, Hunyuan, Solar Open, K2 Horizon), read by
`pair_frames`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..scan import Document
from ..text_values import Tail, ValueTags, value_end
from ..types import Frame
from .steps import OpenerMatches, unsure_frame


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
