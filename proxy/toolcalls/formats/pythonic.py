"""Pythonic calls (Llama 3.2 / 4, Gemma, ToolACE, OLMo 3): `[get_weather(city="Paris"), f(n=1)]`.

Read with Python's `ast` — literals only, nothing is ever evaluated. Taken when the list is
the whole content, the closing block of the content (starting on its own line, possibly after
Llama 3.2's `<|python_tag|>`), or wrapped in Llama 4's `<|python_start|>…<|python_end|>` (the
end token may be missing when the list closes the content), or OLMo 3's
`<function_calls>…</function_calls>` block of one call per line, without brackets.
Arguments must be keywords with literal values (`true`/`false`/`null` are read as JSON's,
recorded as a repair).
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Iterator
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # C, not in typeshed
from typing import Any

from ..framing.steps import OpenerMatches
from ..opener_patterns import SPACE, Opener, literals, opt, run, seq
from ..repair.escapes import python_body_as_written
from ..repair.python_literal import NotLiteral, literal_value, parse_expression
from ..repair.regexes import join_surrogate_pairs
from ..scan import Document
from ..types import Frame
from .spec import FormatSpec

NAME = "pythonic"
# A line that opens the list, `[` then the first call's name; the content ends with `)]`.
_LINE_START = re.compile(r"[ \t]*+(<\|python_tag\|>\s*+)?(?=\[\s*+[A-Za-z_][\w.]{0,200}+\()\[")
_END = re.compile(r"\)\s*+\]\Z")
_WRAPPED = re.compile(r"<\|python_start\|>\s*+(?=\[)")
_WRAP_START = "<|python_start|>"
_WRAP_END = "<|python_end|>"
# OLMo 3 (vLLM's `olmo3` parser): calls one per line inside the block, no list brackets.
_BLOCK = "<function_calls>"
_BLOCK_END = "</function_calls>"
_BLOCK_OPEN = re.compile(re.escape(_BLOCK) + r"\s*+(?=[A-Za-z_\[])")
_CALL_LINE = re.compile(r"[A-Za-z_][\w.]{0,200}+\(")
MARKERS = ()  # none: a list closing the content is recognised by its shape
# But every frame is an OLMo block, a wrapped list or a list (find_frames): prose without a
# `[` and without those tokens is not read here.
NEEDS = (("[",), (_BLOCK,), (_WRAP_START,))
_MAX_SOURCE = 4_000_000  # a list of calls longer than this is not parsed
# ast costs about 10 µs per node: a list with more syntax than this (outside its strings) is
# not parsed. Long string values (file contents) cost little and are not counted.
_MAX_SYNTAX = 2_000
_STRINGS = re.compile(r'"(?:[^"\\]++|\\.)*+"|\'(?:[^\'\\]++|\\.)*+\'', re.DOTALL)
_MAX_LINES = 400  # lines looked at, from the end, for the one that opens the list
_DOUBLE = re.compile(r'"(?:[^"\\\n]++|\\.)*+"', re.DOTALL)  # a one-line literal's extent
_SINGLE = re.compile(r"'(?:[^'\\\n]++|\\.)*+'", re.DOTALL)
_LITERALS = {'"': _DOUBLE, "'": _SINGLE,
             '"""': re.compile(r'"""(?:[^"\\]++|\\.|"(?!""))*+"""', re.DOTALL),
             "'''": re.compile(r"'''(?:[^'\\]++|\\.|'(?!''))*+'''", re.DOTALL)}
# A one-line literal that holds raw newlines (a multi-line shell command written inline):
# not Python, but the list ends where it would (vLLM's `lfm2` escapes them and reads it).
_RAW_LINES = {'"': re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL),
              "'": re.compile(r"'(?:[^'\\]++|\\.)*+'", re.DOTALL)}
# What the end of a list depends on: brackets, and the strings and comments that hide them.
_LIST_TOKEN = re.compile(r"[\[\](){}#]|'''|\"\"\"|['\"]")
_LONG_LITERAL = 1_024  # literals longer than this are decoded apart from ast (see _skeleton)
_PLACEHOLDER = "_tc_literal_"
_RAW_SURROGATE = re.compile(r"[\ud800-\udfff]")


def dotted(node: ast.AST) -> str | None:
    """The dotted name a call's function node writes (`a.b.c`), or None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _calls_in_list(source: str, strings: dict[str, str] | None = None,
           ) -> tuple[list[dict[str, Any]], tuple[str, ...]] | str:
    """The calls in a pythonic list, with repairs; or why it is not one. `strings`: the
    placeholder names in `source` that stand for decoded string literals (see _skeleton)."""
    try:
        tree = parse_expression(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "invalid_python"
    if not isinstance(tree.body, ast.List) or not tree.body.elts:
        return "unrecognised_shape"
    repairs: set[str] = set()
    calls = []
    for item in tree.body.elts:
        name = dotted(item.func) if isinstance(item, ast.Call) else None
        if name is None or not isinstance(item, ast.Call):
            return "unrecognised_shape"
        if item.args or any(keyword.arg is None for keyword in item.keywords):
            return "positional_arguments"
        try:
            arguments = {_keyword_name(kw.arg): literal_value(kw.value, repairs, strings)
                         for kw in item.keywords if kw.arg is not None}
        except (NotLiteral, RecursionError):
            return "not_literal_arguments"
        calls.append({"name": name, "arguments": arguments})
    return calls, tuple(sorted(repairs))


def _small_enough(source: str) -> bool:
    """Whether `source` has little enough syntax (its strings left out) to parse cheaply."""
    if sum(source.count(char) for char in "(,=") <= _MAX_SYNTAX:
        return True
    quotes = sum(source.count(q) - source.count("\\" + q) for q in "\"'")  # unescaped, about
    if quotes > _MAX_SYNTAX:
        return False  # many strings and much syntax: far more calls than any response makes
    bare = _STRINGS.sub("''", source)  # few (long) strings: count what is outside them
    return sum(bare.count(char) for char in "(,=[{:") <= _MAX_SYNTAX


@dataclass
class _Skeleton:
    """A list's source with its long string literals taken out, and what was counted."""

    source: str  # long "…" literals replaced by placeholder names
    strings: dict[str, str]  # placeholder name → the literal's value
    syntax: int  # how many of `(,=[{:` occur outside string literals
    literals: int


def _read_alike(source: str, quote: int, end: int) -> bool:
    r"""Whether Python reads the "…" literal source[quote:end] as the C JSON decoder did: one
    line, no NUL, no raw surrogate, and no `\/` (the one escape they read differently; any
    escape JSON does not define already failed the decoder)."""
    if any(source.find(char, quote, end) >= 0 for char in ("\n", "\r", "\x00", "\\/")):
        return False
    return source.isascii() or _RAW_SURROGATE.search(source, quote, end) is None


def _skeleton(source: str) -> _Skeleton | None:
    """`source` with each long "…" literal (a file's contents) replaced by a placeholder name
    and decoded by the C JSON string decoder, which costs far less than ast's tokenizer on a
    megabyte; syntax outside literals counted on the way. None when the scan stops short (a
    triple-quoted or unterminated literal, too many literals): ast reads the source whole."""
    pieces: list[str] = []
    strings: dict[str, str] = {}
    kept = pos = literals = syntax = 0
    upcoming = {char: -1 for char in "\"'#"}  # the next position of each, found by str.find
    while True:
        for char, at in upcoming.items():
            if at < pos:
                found = source.find(char, pos)
                upcoming[char] = len(source) if found < 0 else found
        stop = min(upcoming.values())
        syntax += _syntax_count(source, pos, stop)
        if syntax > _MAX_SYNTAX:  # far more than any list of calls: counted no further
            return _Skeleton(source, {}, syntax, literals)
        if stop >= len(source):
            break
        quote = source[stop]
        if quote == "#":  # a comment, counted as code
            line_end = source.find("\n", stop)
            pos = len(source) if line_end < 0 else line_end
            syntax += _syntax_count(source, stop, pos)
            continue
        literals += 1
        if literals > _MAX_SYNTAX:  # far more than any list of calls: counted no further
            return _Skeleton(source, {}, 0, literals)
        if source.startswith(quote * 3, stop):
            return None
        if quote == '"':  # the C decoder finds its end (and value) when Python would too
            try:
                value, pos = scanstring(source, stop + 1, False)
            except ValueError:
                pos = -1
            if pos >= 0 and _read_alike(source, stop, pos):
                prefixed = stop > 0 and (source[stop - 1].isalnum() or source[stop - 1] == "_")
                if pos - stop > _LONG_LITERAL and not prefixed:
                    name = f"{_PLACEHOLDER}{len(strings)}_"
                    pieces += [source[kept:stop], name]
                    strings[name] = join_surrogate_pairs(value)
                    kept = pos
                continue
        literal = (_DOUBLE if quote == '"' else _SINGLE).match(source, stop)
        if literal is None:
            return None
        pos = literal.end()
    pieces.append(source[kept:])
    if any(_PLACEHOLDER in piece for piece in pieces[::2]):
        return None  # the model wrote a name like ours: do not mistake it for a literal
    return _Skeleton("".join(pieces), strings, syntax, literals)


def _syntax_count(source: str, start: int, stop: int) -> int:
    """How many of `(,=[{:` source[start:stop] holds (str.count, C speed)."""
    return sum(source.count(char, start, stop) for char in "(,=[{:")


def _parsed_list(source: str) -> tuple[list[dict[str, Any]], tuple[str, ...]] | str:
    """The calls in `source` (or why it is not a list of calls; "too_large" when it has too
    much syntax). Long "…" literals are decoded at C speed and the rest parsed by ast; when
    that does not give a whole answer (each placeholder read once, as a value), ast reads
    the source whole, so the result is the same either way."""
    skeleton = _skeleton(source) if len(source) > _LONG_LITERAL else None
    if skeleton is None:
        return _calls_in_list(source) if _small_enough(source) else "too_large"
    if skeleton.syntax > _MAX_SYNTAX or skeleton.literals > _MAX_SYNTAX:
        if sum(source.count(char) for char in "(,=") > _MAX_SYNTAX:
            return "too_large"
        return _calls_in_list(source)  # little syntax after all (as _small_enough's first test)
    if not skeleton.strings:
        return _calls_in_list(source)
    parsed = _calls_in_list(skeleton.source, skeleton.strings)
    if isinstance(parsed, str) or skeleton.strings:
        return _calls_in_list(source)  # not a whole answer: read the source itself
    return parsed


def list_frame(doc: Document, start: int, end: int, source: str, fmt: str = NAME) -> Frame:
    """The frame (of format `fmt`) of the pythonic list `source`, written at start:end: its
    calls decoded, or refused with the reason (formats that wrap such lists use this too)."""
    if len(source) > _MAX_SOURCE or not doc.spend():
        return Frame(fmt, start, end, refused="too_large")
    parsed = _parsed_list(source)
    if parsed == "invalid_python":
        parsed = _rewritten_list(source) or parsed
    if isinstance(parsed, str):
        return Frame(fmt, start, end, refused=parsed)
    calls, repairs = parsed  # handed over decoded: the engine checks they serialise
    return Frame(fmt, start, end, value=calls, listed=True, repairs=repairs)


# What models write in pythonic calls that Python does not read, and vLLM's `lfm2` does:
# raw control characters (a newline, NUL) inside a one-line string, integers written with
# leading zeros (`month=07`), and a lone string argument holding its own quote unescaped
# (`bash(command='sed -n '1,9p' f.py')`). Each rewrite is tried only when the list does not
# parse as written, and named as a repair.
_LEADING_ZEROS = re.compile(r"(?<![\w.])0+(?=[0-9])(?![0-9]*+[.eEjJxXoObB_])")
_ANY_LITERAL = re.compile(r"'''(?:[^'\\]++|\\.|'(?!''))*+'''"
                          r'|"""(?:[^"\\]++|\\.|"(?!""))*+"""'
                          r"|'(?:[^'\\]++|\\.)*+'|\"(?:[^\"\\]++|\\.)*+\"", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f]")
_LONE_STRING_CALL = re.compile(r"\[\s*+([A-Za-z_][\w.]{0,200}+)\(\s*+([A-Za-z_]\w{0,200}+)\s*+="
                               r"\s*+(['\"])(.*)\3\s*+\)\s*+\]", re.DOTALL)


# An argument named with a Python keyword (`from="SFO"`, `class="economy"`), which Python
# does not read and vLLM's `pythonic` parser and SGLang's read through their own tokenizers:
# spelled apart while the list is parsed, then named as written.
_KEYWORD_PREFIX = "_tc_kw_"
_KEYWORD_ARGUMENT = re.compile(r"(?<=[(,])(\s*+)(" + "|".join(
    sorted(keyword.kwlist, key=len, reverse=True)) + r")(?=\s*+=(?!=))")


def _keyword_name(name: str) -> str:
    """An argument's name as the model wrote it (see _KEYWORD_ARGUMENT)."""
    if name.startswith(_KEYWORD_PREFIX) and keyword.iskeyword(name[len(_KEYWORD_PREFIX):]):
        return name[len(_KEYWORD_PREFIX):]
    return name


def _keyword_arguments_spelled_apart(code: str) -> str:
    return _KEYWORD_ARGUMENT.sub(lambda m: m[1] + _KEYWORD_PREFIX + m[2], code)


def _escape_control(match: re.Match[str]) -> str:
    return {"\n": "\\n", "\r": "\\r", "\x00": "\\x00"}.get(
        match[0], f"\\x{ord(match[0]):02x}")


def _rewritten_source(source: str) -> tuple[str, tuple[str, ...]]:
    """`source` with raw control characters escaped inside its string literals and leading
    zeros dropped from the integers outside them; and the repairs that took."""
    pieces: list[str] = []
    pos = 0
    repairs: set[str] = set()
    for literal in _ANY_LITERAL.finditer(source):
        code = source[pos:literal.start()]
        fixed = _LEADING_ZEROS.sub("", code)
        repairs.update(("leading_zero_ints",) if fixed != code else ())
        spelled = _keyword_arguments_spelled_apart(fixed)
        repairs.update(("keyword_argument_names",) if spelled != fixed else ())
        fixed = spelled
        text = literal[0]
        if not text.startswith(("'''", '"""')):
            if not code.endswith(("r", "R")):  # the model's backslashes, before any added
                text = text[0] + python_body_as_written(text[1:-1], text[0]) + text[0]
            escaped = _CONTROL.sub(_escape_control, text)
            repairs.update(("control_chars_in_strings",) if escaped != text else ())
            text = escaped
        pieces += [fixed, text]
        pos = literal.end()
    code = source[pos:]
    fixed = _LEADING_ZEROS.sub("", code)
    repairs.update(("leading_zero_ints",) if fixed != code else ())
    spelled = _keyword_arguments_spelled_apart(fixed)
    repairs.update(("keyword_argument_names",) if spelled != fixed else ())
    pieces.append(spelled)
    return "".join(pieces), tuple(sorted(repairs))


def _lone_string_requoted(source: str) -> str | None:
    """A list of one call with one string argument (`[f(k='…')]`) whose text holds its own
    quote unescaped: the argument is all of it (the call's structure leaves no other
    reading), its inner quotes escaped; None when it is not that, or when the text could
    also be read as several arguments (`…', other='…`)."""
    match = _LONE_STRING_CALL.fullmatch(source.strip())
    if match is None:
        return None
    quote, body = match[3], python_body_as_written(match[4], match[3])
    if re.search(re.escape(quote) + r"\s*+,\s*+\w+\s*+=", body):
        return None
    inner = re.sub(r"(?<!\\)((?:\\\\)*+)" + re.escape(quote), r"\1\\" + quote, body)
    inner = _CONTROL.sub(_escape_control, inner)
    return f"[{match[1]}({match[2]}={quote}{inner}{quote})]"


def _rewritten_list(source: str) -> tuple[list[dict[str, Any]], tuple[str, ...]] | None:
    """The calls of a list that parses only once rewritten (see above), with the repairs."""
    rewritten, repairs = _rewritten_source(source)
    if repairs:
        parsed = _parsed_list(rewritten)
        if not isinstance(parsed, str):
            return parsed[0], tuple(sorted({*parsed[1], *repairs}))
    requoted = _lone_string_requoted(source)
    if requoted is not None:
        parsed = _parsed_list(requoted)
        if not isinstance(parsed, str):
            return parsed[0], tuple(sorted({*parsed[1], "nested_quotes_escaped"}))
    return None


def list_end(doc: Document, pos: int, items: list[int] | None = None) -> int | None:
    """Where the Python list whose `[` stands at `pos` ends (after its `]`), by Python's own
    syntax: brackets outside string literals and comments. None when it never ends (cut, an
    unterminated string) or the document's budget ran out. `items` collects where each of
    its items' calls ends (a `)` back at the list's own depth)."""
    text = doc.text
    depth = 0
    while (token := _LIST_TOKEN.search(text, pos)) is not None:
        char = token[0]
        pos = token.end()
        if char in "[({":
            depth += 1
        elif char in "])}":
            depth -= 1
            if depth <= 0:
                return pos if depth == 0 else None
            if depth == 1 and char == ")" and items is not None:
                items.append(pos)
        elif char == "#":
            line_end = text.find("\n", pos)
            if line_end < 0:
                return None
            pos = line_end
        else:
            literal = _LITERALS[char].match(text, token.start())
            if literal is None and char in _RAW_LINES:
                literal = _RAW_LINES[char].match(text, token.start())
            if literal is None:
                return None
            pos = literal.end()
        if not doc.budget.fail_attempt():
            return None
    return None


def _cut_list_head(doc: Document, body: int, items: list[int]) -> list[dict[str, Any]] | None:
    """The whole calls of a list cut before its end (see Frame.head): the items up to the
    last call that closed, read as a list of their own; None when none did."""
    if not items or doc.budget.exhausted:
        return None
    parsed = _parsed_list(doc.text[body:items[-1]] + "]")
    return None if isinstance(parsed, str) else parsed[0]


def wrapped_list(doc: Document, start: int, body: int, close: str, fmt: str = NAME) -> Frame:
    """The frame of the pythonic list whose `[` stands at `body`, ended by the `close` token
    (Llama 4's `<|python_end|>`, LFM2's `<|tool_call_end|>`): the list ends where Python's
    syntax ends it, so a string that names the token is read whole. Without the token, it is
    a frame when nothing but space follows the list (a repair); a list that never ends is an
    incomplete frame (its text stays), one followed by anything else is not a list we read."""
    text = doc.text
    items: list[int] = []
    end = list_end(doc, body, items)
    if end is None:
        return Frame(fmt, start, len(text), closed=False, complete=False,
                     head=_cut_list_head(doc, body, items))
    after = doc.skip_space(end)
    if text.startswith(close, after):
        return list_frame(doc, start, after + len(close), text[body:end], fmt)
    if after < len(text):
        return Frame(fmt, start, end, refused="unrecognised_shape")
    frame = list_frame(doc, start, end, text[body:end], fmt)
    if frame.refused is not None:
        return frame
    return Frame(fmt, start, end, closed=False, value=frame.value, listed=True,
                 repairs=(*frame.repairs, "missing_close_tag"))


def _wrapped_lists(doc: Document) -> Iterator[Frame]:
    openers = OpenerMatches(doc, _WRAPPED, _WRAP_START, keep_backticked=True)
    for match in openers:
        frame = wrapped_list(doc, match.start(), match.end(), _WRAP_END)
        yield frame
        if not frame.complete:
            return  # a list that never ends: the rest of the text may all be its strings
        openers.taken_to = frame.end


def _lines_as_list(body: str) -> str | None:
    """OLMo 3's calls, one per line, as the source of a Python list (vLLM's reading: each
    non-blank line is one call); None when a line does not start like a call."""
    stripped = body.strip()
    if stripped.startswith("["):  # written as a list already
        return stripped
    lines = [line.strip() for line in stripped.splitlines() if line.strip()]
    if not lines or not all(_CALL_LINE.match(line) for line in lines):
        return None
    return "[" + ", ".join(lines) + "]"


def _olmo_blocks(doc: Document) -> Iterator[Frame]:
    """OLMo 3's `<function_calls>` blocks; the closing tag may be missing when the calls
    close the content."""
    text = doc.text
    openers = OpenerMatches(doc, _BLOCK_OPEN, _BLOCK, keep_backticked=True)
    for match in openers:
        close = text.find(_BLOCK_END, match.end())
        closed = close >= 0
        body_end = close if closed else len(text.rstrip())
        source = _lines_as_list(text[match.end():body_end])
        if source is None:
            continue  # prose that names the tag: it stays text
        stop = close + len(_BLOCK_END) if closed else body_end
        frame = list_frame(doc, match.start(), stop, source)
        if not closed and frame.refused is None:
            frame = Frame(NAME, frame.start, frame.end, closed=False, value=frame.value,
                          listed=True, repairs=(*frame.repairs, "missing_close_tag"))
        yield frame
        openers.taken_to = stop


def _closing_list(doc: Document) -> Iterator[Frame]:
    """The list that ends the content, opening at the start of a line (or of the content)."""
    text = doc.text
    end = len(text.rstrip())
    if _END.search(text, max(0, end - 64), end) is None:
        return
    floor = max(0, end - _MAX_SOURCE)
    line_start = end
    for _ in range(_MAX_LINES):
        if line_start <= floor:
            return
        line_start = text.rfind("\n", 0, line_start - 1) + 1
        opening = _LINE_START.match(text, line_start)
        if opening is not None:  # the frame takes Llama 3.2's <|python_tag|> when written
            start = opening.start(1) if opening[1] else opening.end() - 1
            yield list_frame(doc, start, end, text[opening.end() - 1:end])
            return


def _encloses(outer: Frame, inner: Frame) -> bool:
    """Whether `inner` stands inside `outer` (text of its strings): it starts there, and ends
    there too unless it never ends (then it runs to the end of the text)."""
    return (outer is not inner and outer.complete and outer.start <= inner.start < outer.end
            and (inner.end <= outer.end or not inner.complete))


def find_frames(doc: Document) -> Iterator[Frame]:
    """OLMo 3's blocks, else Llama 4's wrapped lists anywhere, else the list closing (or
    making) the content. A block or list inside another one's span is text of its strings
    (a file that quotes a call), whichever kind encloses it and whether or not the
    enclosing one is read as calls."""
    tiers = [list(_olmo_blocks(doc)) if doc.has(_BLOCK) else [],
             list(_wrapped_lists(doc)) if doc.has(_WRAP_START) else [],
             list(_closing_list(doc))]
    every = [frame for tier in tiers for frame in tier]
    for tier in tiers:
        kept = [frame for frame in tier if not any(_encloses(outer, frame) for outer in every)]
        if kept:
            yield from kept
            return


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS, needs=NEEDS,
    openers=(Opener(seq(opt(seq("<|python_tag|>", SPACE)), "[", SPACE,
                            run("[A-Za-z_]", 1, 1), run(r"[\w.]", 0, 200), "("), "line"),
             *literals("<|python_start|>", "<function_calls>")),
    vllm=("pythonic", "llama4_pythonic", "olmo3"),
    sglang=("pythonic",),
    doctor_parser="pythonic",
    wrapper_tags=("function_calls",),
)
