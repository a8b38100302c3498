"""The JSON grammar: a format's opening marker, then one JSON payload (or a run of them),
then its close marker or not, and the decision that makes a missing close forgiven or the
frame incomplete; `reshaped` turns a format's own keys into call envelopes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from ..repair import NotJson, loads_repaired
from ..scan import Document
from ..types import Frame
from .steps import OpenerMatches, ends_or_opens, next_or_end


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
