"""Narrow, named repairs that turn almost-JSON written by models into JSON, each a regex or
str pass over the whole text.

Each repair changes only what lies outside JSON strings (or, for control characters, only
raw characters that JSON forbids inside strings), so valid JSON never reaches one: repairs run
only after a strict parse has failed. The names are recorded for logs and metrics.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson

from .escapes import json_token_as_written

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
# The same commas in a text whose replacements left a carriage return behind them (the
# repairs at once): a marker is not the space before a bracket, so `{,,}` loses one comma
# there as here, never two.
_TRAILING_COMMA_UNMARKED = re.compile(r",(?=[^\S\r]*[}\]])")
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
    r"""The strings of `text` that hold an escape JSON does not define written with literal
    backslashes, all of them: the model wrote `C:\Users\ana\notes.txt` for the characters
    as they stand, so the `\n` of `\notes` is a backslash and an `n`, not a newline (the
    reading that keeps every character written wins; a backslash before the string's
    closing quote still keeps the quote inside it). A string whose escapes are all JSON's
    is left as JSON reads it. Outside strings a backslash is invalid JSON either way: each
    one doubled. When no backslash starts a JSON escape (the usual case of a Windows path or
    a regex), all are doubled by one str.replace."""
    if "\\" not in text or _ANY_INVALID_ESCAPE.search(text) is None:
        return text
    if _no_json_escape(text):  # every backslash starts an invalid escape: each one doubled
        return text.replace("\\", "\\\\")
    parts = _STRINGS.split(text)
    parts[0::2] = [part.replace("\\", "\\\\") for part in parts[0::2]]
    parts[1::2] = [json_token_as_written(token) for token in parts[1::2]]
    edited = "".join(parts)
    return text if edited == text else edited  # `is` tells a caller whether it changed


# Python reads `"\ud83d\ude80"` as two lone surrogates where JSON reads one character (🚀).
_SURROGATE_PAIR = re.compile(r"[\ud800-\udbff][\udc00-\udfff]")


def _pair_to_char(match: re.Match[str]) -> str:
    pair = match[0]
    return chr(0x10000 + ((ord(pair[0]) - 0xD800) << 10) + (ord(pair[1]) - 0xDC00))


def join_surrogate_pairs(value: str) -> str:
    """`value` with each UTF-16 surrogate pair joined into its character, as JSON decodes
    `\\uD83D\\uDE80`; a lone surrogate stays (the engine refuses it as invalid_unicode)."""
    if value.isascii():  # O(1) in CPython: the common case costs nothing
        return value
    return _SURROGATE_PAIR.sub(_pair_to_char, value)



def _names_as_json(code: str, mark: str = "") -> str:
    """Text outside strings with Python's names spelled as JSON, each followed by `mark`, by
    str.replace; the same object when it holds none. A name inside a longer word (`Truex`)
    is replaced too, and stays invalid."""
    for word, json_word in PY_NAMES_AS_JSON.items():
        code = code.replace(word, json_word + mark)  # the same object when the word is absent
    return code


REPAIRS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("qwen_hybrid_function_key", _hybrid_function_key),
    ("python_literals", _python_literals),
    ("trailing_comma", _trailing_commas),
    ("invalid_escape", _invalid_escapes),
    ("raw_control_chars_in_string", _control_chars_in_strings),
)
