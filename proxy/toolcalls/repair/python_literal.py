"""A reader of Python literals (single-quoted dicts and lists, True/False/None) as JSON values,
which evaluates nothing: C-speed rewrites to JSON first, `ast` on small texts only."""

from __future__ import annotations

import ast
import math
import re
import unicodedata
import warnings
from typing import Any

import orjson

from ..exact_json import exact_int, loads
from .at_errors import RepairedText
from .escapes import as_written, python_escape_undefined, python_source_as_written
from .regexes import (
    _CONTROL,
    _TRAILING_COMMA_ANY,
    _TRAILING_COMMA_UNMARKED,
    _escape_control,
    _names_as_json,
    join_surrogate_pairs,
)


class NotLiteral(ValueError):
    """A Python syntax node that is not a plain literal."""


_JSON_NAMES = {"true": True, "false": False, "null": None}
_MAX_LITERAL = 256_000  # Python-literal parsing (ast) is not tried on longer text
# ast costs about 10 µs per node: a literal with more syntax than this (`(,:[{=` outside its
# strings) is not given to it. Literals in the common style are read without ast (below).
_MAX_AST_SYNTAX = 1_000


def _number(node: ast.AST) -> int | float | None:
    """The value of a numeric literal node (with any unary signs), else None."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _number(node.operand)
        if operand is None:
            return None
        return -operand if isinstance(node.op, ast.USub) else operand
    return None


def literal_value(node: ast.AST, repairs: set[str],
                  strings: dict[str, str] | None = None) -> Any:
    """The JSON value of a Python literal node (JSON's `true`/`false`/`null` names allowed,
    noted in `repairs`; surrogate-pair escapes read as JSON reads them; an integer past 64
    bits kept exact, see exact_int). Never evaluates anything: any other node raises
    NotLiteral. `strings` maps placeholder names that stand for string literals decoded
    beforehand to their values; each is taken (popped) once."""
    if isinstance(node, ast.Name) and strings and node.id in strings:
        return strings.pop(node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return join_surrogate_pairs(node.value)
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, bool)):
        return node.value
    if isinstance(node, ast.Constant | ast.UnaryOp):
        number = _number(node)
        if isinstance(number, int):
            try:
                return exact_int(number)
            except ValueError:  # more digits than Python writes
                raise NotLiteral from None
        if isinstance(number, float) and math.isfinite(number):
            return number
        raise NotLiteral
    if isinstance(node, ast.List | ast.Tuple):
        return [literal_value(item, repairs, strings) for item in node.elts]
    if isinstance(node, ast.Set):  # JSON has no sets: a list, in the order written (vLLM's)
        repairs.add("set_as_list")
        return [literal_value(item, repairs, strings) for item in node.elts]
    if isinstance(node, ast.Dict):
        result = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Name) and strings and key.id in strings:
                name = strings.pop(key.id)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                name = join_surrogate_pairs(key.value)
            else:
                raise NotLiteral
            result[name] = literal_value(value, repairs, strings)
        return result
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        repairs.add("json_literals_in_python")
        return _JSON_NAMES[node.id]
    raise NotLiteral


def parse_expression(source: str) -> ast.Expression:
    """`ast.parse` of model text as one expression, without the SyntaxWarnings Python prints
    to stderr for what it finds odd in it (`"\\/"`, `1is 1`): model text is not our code. A
    string holding an escape Python does not define keeps its backslashes as written (see
    repair.escapes), where Python would refuse it or read its `\\n` as a newline."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(python_source_as_written(source.strip()), mode="eval")


# --- Python literals read as JSON, in linear time -----------------------------------------------
#
# A Python literal in the style models write (`{'a': 'b', 'c': [1, True, None]}`) is turned
# into the JSON text of the same value, and that is decoded: strings rewritten with JSON's
# quotes and escapes, True/False/None spelled as JSON, trailing commas dropped. Every step is a
# str method or a C-speed regex over the whole text, so a megabyte costs milliseconds where
# ast costs seconds. Whatever JSON does not read the same way (tuples, `1.`, `+1`, implicit
# concatenation, prefixes, comments, Python-only escapes the rewrite does not know) fails to
# decode, and only then is ast tried, on little syntax only.

_PY_STRING = re.compile(r"""('[^'\\\n\r]*+(?:\\.[^'\\\n\r]*+)*+'"""
                        r"""|"[^"\\\n\r]*+(?:\\.[^"\\\n\r]*+)*+")""", re.DOTALL)
# A Python escape that JSON writes otherwise (`\'` aside: it is rewritten as a bare quote).
_NON_JSON_ESCAPE = re.compile(r"\\(?![\"bfnrt]|u[0-9a-fA-F]{4})")
_PY_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"
                        r"|N\{([^}\n]{1,100})\}|([0-7]{1,3})|(\r\n|\r|\n)|(.))", re.DOTALL)
_PY_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f",
                      "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_CONTROLS = tuple(chr(c) for c in range(32))
_MAX_TOKENS = 8_192  # string literals decoded one at a time (text in mixed quotes), at most
_MISSING = object()


def _py_unescape(match: re.Match[str]) -> str:
    hex2, hex4, hex8, name, octal, newline, other = match.groups()
    if hex2 or hex4 or hex8:
        code = int(hex2 or hex4 or hex8, 16)
        if code > 0x10FFFF:
            raise NotLiteral
        return chr(code)
    if name is not None:
        try:
            return unicodedata.lookup(name)
        except KeyError:
            raise NotLiteral from None
    if octal:
        return chr(int(octal, 8))
    if newline:
        return ""  # a line continuation
    if other in "xuUN":
        raise NotLiteral  # a malformed escape: Python refuses the literal
    return _PY_SIMPLE_ESCAPES.get(other, "\\" + other)  # unknown escapes keep the backslash


def _json_body(token: str) -> str:
    """One Python string literal (quotes included) as the body of a JSON string literal."""
    body = token[1:-1]
    if "\\" not in body and not any(c in body for c in _CONTROLS):
        return body if token[0] == '"' else body.replace('"', '\\"')
    if python_escape_undefined(body):  # its backslashes as written (see repair.escapes)
        value = as_written(body, token[0])
    else:
        value = join_surrogate_pairs(_PY_ESCAPE.sub(_py_unescape, body))
    try:
        return orjson.dumps(value).decode()[1:-1]
    except TypeError:  # a lone surrogate
        raise NotLiteral from None


def _escape_raw_control(match: re.Match[str]) -> str:
    return match[0] if match[0] == "\x00" else _escape_control(match)


# The escapes of a single-quoted literal that its quotes' swap would misread, in the order they
# are rewritten (escaped backslashes first: a backslash pair is read from the left), each as
# the JSON escape of the same character, which holds no quote.
_QUOTE_ESCAPES = (("\\\\", "\\u005c"), ("\\'", "\\u0027"), ('\\"', "\\u0022"))


def single_quotes_as_json(source: str) -> str | None:
    """A literal whose strings are all single-quoted, with JSON's quotes: its escaped
    backslashes and quotes written as JSON escapes, each `"` escaped, each `'` made `"` (a
    string's brackets and ends stay where they were; only `"` and escapes change length).
    None when `source` holds what this rewrite cannot mark or does not read as Python does (a
    carriage return, `\\/`)."""
    if "\r" in source or ("\\" in source and "\\/" in source):
        return None
    text = source
    if "\\" in text:
        for escape, json_escape in _QUOTE_ESCAPES:
            text = text.replace(escape, json_escape)
    return text.replace('"', '\\"').replace("'", '"')


def _single_quoted_at_once(source: str) -> Any:
    """The value of a literal whose strings are all single-quoted, rewritten as JSON by
    str.replace over the whole text (no string is handled alone, so a megabyte of short
    strings costs as little as one long one), or _MISSING. Quotes are made JSON's (see
    single_quotes_as_json), then the repairs the decoder asks for are made (RepairedText),
    else True/False/None and `,]`/`,}` are all replaced with a carriage return after them,
    which in a string makes the strict decoder refuse it. Whatever else Python reads otherwise
    (a `"` string, `\\/`, a raw line break or an escape JSON does not define inside a string,
    `[,]`) fails to decode or is refused here, and the string-by-string rewrite
    (_python_parts) decides."""
    text = single_quotes_as_json(source)
    if text is None:
        return _MISSING
    repaired = RepairedText(text, escapes=False).value()
    if repaired is not None:
        return repaired[0]
    text = _names_as_json(text, "\r")
    marked = text.replace(",]", "\r]").replace(",}", "\r}") if "," in text else text
    try:
        value = loads(marked)
    except orjson.JSONDecodeError as error:
        if not marked.startswith(",", error.pos):
            return _MISSING
        marked = _TRAILING_COMMA_UNMARKED.sub("\r", marked)  # with space before the bracket
        try:
            value = loads(marked)
        except orjson.JSONDecodeError:
            return _MISSING
    if marked != text:  # a comma dropped: none may follow an opening bracket (`[,]`)
        squeezed = text.translate(_NO_SPACE)
        if "[," in squeezed or "{," in squeezed:
            return _MISSING
    return value


def _single_quoted_parts(source: str) -> tuple[str, list[str]] | None:
    """(code joined by NUL, JSON string bodies) when every string literal is single-quoted:
    then, escaped backslashes and quotes set aside (\\x01, \\x02), each `'` delimits a
    string and str.split finds them all. None when that does not hold (a `"` or backslash
    outside strings, an odd count) or a body holds what this rewrite does not read as Python
    does (a raw line break, an escape JSON writes otherwise)."""
    if "\x00" in source or "\x01" in source or "\x02" in source:
        return None
    marked = source.replace("\\\\", "\x01").replace("\\'", "\x02") if "\\" in source else source
    parts = marked.split("'")
    if len(parts) % 2 == 0:
        return None
    code = "\x00".join(parts[0::2])
    if any(c in code for c in '"\\\x01\x02'):
        return None
    bodies = "\x00".join(parts[1::2])
    if "\n" in bodies or "\r" in bodies:
        return None
    if "\\" in bodies and _NON_JSON_ESCAPE.search(bodies):
        return None
    bodies = bodies.replace('\\"', "\x03").replace('"', '\\"').replace("\x03", '\\"')
    bodies = bodies.replace("\x02", "'").replace("\x01", "\\\\")
    if any(c in bodies for c in _CONTROLS[1:]):
        bodies = _CONTROL.sub(_escape_raw_control, bodies)
    return code, bodies.split("\x00")


def _python_parts(source: str) -> tuple[str, list[str]] | None:
    """(code joined by NUL, JSON string bodies) of Python literal `source`: every string
    literal rewritten as the body of the JSON string of its value. None when that cannot be
    done in linear time or a literal is malformed."""
    if "'" in source:
        parts = _single_quoted_parts(source)
        if parts is not None:
            return parts
    if "\x00" in source or source.count("'") + source.count('"') > 2 * _MAX_TOKENS:
        return None
    pieces = _PY_STRING.split(source)
    try:
        bodies = [_json_body(token) for token in pieces[1::2]]
    except NotLiteral:
        return None
    return "\x00".join(pieces[0::2]), bodies


def _as_json(code: str, bodies: list[str]) -> str:
    """Code (strings marked by NUL) and string bodies put together as JSON text."""
    codes = code.split("\x00")  # one more than the strings
    pieces = [""] * (len(codes) + len(bodies))
    pieces[0::2] = codes
    pieces[1::2] = bodies
    return '"'.join(pieces)


_NO_SPACE = str.maketrans("", "", " \t\n\r\x0b\x0c")


def _decoded_as_json(code: str, bodies: list[str]) -> Any:
    """The value of the rewritten literal, or _MISSING when JSON refuses it. Trailing commas
    are dropped (Python allows them), but not a comma right after an opening bracket (`[,]`
    is no literal)."""
    code = _names_as_json(code)
    if "," in code:
        squeezed = code.translate(_NO_SPACE)
        if "[," in squeezed or "{," in squeezed:
            return _MISSING
    tight = code.replace(",]", "]").replace(",}", "}")
    try:
        return loads(_as_json(tight, bodies))
    except orjson.JSONDecodeError:
        pass
    spaced = _TRAILING_COMMA_ANY.sub("", code) if "," in code else code
    if spaced == tight:
        return _MISSING
    try:  # a trailing comma with space before its bracket (rare: one regex pass for it)
        return loads(_as_json(spaced, bodies))
    except orjson.JSONDecodeError:
        return _MISSING


def _too_much_syntax(code: str) -> bool:
    """Whether `code` (text outside strings) has more syntax than ast reads cheaply."""
    total = 0
    for char in "(,:[{=":
        total += code.count(char)
        if total > _MAX_AST_SYNTAX:
            return True
    return False


def read_python_literal(text: str) -> Any:
    """The JSON value of Python literal `text` (dicts, lists, tuples, strings, numbers,
    True/False/None and JSON's names; nothing is ever evaluated), or NotLiteral.

    A literal in the common style is rewritten as the JSON text of the same value (strings
    with JSON's quotes and escapes, names spelled as JSON, trailing commas dropped) by str
    methods and C-speed passes, and decoded: a megabyte costs milliseconds where ast costs
    seconds. What JSON does not read the same way (tuples, `1.`, `+1`, implicit
    concatenation, prefixes, comments, …) is refused by the decoder, and only then is ast
    tried, on text with little syntax only, so the cost stays linear in the text's size.
    """
    source = text.strip()
    if "'" in source:
        value = _single_quoted_at_once(source)
        if value is not _MISSING:
            return value
    parts = _python_parts(source)
    if parts is not None:
        code, bodies = parts
        if "(" not in code:  # a call or tuple is not JSON: straight to ast (if small)
            value = _decoded_as_json(code, bodies)
            if value is not _MISSING:
                return value
    elif len(source) <= _MAX_LITERAL:
        code = _PY_STRING.sub("''", source)
    else:
        raise NotLiteral
    if len(source) > _MAX_LITERAL or _too_much_syntax(code):
        raise NotLiteral
    try:
        tree = parse_expression(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise NotLiteral from None
    try:
        return literal_value(tree.body, set())
    except RecursionError:
        raise NotLiteral from None


def _python_dict(text: str) -> Any:
    """`{'name': 'f', 'arguments': {'a': 1}}`: a Python dict/list literal read as JSON."""
    if "'" not in text:
        raise NotLiteral
    value = read_python_literal(text)
    if not isinstance(value, dict | list):
        raise NotLiteral
    return value

