"""Calls improvised without a trained format, anchored on the offered tools.

A model that was never trained on a call format (or whose template's format the server does
not parse) still answers with a call, in a shape of its own:

    get_weather(city="Paris", days=2)               a call expression
    get_weather("Paris")                            one positional argument (see below)
    get_weather{city: 'Paris', metric: True,}       NAME then a JS/Python object literal
    <tool_code>get_weather(city="Paris")</tool_code>
    ```tool_code / ```python / ```json fence holding one of these
    {"tool": "get_weather", "args": {"city": "Paris"}}   any envelope spelling (repair/envelope.py)
    "{\\"name\\": …}", {"content": "get_weather(…)"}     double-encoded: JSON holding one

It is a call only when it stands as the answer: after at most a closed (or empty) thinking
block and a short lead-in (`_LEAD_MAX`: "Sure, deleting that now:"; it ends with a colon when
it is on the call's own line, or when the call is a bare `NAME(…)`/`NAME{…}`), and before at
most a
short sign-off (`_SIGN_OFF_MAX`, no question, no code, no second structure, nothing about the
structure itself: "That block shows the shape"); a fenced block closes the answer, as
code_fence's do (a fence followed by prose was shown). The first
structure of the answer decides: a program (`result = get_weather(…)`, `print(get_weather(…))`)
starts with something that is no call of an offered tool and stays text; so does a NAME that
no offered tool has (`get_forecast(…)` when only `get_weather` is offered: never renamed).
A bare name is a word (dashes allowed, no dots: `Think.` ending a reasoning must not wait
for a `(`). Keyword arguments are read as they are; one positional argument only where the tool has
exactly one required parameter (it is that parameter's value), anything else positional
stays text. What the prose around it says (an example, a hypothetical, a quote, a question)
is judged by context.py, as for every format. docs/formats.md lists which way each
ambiguity goes.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from ..names import ToolNames
from ..opener_patterns import SPACE, Opener, alt, literals, run, seq
from ..repair import NotJson
from ..repair.envelope import DOUBLE_ENCODED, answer_text, declared_only
from ..repair.js_literal import read_object
from ..repair.python_literal import NotLiteral, literal_value, parse_expression
from ..scan import Document
from ..types import Frame, Refusal
from . import pythonic
from .spec import FormatSpec

NAME = "improvised"
MARKERS = ()  # none: recognised by shape and by the offered tools' names
_LEAD_MAX = 400  # a lead-in longer than this is prose the structure is part of
_LEAD_LINES = 3
_SIGN_OFF_MAX = 160  # one line
_THINK = re.compile(r"\s*+<(think|thinking|seed:think)>(?:[^<]++|<(?!/\1>))*+</\1>")
# The first structure of the answer: a code block, JSON, or an identifier right before `(`/`{`
# (`_first_structure`). Found from what opens one, each by str.find (memchr speed; a regex
# search costs about a hundred instructions per character of prose, and a pattern that starts
# with a lookbehind would be tried at every position).
_OPENINGS = ("<tool_code>", "```", "~~~", "{", "[")  # and `(`, looked for apart (see below)
_WORD_CHAR = re.compile(r"[\w\-]")
_NAME_BEFORE = re.compile(r"(?<![\w.\-$])[A-Za-z_][\w\-]{0,127}+(?=[({])")
_NAME_MAX = 128
_FENCE_OPEN = re.compile(r"(```|~~~)[ \t]*+(tool_code|tool_call|tool_calls|python|py|json)"
                         r"[ \t]*+\r?\n")
_CODE_OPEN, _CODE_CLOSE = "<tool_code>", "</tool_code>"
_SEPARATORS = re.compile(r"[\s;,]*+")
_NAME_AT = re.compile(r"([A-Za-z_][\w\-]{0,127}+)(?=[({])")
_CODE_NAME_AT = re.compile(r"([A-Za-z_][\w.\-]{0,127}+)(?=[({])")  # in a block: `default_api.f`
# What a sign-off does not hold: a question (the model asks before it acts), code or another
# structure, or words that make the structure something shown (an example, a template).
_NOT_SIGN_OFF = re.compile(
    r"[?`{}\[\]<>]|\w\(|\b(?:examples?|e\.g\.|for instance|formats?|syntax|schemas?|templates?|"
    r"replace|usage|would|could|instead|looks? like|how to|you can|means?|shows?|shown|shape|"
    r"(?:not|never|n't) (?:be )?(?:run|ran|called|executed|sent))\b"
    r"|\A(?:this|that|these|those|here|above|it|its|such|which|where)\b", re.IGNORECASE)
_CODE_CHAR = re.compile(r"[`=;{}$<>]")
_CODE_WORDS = ("await", "return", "const", "let", "var", "def", "lambda")
_CODE_WORD = re.compile(r"\b(?:await|return|const|let|var|def|lambda)\s")
POSITIONAL = "positional_argument_named"  # the repair: the one required parameter's value
OBJECT_ARGUMENT = "object_argument_as_arguments"  # the repair: `NAME({…})`


def _body_start(text: str) -> int:
    """Where the answer begins: after a closed (or empty) thinking block at the start."""
    think = _THINK.match(text)
    return think.end() if think is not None else 0


def _signs_off(text: str, end: int) -> bool:
    """Nothing but space after `end`, or a short sign-off (see the module)."""
    rest = text[end:].strip()
    if not rest:
        return True
    return (len(rest) <= _SIGN_OFF_MAX and "\n" not in rest and not rest[0].islower()
            and text[end:end + 1] != "(" and _NOT_SIGN_OFF.search(rest) is None)


def _lead_in_ok(lead_in: str) -> bool:
    """A short lead-in of prose: not code (`x = `, `;`, braces, backticks) and not a
    quotation block."""
    lines = [line for line in lead_in.splitlines() if line.strip()]
    return (len(lead_in) <= _LEAD_MAX and len(lines) <= _LEAD_LINES
            and not _holds_code(lead_in)
            and not any(line.lstrip().startswith(">") for line in lines))


def _holds_code(lead_in: str) -> bool:
    """A character of code, or a keyword of one before a space (each word looked for first:
    prose rarely holds one)."""
    return (_CODE_CHAR.search(lead_in) is not None
            or (any(word in lead_in for word in _CODE_WORDS)
                and _CODE_WORD.search(lead_in) is not None))


def _first_structure(text: str, body: int, end: int) -> int | None:
    """Where the first structure in text[body:end] starts: `<tool_code>`, a fence, `{` or
    `[`, or a name (not after a dot) right before `(` or `{`; None when there is none.
    A name ends at an opening `(`/`{`, so each is looked back from."""
    # The first of each opening that ends before `end`: only a `(` is passed over (an opening
    # starts with its own character, so the others' stand after it and hold).
    other = min((at for opening in _OPENINGS if (at := text.find(opening, body, end)) >= 0),
                default=-1)
    paren = text.find("(", body, end)
    while paren >= 0 or other >= 0:
        at = other if paren < 0 or 0 <= other < paren else paren
        if text[at] in "({" and at > body and _WORD_CHAR.match(text, at - 1) is not None:
            name = _NAME_BEFORE.search(text, max(body, at - _NAME_MAX), at + 1)
            if name is not None:
                return name.start()
        if text[at] != "(":
            return at
        paren = text.find("(", at + 1, end)
    return None


def _call_expression(doc: Document, names: ToolNames, start: int, end: int,
                     ) -> tuple[list[dict[str, Any]], tuple[str, ...]] | Refusal:
    """The call `NAME(…)` written at start:end, as an envelope, with the repairs it took;
    or why it is none."""
    source = doc.text[start:end]
    frame = pythonic.list_frame(doc, start, end, f"[{source}]", NAME)
    if frame.refused is None:
        return list(frame.value), frame.repairs
    if frame.refused != "positional_arguments":
        return Refusal(frame.refused)
    return _positional(doc, names, source)


def _positional(doc: Document, names: ToolNames, source: str,
                ) -> tuple[list[dict[str, Any]], tuple[str, ...]] | Refusal:
    """`NAME(value, k=v…)`: the one positional value is the tool's one required parameter."""
    try:
        tree = parse_expression(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Refusal("invalid_python")
    call = tree.body
    if not isinstance(call, ast.Call) or len(call.args) != 1:
        return Refusal("positional_arguments")
    written = pythonic.dotted(call.func)
    match = names.match(written) if written is not None else None
    parameters = doc.schemas.get(match.name) if match is not None else None
    if isinstance(call.args[0], ast.Dict):  # the arguments object, never one value
        if call.keywords:
            return Refusal("positional_arguments")
        return _object_argument(written, call.args[0], parameters)
    required = parameters.get("required") if isinstance(parameters, dict) else None
    if not (isinstance(required, list) and len(required) == 1 and isinstance(required[0], str)):
        return Refusal("positional_arguments")
    if any(kw.arg is None or kw.arg == required[0] for kw in call.keywords):
        return Refusal("positional_arguments")
    repairs: set[str] = set()
    try:
        arguments = {required[0]: literal_value(call.args[0], repairs)}
        arguments.update({kw.arg: literal_value(kw.value, repairs) for kw in call.keywords
                          if kw.arg is not None})
    except (NotLiteral, RecursionError):
        return Refusal("not_literal_arguments")
    return [{"name": written, "arguments": arguments}], (POSITIONAL, *sorted(repairs))


def _object_argument(written: str | None, node: ast.Dict, parameters: Any,
                     ) -> tuple[list[dict[str, Any]], tuple[str, ...]] | Refusal:
    """`NAME({"city": "Paris"})` (a JavaScript-style call): the one object is the arguments
    when every key is a parameter the tool declares; never the value of one parameter."""
    repairs: set[str] = set()
    try:
        arguments = literal_value(node, repairs)
    except (NotLiteral, RecursionError):
        return Refusal("not_literal_arguments")
    if written is None or not isinstance(arguments, dict) or not declared_only(arguments,
                                                                               parameters):
        return Refusal("positional_arguments")
    return [{"name": written, "arguments": arguments}], (OBJECT_ARGUMENT, *sorted(repairs))


class _Reader:
    """The structures of one answer, read from where they start."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.names = doc.names
        self.repairs: list[str] = []

    def named(self, pos: int, name: str) -> tuple[list[dict[str, Any]], int] | Refusal | None:
        """The call of an offered tool `name` written at `pos` as `NAME(…)` or `NAME{…}`;
        None when `name` is no offered tool's (the answer is no call)."""
        match = self.names.match(name)
        if match is None:
            return None
        text = self.doc.text
        brace = pos + len(name)
        if text[brace] == "{":
            read = read_object(text, brace)
            if read is None:
                return Refusal("not_literal_arguments")
            arguments, end, repairs = read
            if not declared_only(arguments, self.doc.schemas.get(match.name)):
                return Refusal("undeclared_parameters")
            self.repairs.extend(repairs)
            return [{"name": name, "arguments": arguments}], end
        inner = self.doc.skip_space(brace + 1)
        if text.startswith("{", inner):  # `NAME({city: 'Paris'})`, JavaScript's way
            read = read_object(text, inner)
            if read is not None and text.startswith(")", self.doc.skip_space(read[1])):
                arguments, end, repairs = read
                if not declared_only(arguments, self.doc.schemas.get(match.name)):
                    return Refusal("undeclared_parameters")
                self.repairs.extend((*repairs, OBJECT_ARGUMENT))
                return [{"name": name, "arguments": arguments}], self.doc.skip_space(end) + 1
        list_end = pythonic.list_end(self.doc, brace)
        if list_end is None:
            return Refusal("incomplete_frame")
        expression = _call_expression(self.doc, self.names, pos, list_end)
        if isinstance(expression, Refusal):
            return expression
        calls, call_repairs = expression
        self.repairs.extend(call_repairs)
        if len(calls) != 1 or calls[0]["name"] != name:
            return Refusal("unrecognised_shape")  # `f(…)(…)`, `f(…).g(…)`: an expression, no call
        return calls, list_end

    def json(self, pos: int) -> tuple[Any, int] | Refusal | None:
        """The JSON value (or JS-style object literal) at `pos`, decoded."""
        doc, text = self.doc, self.doc.text
        if text[pos] == "[" and _NAME_AT.match(text, doc.skip_space(pos + 1)):
            end = pythonic.list_end(doc, pos)  # a pythonic list after a lead-in
            if end is None:
                return Refusal("incomplete_frame")
            frame = pythonic.list_frame(doc, pos, end, text[pos:end], NAME)
            if frame.refused is not None:
                return Refusal(frame.refused)
            self.repairs.extend(frame.repairs)
            return frame.value, end
        end = doc.json_end(pos)
        if end is not None:
            try:
                value, repairs = doc.loads_repaired(text[pos:end])
            except NotJson:
                value = None
            else:
                self.repairs.extend(repairs)
                return value, end
        if text[pos] == "{":
            read = read_object(text, pos)
            if read is not None:
                self.repairs.extend(read[2])
                return read[0], read[1]
        return Refusal("invalid_json")

    def code(self, source_start: int, source_end: int, json: bool = True,
             printing: bool = False) -> Any | Refusal:
        """The calls a code block holds as all of its code: one JSON value (unless the block
        is Python's: a dict there is a program's literal), or calls of offered tools one
        after another (`NAME(…)` / `NAME{…}`, by lines or `;`; the name may have a module
        prefix, `default_api.NAME`). `printing`: a tool_code block, where Gemma writes
        `print(NAME(…))` for the call itself."""
        doc, text = self.doc, self.doc.text
        pos = doc.skip_space(source_start, source_end)
        if pos >= source_end:
            return Refusal("unrecognised_shape")
        if text[pos] in "{[" and not json:
            return Refusal("unrecognised_shape")
        if text[pos] in "{[":
            read = self.json(pos)
            if isinstance(read, Refusal) or read is None:
                return read or Refusal("unrecognised_shape")
            value, end = read
            if doc.skip_space(end, source_end) != source_end:
                return Refusal("unrecognised_shape")
            return value
        calls: list[dict[str, Any]] = []
        while pos < source_end:
            printed = printing and text.startswith("print(", pos)
            at = doc.skip_space(pos + len("print("), source_end) if printed else pos
            head = _CODE_NAME_AT.match(text, at)
            if head is None or not doc.spend():
                return Refusal("unrecognised_shape")  # code that is not only calls: a program
            found = self.named(at, head[1])
            if found is None or isinstance(found, Refusal):
                return found or Refusal("unrecognised_shape")
            more, end = found
            if printed:  # Gemma's `print(default_api.NAME(…))`: the call it prints
                close = doc.skip_space(end, source_end)
                if not text.startswith(")", close):
                    return Refusal("unrecognised_shape")
                end = close + 1
            if end > source_end:
                return Refusal("unrecognised_shape")
            calls.extend(more)
            separators = _SEPARATORS.match(text, end, source_end)
            assert separators is not None  # it matches the empty string
            pos = separators.end()
        return calls

    def structure(self, pos: int) -> tuple[Any, int] | Refusal | None:
        """The calls (an envelope value or a list of call envelopes) of the structure that
        starts at `pos`, and where it ends; a reason when it names a tool but is no call;
        None when it is no structure that can hold a call."""
        text = self.doc.text
        if text.startswith(_CODE_OPEN, pos):
            body = pos + len(_CODE_OPEN)
            close = text.find(_CODE_CLOSE, body)
            if close < 0:
                return Refusal("incomplete_frame")
            found = self.code(body, close, printing=True)
            return found if isinstance(found, Refusal) or found is None else (
                found, close + len(_CODE_CLOSE))
        if text.startswith(("```", "~~~"), pos):
            fence = _FENCE_OPEN.match(text, pos)
            if fence is None:
                return None
            close = text.find("\n" + fence[1], fence.end() - 1)
            if close < 0:
                return Refusal("incomplete_frame")
            found = self.code(fence.end(), close, json=fence[2] not in ("python", "py"),
                              printing=fence[2] == "tool_code")
            end = close + 1 + len(fence[1])
            if self.doc.skip_space(end) < len(text):
                return None  # a fence that prose follows was shown (code_fence's rule too)
            return found if isinstance(found, Refusal) or found is None else (found, end)
        if text[pos] in "{[":
            read = self.json(pos)
            if isinstance(read, tuple):
                return self.unwrapped(*read)
            return read
        if text[pos] == '"':
            return self.double_encoded_string(pos)
        head = _NAME_AT.match(text, pos)
        return self.named(pos, head[1]) if head is not None else None

    def unwrapped(self, value: Any, end: int) -> tuple[Any, int]:
        """A JSON answer that holds a call expression as its text (`{"content": "f(…)"}`):
        the calls of that expression; any other JSON value as it is (repair/envelope.py reads it,
        double-encoded JSON included)."""
        inner = answer_text(value)
        if inner is not None and not inner.lstrip().startswith(("{", "[", '"')):
            reader = _Reader(Document(inner, tools=self.doc.tools, schemas=self.doc.schemas,
                                    names=self.names))
            found = reader.answer()
            if found is not None:
                self.repairs.extend((DOUBLE_ENCODED, *reader.repairs))
                return found[0], end
        return value, end

    def double_encoded_string(self, pos: int) -> tuple[Any, int] | None:
        """A whole answer that is one JSON string: its value (repair/envelope.py reads it)."""
        end = _string_end(self.doc.text, pos)
        if end is None:
            return None
        try:
            value, _ = self.doc.loads_repaired(self.doc.text[pos:end])
        except NotJson:
            return None
        return self.unwrapped(value, end) if isinstance(value, str) else None

    def answer(self) -> tuple[Any, int, int] | None:
        """(calls, start, end) of the structure that stands as the answer; None when the
        answer holds none."""
        text = self.doc.text
        body = self.doc.skip_space(_body_start(text))
        if body >= len(text):
            return None
        if text[body] == '"':
            start = body  # a whole answer that is one JSON string
        else:
            first = _first_structure(text, body, min(len(text), body + _LEAD_MAX + 1))
            if first is None:
                return None
            start = first
        if self.doc.claimed.end_of(start) is not None:
            return None  # an earlier format's frame (bare JSON, a fence) read it already
        if start > body and not _lead_in_ok(text[body:start]):
            return None
        line = text[max(body, text.rfind("\n", body, start) + 1):start]
        if line.strip() and not line.rstrip().endswith(":"):
            return None  # a lead-in on the call's own line ends with a colon
        named = _NAME_AT.match(text, start) is not None
        if named and start > body and not text[body:start].rstrip().endswith(":"):
            return None  # a bare NAME(…) after prose: only after a lead-in ending with ":"
        if start > body and (text[start - 1].isalnum() or text[start - 1] == "_"):
            return None  # `os.functools[…]`, `x{…}`: glued to a word, part of an expression
        if text.startswith(("```", "~~~"), start) and start > body and text[start - 1] != "\n":
            return None  # a fence opens a line
        found = self.structure(start)
        if found is None or isinstance(found, Refusal):
            return None  # no call: its text is the model's prose, nothing to report
        value, end = found
        if not _signs_off(text, end):
            return None
        return value, start, end


_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)


def _string_end(text: str, pos: int) -> int | None:
    """End of the JSON string literal at `pos` (after its closing quote), or None."""
    match = _JSON_STRING.match(text, pos)
    return match.end() if match is not None else None


def find_frames(doc: Document) -> Iterator[Frame]:
    """The one structure that stands as the answer, when it can hold a call."""
    if not doc.tools or not doc.spend():
        return
    reader = _Reader(doc)
    found = reader.answer()
    if found is None:
        return
    value, start, end = found
    yield Frame(NAME, start, end, value=value, listed=isinstance(value, list),
                repairs=tuple(dict.fromkeys(reader.repairs)))


_IDENT = seq(run("[A-Za-z_]", 1, 1), run(r"[\w\-]", 0, 127))
SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    openers=(Opener(seq(_IDENT, alt("(", "{")), "start"),
             Opener(seq('"', SPACE, alt("{", "[")), "start"),
             Opener(seq(alt("```", "~~~"), alt("tool_code", "tool_call", "json"),
                        run(r"[ \t\r]", 0, 64), "\n"), "line"),
             # a Python block that opens with a call expression (one that does not flows)
             Opener(seq(alt("```", "~~~"), alt("python", "py"), run(r"[ \t\r]", 0, 64), "\n",
                        SPACE, _IDENT, "("), "line"),
             # after a lead-in on the same line, which ends with a colon ("Sure, deleting
             # that now: {…}")
             Opener(seq(":", run(r"[ \t]", 1, 16), alt("{", "[", seq(_IDENT, alt("(", "{"))))),
             # a bare NAME(…) on the line after one (`{`, `[` at a line's start are held
             # by bare_json's and pythonic's openers)
             Opener(seq(":", run(r"[ \t]", 0, 16), "\n", SPACE, _IDENT, alt("(", "{"))),
             *literals("<tool_code>")),
)
