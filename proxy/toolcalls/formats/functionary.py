"""Functionary v3.2 calls: each call's name on its own line, its JSON arguments on the next.

    get_weather
    {"city": "Paris"}>>>read
    {"path": "/a"}
    all
    Some text for the user>>>get_weather
    {"city": "Paris"}

The template's generation prompt ends with `>>>`, so the first call opens the content without
it, and each further call is `>>>NAME` (llama.cpp's functionary_v3_2 parser; `all` addresses
the user, not a tool). A `>>>NAME` is a call only at the start of the content or of a line,
right after the previous call, or in a content opened by Functionary's `all` header: never in
the middle of prose. Only space may follow the arguments on their line. The recipient line
of a message to the user (`all` opening the answer, `>>>all` before a later one) is markup of
the answer, not its words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import orjson

from ..framing.steps import OpenerMatches, at_line_start, next_or_end
from ..opener_patterns import WORD, Opener, opt, seq
from ..prose.markup import holds
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "functionary"
MARKERS = ("\n{",)  # every call: the name's line, then the arguments' line
_FIRST = re.compile(r"\s*+(?:>>>)?+(\w{1,200}+)\n(?=\{)")
_NEXT = re.compile(r">>>(\w{1,200}+)\n(?=\{)")
_ALL_HEADER = re.compile(r"\s*+(?:>>>)?+all\n")
_LINE_END = re.compile(r"[ \t]*+(?:\r?\n|\Z)|\s*+(?=>>>)")


def _call_frame(doc: Document, start: int, name: str, body: int) -> Frame | None:
    text = doc.text
    end = doc.json_end(body)
    if end is None:
        stop = next_or_end(text, ">>>", body)
        return Frame(NAME, start, stop, closed=False, complete=False, name=name)
    if not _LINE_END.match(text, end) or _is_envelope(text[body:end]):
        return None  # prose on the arguments' line, or a whole call under a title line
    return Frame(NAME, start, end, name=name, json_text=text[body:end])


def _is_envelope(payload: str) -> bool:
    """Whether the "arguments" are a whole `{"name", "arguments"}` call (a bare JSON call
    under a one-word line, read by that format), not Functionary's arguments."""
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return (isinstance(value, dict) and isinstance(value.get("name"), str)
            and ("arguments" in value or "parameters" in value))


def find_frames(doc: Document) -> Iterator[Frame]:
    """The call opening the content, then each `>>>NAME` call where one may stand."""
    text = doc.text
    openers = OpenerMatches(doc, _NEXT, ">>>", keep_backticked=True)
    first = _FIRST.match(text)
    if first is not None and first[1] != "all" and doc.spend():
        frame = _call_frame(doc, doc.skip_space(0), first[1], first.end())
        if frame is not None:
            yield frame
            openers.taken_to = frame.end
    if not doc.has(">>>"):
        return
    headed = _ALL_HEADER.match(text) is not None
    for match in openers:
        start = match.start()
        cursor = openers.taken_to
        if match[1] == "all":
            continue
        if not (headed or at_line_start(text, start)
                or (cursor and doc.skip_space(cursor) == start)):
            continue  # `>>>` in the middle of prose
        frame = _call_frame(doc, start, match[1], match.end())
        if frame is not None:
            yield frame
            openers.taken_to = frame.end


# The recipient line of a message to the user: `all` opening the answer (the template's
# generation prompt wrote its `>>>`), or `>>>all` at the start of a line.
_TO_USER = re.compile(r"\A[ \t]*+(?:>>>)?+all[ \t]*+\n|(?:(?<=\n)|(?<=\A))[ \t]*+>>>all[ \t]*+\n"
                      r"|(?<=[^\s])>>>all\n")


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The recipient lines of messages to the user."""
    if not holds(text, ">>>all") and not text.lstrip(" \t").startswith("all"):
        return [], []  # (what every branch of the pattern holds; a scan of a long text is slow)
    return [found.span() for found in _TO_USER.finditer(text)], []


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(Opener(seq(opt(">>>"), WORD, "\n", "{"), "start"),
             Opener(seq(">>>", WORD, "\n", "{")),
             Opener(seq(opt(">>>"), "all", "\n"), "start"), Opener(seq(">>>all\n"))),
    llama_cpp=("Functionary v3.2",),
    own_markers_at_start=(),
    answer_markup=answer_markup,
)
