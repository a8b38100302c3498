"""Narrow, named repairs that turn almost-JSON written by models into JSON.

Each repair changes only what lies outside JSON strings (or, for control characters, only
raw characters that JSON forbids inside strings), so valid JSON never reaches one: repairs run
only after a strict parse has failed. The names are recorded for logs and metrics.
"""

from __future__ import annotations

import ast
import json
import math
import re
import unicodedata
import warnings
from collections.abc import Callable
from typing import Any

import orjson

from .. import bulk_decode

# --- numbers kept exact -----------------------------------------------------------------------

# The integers orjson reads as integers and writes: int64 and uint64. It reads a longer one as
# a float (changing its value) and refuses to write one; such an integer is carried as an
# orjson.Fragment holding its literal, which orjson writes as it was written.
ORJSON_INTS = range(-(1 << 63), 1 << 64)
# Digits to "0", anything else (non-ASCII bytes included) to " ": a run of 19 digits, the
# shortest integer orjson may read as a float, is then one substring search away.
_DIGIT_RUNS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_RUN = b"0" * 19
# Every this many characters of a long text are sampled first: 19 digits in a row hold two
# multiples of 9, so the sample of a text with such a run holds two digits in a row.
_SAMPLE_STEP = 9
_SAMPLED_FROM = 4_096


def exact_int(value: int) -> Any:
    """`value`, or (past 64 bits) a Fragment that orjson writes as its exact literal."""
    return value if value in ORJSON_INTS else orjson.Fragment(str(value))


def _int_literal(literal: str) -> Any:
    """A JSON integer literal read exactly (the `parse_int` of the stdlib decoder)."""
    if len(literal) < 19:
        return int(literal)
    if len(literal) <= 21 and int(literal) in ORJSON_INTS:
        return int(literal)
    return orjson.Fragment(literal)


def _digit_classes(text: str) -> bytes:
    """`text` with each ASCII digit as "0" and anything else as one or more spaces."""
    return text.encode("utf-8", "surrogatepass").translate(_DIGIT_RUNS)


def has_long_digit_run(text: str) -> bool:
    """Whether `text` holds 19 digits in a row (at C speed: translate, then search). A long
    text holds none when no digit occurs, which a one-character search per digit tells sooner,
    or when its every ninth character shows no two digits in a row (a ninth of the work)."""
    if len(text) > _SAMPLED_FROM and (not any(digit in text for digit in "0123456789")
                                      or b"00" not in _digit_classes(text[::_SAMPLE_STEP])):
        return False
    return _LONG_RUN in _digit_classes(text)


def loads(text: str) -> Any:
    """`orjson.loads(text)`, except that an integer past 64 bits keeps its exact value (see
    exact_int) instead of becoming a float: such text is read again by the stdlib decoder,
    which orjson has just shown accepts it the same way. Raises orjson.JSONDecodeError."""
    try:
        value = bulk_decode.loads(text)
    except orjson.JSONDecodeError as error:  # an integer past 308 digits is "infinity" to it
        number = error.pos < len(text) and (text[error.pos].isdigit() or text[error.pos] == "-")
        if not (number and error.msg.startswith("number is infinity")):
            raise
    else:
        if not has_long_digit_run(text):
            return value
    try:
        return _EXACT_DECODER.decode(text)
    except (ValueError, RecursionError):
        raise orjson.JSONDecodeError("not readable exactly", text, 0) from None

# A JSON string (captured, for re.split). Strings may hold raw newlines.
_STRINGS = re.compile(r'("[^"\\]*+(?:\\.[^"\\]*+)*+")', re.DOTALL)
# Starts with a character class (not `\b`) so that the regex engine skips ahead quickly.
_PY_LITERAL = re.compile(r"[TFN](?<!\w[TFN])(?:rue|alse|one)\b")
# Python's names for JSON's three literals, and JSON's spelling.
PY_NAMES_AS_JSON = {"True": "true", "False": "false", "None": "null"}
# Each name alone, replaced by a literal (no Python call per match).
_PY_WORDS = tuple((re.compile(rf"{word}(?<!\w{word})\b"), json_word)
                  for word, json_word in PY_NAMES_AS_JSON.items())
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_TRAILING_COMMA_ANY = re.compile(r",(?=\s*[}\]])")  # the same commas, dropped by a literal
_CONTROL = re.compile(r"[\x00-\x1f]")
# Qwen3.5 fuses its XML and JSON templates: {"function=NAME","arguments":{...}}. Only that
# exact shape (the key first, `arguments` next): neighbouring shapes have not been seen.
_HYBRID_KEY = re.compile(r'(\{\s*)"function=([A-Za-z0-9_.:\-]++)"(\s*,\s*"arguments"\s*:)')
# Joins the pieces edited in one call: the first that the text does not hold.
_SEPARATORS = ("\x00", "\ue000", "\U000f0000")


def _edit_pieces(text: str, edit: Callable[[str], str], strings: bool) -> str:
    """`text` with `edit` applied to its JSON strings (`strings`) or to all that lies outside
    them, in one call: the pieces are joined by a separator the text does not hold (and the
    edit leaves alone), edited, and split back."""
    parts = _STRINGS.split(text)
    chosen = parts[1::2] if strings else parts[0::2]
    separator = next((sep for sep in _SEPARATORS if sep not in text and edit(sep) == sep), None)
    edited = None if separator is None else edit(separator.join(chosen)).split(separator)
    if edited is None or len(edited) != len(chosen):
        edited = [edit(piece) for piece in chosen]
    parts[1 if strings else 0::2] = edited
    return "".join(parts)


def _outside_strings(text: str, edit: Callable[[str], str]) -> str:
    """Apply `edit` to every stretch of text that is not inside a JSON string."""
    return _edit_pieces(text, edit, strings=False) if '"' in text else edit(text)


def _whole_names_as_json(stretch: str) -> str:
    for pattern, json_word in _PY_WORDS:
        stretch = pattern.sub(json_word, stretch)
    return stretch


def _python_literals(text: str) -> str:
    if not ("True" in text or "False" in text or "None" in text):  # cheap test first
        return text
    return _outside_strings(text, _whole_names_as_json)


def _trailing_commas(text: str) -> str:
    if _TRAILING_COMMA.search(text) is None:
        return text
    return _outside_strings(text, lambda stretch: _TRAILING_COMMA_ANY.sub("", stretch))


def _escape_control(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _escape_controls(token: str) -> str:
    """JSON string tokens with their raw control characters escaped (the common three by
    `str.replace`, which runs at C speed on megabytes; any other one by a regex)."""
    token = token.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return _CONTROL.sub(_escape_control, token) if _CONTROL.search(token) else token


def _control_chars_in_strings(text: str) -> str:
    if _CONTROL.search(text) is None:
        return text
    return _edit_pieces(text, _escape_controls, strings=True)


def _hybrid_function_key(text: str) -> str:
    return _HYBRID_KEY.sub(lambda m: f'{m[1]}"name":{orjson.dumps(m[2]).decode()}{m[3]}', text)


# After escaped backslashes are set aside, a backslash followed by none of these does not start
# a JSON escape (`\q`, `\U`, `\u` without four hex digits, a backslash ending the text).
_JSON_ESCAPES = '"/bfnrt'
_BAD_UNICODE_ESCAPE = re.compile(r"\\u(?![0-9a-fA-F]{4})")
_ANY_INVALID_ESCAPE = re.compile(r'\\(?![\\"/bfnrt]|u[0-9a-fA-F]{4})')


# A backslash as a backslash, each character that may follow one in a JSON escape as "v", any
# other byte as a space: a JSON escape (or an escaped backslash) is then one of two searches.
_ESCAPE_CLASSES = bytes(92 if b == 92 else 118 if chr(b) in '"/bfnrtu' else 32
                        for b in range(256))


def _no_json_escape(text: str) -> bool:
    """Whether no backslash of `text` starts a JSON escape or is escaped (`\\n`, `\\\\`,
    `\\u…` however it goes on), at C speed: one table lookup, two searches."""
    classes = text.encode("utf-8", "surrogatepass").translate(_ESCAPE_CLASSES)
    return b"\\v" not in classes and b"\\\\" not in classes


def _invalid_escapes(text: str) -> str:
    r"""Each backslash that does not start a JSON escape made a literal backslash: the model
    wrote `C:\Users` for the characters C, :, \, U… Valid escapes are left as JSON reads
    them (`C:\notes` holds a newline: that is what the text says). Outside strings a
    backslash is invalid JSON either way, so the whole text is edited, by str.replace alone:
    escaped backslashes set aside (pairs from the left, as a decoder reads a run of them),
    every other backslash doubled, the doubling undone where a valid escape follows."""
    if "\\" not in text or _ANY_INVALID_ESCAPE.search(text) is None:
        return text
    if _no_json_escape(text):  # every backslash starts an invalid escape: each one doubled
        return text.replace("\\", "\\\\")
    if "\x00" in text:  # the placeholder below: edit by regex instead (pairs read as a unit)
        edited = re.sub(r'\\\\|\\(?![\\"/bfnrt]|u[0-9a-fA-F]{4})',
                        lambda m: m[0] if len(m[0]) == 2 else "\\\\", text)
        return text if edited == text else edited
    edited = text.replace("\\\\", "\x00").replace("\\", "\\\\")
    for char in _JSON_ESCAPES + "u":
        edited = edited.replace("\\\\" + char, "\\" + char)
    if "\\u" in edited:
        edited = _BAD_UNICODE_ESCAPE.sub(r"\\\\u", edited)
    edited = edited.replace("\x00", "\\\\")
    return text if edited == text else edited  # `is` tells a caller whether it changed


# Python reads `"\ud83d\ude80"` as two lone surrogates where JSON reads one character (🚀).
_SURROGATE_PAIR = re.compile(r"[\ud800-\udbff][\udc00-\udfff]")


def _pair_to_char(match: re.Match[str]) -> str:
    high, low = match[0]
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


def join_surrogate_pairs(value: str) -> str:
    """`value` with each UTF-16 surrogate pair joined into its character, as JSON decodes
    `\\uD83D\\uDE80`; a lone surrogate stays (the engine refuses it as invalid_unicode)."""
    if value.isascii():  # O(1) in CPython: the common case costs nothing
        return value
    return _SURROGATE_PAIR.sub(_pair_to_char, value)


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
    to stderr for what it finds odd in it (`"\\/"`, `1is 1`): model text is not our code."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source.strip(), mode="eval")


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
        marked = _TRAILING_COMMA_ANY.sub("\r", marked)  # with space before the bracket
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


def _names_as_json(code: str, mark: str = "") -> str:
    """Text outside strings with Python's names spelled as JSON, each followed by `mark`, by
    str.replace; the same object when it holds none. A name inside a longer word (`Truex`)
    is replaced too, and stays invalid."""
    for word, json_word in PY_NAMES_AS_JSON.items():
        code = code.replace(word, json_word + mark)  # the same object when the word is absent
    return code


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


REPAIRS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("qwen_hybrid_function_key", _hybrid_function_key),
    ("python_literals", _python_literals),
    ("trailing_comma", _trailing_commas),
    ("invalid_escape", _invalid_escapes),
    ("raw_control_chars_in_string", _control_chars_in_strings),
)


class NotJson(ValueError):
    """The text is not JSON even after every repair."""


_MAX_LOCAL_FIXES = 16
_ORDER = {name: i for i, (name, _) in enumerate(REPAIRS)}


def _repaired_at_errors(text: str, error: orjson.JSONDecodeError,
                        ) -> tuple[Any, tuple[str, ...]] | None:
    """The repairs of REPAIRS made where orjson reports each error, one error at a time (a
    C-speed parse per retry), instead of a rewrite of the whole text per repair: the same
    value and names, or None when an error is not one they repair the same way, or when
    the retries have cost more parsing than a few whole-text passes would.

    Trailing commas and Python literals are fixed at the error position; raw control
    characters by their (whole-text) repair. A comma is removed only if what follows it was
    already there, as the single-pass regex would see it (`,,}` is not two trailing commas).
    """
    applied: set[str] = set()
    if '"function=' in text:
        repaired = _hybrid_function_key(text)
        if repaired != text:
            text = repaired
            applied.add("qwen_hybrid_function_key")
    removed: list[int] = []  # where commas were removed, in the current text's positions
    spent = 0  # characters the retries have copied and parsed
    for _ in range(_MAX_LOCAL_FIXES):
        if applied:
            try:
                return loads(text), tuple(sorted(applied, key=_ORDER.__getitem__))
            except orjson.JSONDecodeError as next_error:
                error = next_error
        pos = error.pos
        spent += pos + len(text)
        if spent > 2 * len(text) + 262_144:
            return None  # many errors in a long text: the whole-text repairs are cheaper
        char = text[pos] if pos < len(text) else ""
        comma = _TRAILING_COMMA.match(text, pos) if char == "," else None
        literal = _PY_LITERAL.match(text, pos) if char in "TFN" else None
        if comma is not None and not any(pos < at < comma.end() for at in removed):
            text = text[:pos] + text[pos + 1:]
            removed = [at - 1 if at > pos else at for at in removed] + [pos]
            applied.add("trailing_comma")
        elif literal is not None:  # replaced by a word of the same length: no shift
            text = text[:pos] + PY_NAMES_AS_JSON[literal[0]] + text[literal.end():]
            applied.add("python_literals")
        elif char and char < " " and "raw_control_chars_in_string" not in applied \
                and len(text) <= 65_536:  # longer: the lenient decoder (see _repaired_at_once)
            repaired = _control_chars_in_strings(text)
            if repaired == text:
                return None
            text = repaired
            applied.add("raw_control_chars_in_string")
        else:
            return None
    return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(literal)
    return number


# The stdlib decoder reading JSON as orjson does, but every integer exactly (see loads).
_EXACT_DECODER = json.JSONDecoder(parse_int=_int_literal, parse_float=_finite_float,
                                  parse_constant=_refuse_constant)


def _loads_lenient(text: str) -> Any:
    """`text` decoded with raw control characters allowed in strings (the stdlib decoder, not
    strict), and nothing else orjson refuses: NaN and infinities are refused, an integer past
    64 bits kept exact, a lone surrogate refused (found by writing the value back)."""
    exact = has_long_digit_run(text)
    decoder = json.JSONDecoder(strict=False, parse_constant=_refuse_constant,
                               parse_float=_finite_float if "e" in text or "E" in text else float,
                               parse_int=_int_literal if exact else int)
    try:
        value = decoder.decode(text)
        orjson.dumps(value)
    except (ValueError, TypeError, RecursionError):  # JSONEncodeError is a TypeError
        raise orjson.JSONDecodeError("not JSON", text, 0) from None
    return value


# A whitespace character outside strings and, raw, an error inside them (orjson, strict) or a
# character found when the value is written back (the lenient decoder): the marker below.
MARK = "\r"
# How far a trailing comma before the text's last closing brackets is looked for (see
# RepairedText.final_comma), and the last characters of a value it may follow.
_FINAL_COMMA_REACH = 64
_VALUE_ENDS = frozenset('"0123456789el]}')


class RepairedText:
    """A text repaired where the strict decoder reports each error, by the repair of REPAIRS
    that the error calls for, made over the whole text at once: a Python name at the error
    makes every such name JSON's, followed by MARK (one str.replace); a backslash that starts
    no JSON escape runs the escape repair over the whole text (unless `escapes` is False, for
    a caller that maps positions: it moves what follows); a trailing comma, reported as one,
    becomes MARK itself (the text keeps its length). A replacement that fell inside a string
    left a raw MARK there, which the strict decoder refuses; that error, and any other kind
    (a raw control character, a comma the regex repairs read otherwise, a name already
    replaced), ends the repairs (`fix` gives None) and the whole-text repairs decide. So a
    value read from the repaired text is the one the regex repairs give, with the same names,
    at the cost of one decode per kind of error rather than one pass per repair."""

    def __init__(self, text: str, *, escapes: bool = True) -> None:
        self.text = text
        self.words: list[str] = []  # the Python names replaced, in order
        self.applied: set[str] = set()
        self._escapes = escapes
        self._spent = 0  # characters copied and parsed for commas (one by one: a few only)

    def fix(self, pos: int, message: str) -> str | None:
        """Repair the error the decoder reports at `pos` with `message`: the name of the repair
        made, or None when the error is not one these repairs make (or make again)."""
        text = self.text
        if message.startswith("trailing comma") and text.startswith(",", pos):
            # orjson says so only of a comma after a value, before space and a bracket
            self._spent += pos + len(text)
            if self._spent > 2 * len(text) + 262_144:
                return None  # many: the whole-text repair is cheaper
            return self._comma(pos)
        literal = _PY_LITERAL.match(text, pos)
        if literal is not None and literal[0] not in self.words:
            self.words.append(literal[0])
            self.text = text.replace(literal[0], PY_NAMES_AS_JSON[literal[0]] + MARK)
            return self._made("python_literals")
        if self._escapes and message.startswith("invalid escape") \
                and "invalid_escape" not in self.applied:
            escaped = _invalid_escapes(text)
            if escaped is not text:
                self.text = escaped
                return self._made("invalid_escape")
        return None

    def final_comma(self) -> int | None:
        """Repair the comma among the text's last closing brackets (`…, ]}}`), when it follows
        a value as a trailing comma the decoder reports does: where a payload's one trailing
        comma usually stands (after its last item or argument), and where a read of a long
        value would fail after reading all of it, to be made again. Its position, or None."""
        text = self.text
        last = max(text.rfind("]"), text.rfind("}"))
        floor = max(0, last - _FINAL_COMMA_REACH)
        head = text[floor:last].rstrip(" \t\n\r]}") if last > 0 else ""
        pos = floor + len(head) - 1
        if not head.endswith(","):
            return None
        if text[max(0, pos - _FINAL_COMMA_REACH):pos].rstrip(" \t\n\r")[-1:] not in _VALUE_ENDS:
            return None  # `[1,,]`, `[,]`: not what the decoder calls a trailing comma
        self._comma(pos)
        return pos

    def _comma(self, pos: int) -> str:
        self.text = self.text[:pos] + MARK + self.text[pos + 1:]
        return self._made("trailing_comma")

    def _made(self, name: str) -> str:
        self.applied.add(name)
        return name

    @property
    def repairs(self) -> tuple[str, ...]:
        """The names of the repairs made, in the order of REPAIRS."""
        return tuple(sorted(self.applied, key=_ORDER.__getitem__))

    def value(self) -> tuple[Any, tuple[str, ...]] | None:
        """The value of the whole text, repaired, and the repairs' names; or None."""
        for _ in range(_MAX_LOCAL_FIXES + len(REPAIRS)):
            try:
                return loads(self.text), self.repairs
            except orjson.JSONDecodeError as error:
                if self.fix(error.pos, error.msg) is None:
                    return None
        return None


def _repaired_at_once(text: str) -> tuple[Any, tuple[str, ...]] | None:
    """The repairs of REPAIRS made where the decoder reports errors (see RepairedText), or
    else every one at once (see _repaired_all_at_once); None when neither reads the text as
    the regex repairs would."""
    repaired = RepairedText(text).value()
    return repaired if repaired is not None else _repaired_all_at_once(text)


def _repaired_all_at_once(text: str) -> tuple[Any, tuple[str, ...]] | None:
    """Every repair of REPAIRS made at once over the whole text by str.replace, which costs
    milliseconds on a megabyte where the regex repairs pay per match; raw control characters
    in strings read by the lenient decoder instead of escaped. True/False/None become JSON's
    names and `,]`/`,}` lose their comma, each followed by a carriage return (so the text
    must not hold one, raw or escaped, for these two). Where a replacement fell inside a
    string, that string now holds a raw carriage return: the strict decoder refuses it, and
    the lenient one is checked for it. So a value returned is the one the regex repairs
    give, with the same names; anything else gives None."""
    if '"function=' in text:
        return None
    applied: list[str] = []
    edited = text
    if MARK not in text and "\\r" not in text:
        named = _names_as_json(edited, MARK)
        if named is not edited:
            applied.append("python_literals")
            edited = named
        commas = [comma for comma in (",]", ",}") if comma in edited]
        for comma in commas:
            edited = edited.replace(comma, MARK + comma[1])
        if commas:
            applied.append("trailing_comma")
    escaped = _invalid_escapes(edited)
    if escaped is not edited:
        applied.append("invalid_escape")
        edited = escaped
    if applied or "," in edited:
        try:
            return loads(edited), tuple(applied)
        except orjson.JSONDecodeError as error:
            char = edited[error.pos] if error.pos < len(edited) else ""
            if char == "," and MARK not in text and "\\r" not in text:
                # a trailing comma with space before its bracket: all such, by one regex pass
                edited = _TRAILING_COMMA_ANY.sub(MARK, edited)
                if "trailing_comma" not in applied:
                    applied.insert(len(applied) - ("invalid_escape" in applied),
                                   "trailing_comma")
                return _decoded_at_once(text, edited, applied)
            if not (char and char < " " and char != MARK):
                return None  # not a raw control character the model wrote
    return _lenient_at_once(text, edited, applied)


def _decoded_at_once(text: str, edited: str, applied: list[str],
                     ) -> tuple[Any, tuple[str, ...]] | None:
    """`edited` decoded strictly, else (a raw control character) leniently; or None."""
    try:
        return loads(edited), tuple(applied)
    except orjson.JSONDecodeError as error:
        char = edited[error.pos] if error.pos < len(edited) else ""
        if not (char and char < " " and char != MARK):
            return None
    return _lenient_at_once(text, edited, applied)


def _lenient_at_once(text: str, edited: str, applied: list[str],
                     ) -> tuple[Any, tuple[str, ...]] | None:
    """`edited` (the repairs of `text`, with markers) read with raw control characters in
    strings allowed, the value refused when a marker fell inside a string."""
    try:
        value = _loads_lenient(edited)
    except orjson.JSONDecodeError:
        return None
    if MARK in edited and MARK not in text and "\\r" in orjson.dumps(value).decode():
        return None  # a replacement fell inside a string
    return value, (*applied, "raw_control_chars_in_string")


# Python-literal style: a bracket, maybe more, then a single quote (`{'name': …}`). No JSON
# repair can make that JSON; it goes to the Python-literal reader at once.
_PY_STYLE = re.compile(r"\s*+[\[{][\s\[{]{0,32}+'")


def loads_repaired(text: str) -> tuple[Any, tuple[str, ...]]:
    """Decode `text` as JSON, applying repairs only if a strict parse fails.

    Returns the value and the names of the repairs that changed the text. The usual few
    errors are repaired where the decoder reports them; then every repair at once (see
    _repaired_at_once); anything else goes through every repair in turn, as written below.
    An integer past 64 bits keeps its exact value (see loads).
    """
    try:
        return loads(text), ()
    except orjson.JSONDecodeError as error:
        quick = _repaired_at_errors(text, error) if not _PY_STYLE.match(text) else None
    if quick is not None:
        return quick
    original = text
    if not _PY_STYLE.match(text):
        once = _repaired_at_once(text)
        if once is not None:
            return once
        applied: list[str] = []
        for name, repair in REPAIRS:
            repaired = repair(text)
            if repaired == text:
                continue
            text = repaired
            applied.append(name)
            try:
                return loads(text), tuple(applied)
            except orjson.JSONDecodeError:
                continue
    try:  # last: single-quoted Python literals, read without evaluating anything
        return _python_dict(original), ("python_dict_literal",)
    except NotLiteral:
        pass
    raise NotJson("not JSON after repairs")
