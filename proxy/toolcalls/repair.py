"""Narrow, named repairs that turn almost-JSON written by models into JSON.

Each repair changes only what lies outside JSON strings (or, for control characters, only
raw characters that JSON forbids inside strings), so valid JSON never reaches one: repairs run
only after a strict parse has failed. The names are recorded for logs and metrics.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import orjson

# A JSON string, or a run of anything that is not a quote. Strings may hold raw newlines.
_TOKENS = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[^"]++|"', re.DOTALL)
# Starts with a character class (not `\b`) so that the regex engine skips ahead quickly.
_PY_LITERAL = re.compile(r"[TFN](?<!\w[TFN])(?:rue|alse|one)\b")
_PY_TO_JSON = {"True": "true", "False": "false", "None": "null"}
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_CONTROL = re.compile(r"[\x00-\x1f]")
# Qwen3.5 fuses its XML and JSON templates: {"function=NAME","arguments":{...}}. Only that
# exact shape (the key first, `arguments` next): neighbouring shapes have not been seen.
_HYBRID_KEY = re.compile(r'(\{\s*)"function=([A-Za-z0-9_.:\-]++)"(\s*,\s*"arguments"\s*:)')


def _outside_strings(text: str, edit: Callable[[str], str]) -> str:
    """Apply `edit` to every stretch of text that is not inside a JSON string."""
    parts = []
    for token in _TOKENS.findall(text):
        parts.append(token if token.startswith('"') and len(token) > 1 else edit(token))
    return "".join(parts)


def _python_literals(text: str) -> str:
    if not ("True" in text or "False" in text or "None" in text):  # cheap test first
        return text
    return _outside_strings(text, lambda s: _PY_LITERAL.sub(lambda m: _PY_TO_JSON[m[0]], s))


def _trailing_commas(text: str) -> str:
    if _TRAILING_COMMA.search(text) is None:
        return text
    return _outside_strings(text, lambda s: _TRAILING_COMMA.sub(r"\1", s))


def _escape_control(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _escape_controls(token: str) -> str:
    """A JSON string token with its raw control characters escaped (the common three by
    `str.replace`, which runs at C speed on megabytes; any other one by a regex)."""
    token = token.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return _CONTROL.sub(_escape_control, token) if _CONTROL.search(token) else token


def _control_chars_in_strings(text: str) -> str:
    if _CONTROL.search(text) is None:
        return text
    parts = []
    for token in _TOKENS.findall(text):
        if token.startswith('"') and len(token) > 1:
            token = _escape_controls(token)
        parts.append(token)
    return "".join(parts)


def _hybrid_function_key(text: str) -> str:
    return _HYBRID_KEY.sub(lambda m: f'{m[1]}"name":{orjson.dumps(m[2]).decode()}{m[3]}', text)


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


def literal_value(node: ast.AST, repairs: set[str],
                  strings: dict[str, str] | None = None) -> Any:
    """The JSON value of a Python literal node (JSON's `true`/`false`/`null` names allowed,
    noted in `repairs`; surrogate-pair escapes read as JSON reads them). Never evaluates
    anything: any other node raises NotLiteral. `strings` maps placeholder names that stand
    for string literals decoded beforehand to their values; each is taken (popped) once."""
    if isinstance(node, ast.Name) and strings and node.id in strings:
        return strings.pop(node.id)
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, str):
            return join_surrogate_pairs(value)
        if value is None or isinstance(value, bool | int):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise NotLiteral
    if isinstance(node, ast.List | ast.Tuple):
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
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = literal_value(node.operand, repairs, strings)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
        raise NotLiteral
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


def _python_dict(text: str) -> Any:
    """`{'name': 'f', 'arguments': {'a': 1}}`: a Python dict/list literal read as JSON."""
    if len(text) > _MAX_LITERAL or "'" not in text:
        raise NotLiteral
    try:
        tree = parse_expression(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise NotLiteral from None
    if not isinstance(tree.body, ast.Dict | ast.List):
        raise NotLiteral
    try:
        return literal_value(tree.body, set())
    except RecursionError:
        raise NotLiteral from None


REPAIRS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("qwen_hybrid_function_key", _hybrid_function_key),
    ("python_literals", _python_literals),
    ("trailing_comma", _trailing_commas),
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
    value and names, or None when an error is not one they repair the same way.

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
    for _ in range(_MAX_LOCAL_FIXES):
        if applied:
            try:
                return orjson.loads(text), tuple(sorted(applied, key=_ORDER.__getitem__))
            except orjson.JSONDecodeError as next_error:
                error = next_error
        pos = error.pos
        char = text[pos] if pos < len(text) else ""
        comma = _TRAILING_COMMA.match(text, pos) if char == "," else None
        literal = _PY_LITERAL.match(text, pos) if char in "TFN" else None
        if comma is not None and not any(pos < cut < comma.end() for cut in removed):
            text = text[:pos] + text[pos + 1:]
            removed = [cut - 1 if cut > pos else cut for cut in removed] + [pos]
            applied.add("trailing_comma")
        elif literal is not None:  # replaced by a word of the same length: no shift
            text = text[:pos] + _PY_TO_JSON[literal[0]] + text[literal.end():]
            applied.add("python_literals")
        elif char and char < " " and "raw_control_chars_in_string" not in applied:
            repaired = _control_chars_in_strings(text)
            if repaired == text:
                return None
            text = repaired
            applied.add("raw_control_chars_in_string")
        else:
            return None
    return None


def loads_repaired(text: str) -> tuple[Any, tuple[str, ...]]:
    """Decode `text` as JSON, applying repairs only if a strict parse fails.

    Returns the value and the names of the repairs that changed the text. The usual few
    errors are repaired where the decoder reports them; anything else goes through every
    repair in turn, as written below.
    """
    try:
        return orjson.loads(text), ()
    except orjson.JSONDecodeError as error:
        quick = _repaired_at_errors(text, error)
    if quick is not None:
        return quick
    original = text
    applied: list[str] = []
    for name, repair in REPAIRS:
        repaired = repair(text)
        if repaired == text:
            continue
        text = repaired
        applied.append(name)
        try:
            return orjson.loads(text), tuple(applied)
        except orjson.JSONDecodeError:
            continue
    try:  # last: single-quoted Python literals, read with ast (never evaluated)
        return _python_dict(original), ("python_dict_literal",)
    except NotLiteral:
        pass
    raise NotJson("not JSON after repairs")
