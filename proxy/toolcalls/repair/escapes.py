"""Which reading of a string's backslashes a repair takes: a string that holds an escape its
language does not define was written with literal backslashes, all of them (`C:\\Users\\ana\\
notes.txt`: its `\\n` is a backslash and an `n`). Of the readings a repair may choose between,
the one that keeps every character as written wins; a string whose escapes are all defined
is read as its language reads it."""

from __future__ import annotations

import re
import unicodedata

# A JSON escape, or a lone backslash that starts none (`\q`, `\U`, `\u` without four hex
# digits): read from the left, as a decoder reads a run of backslashes, in pairs.
_JSON_ESCAPE_OR_NOT = re.compile(r'\\(?:[\\"/bfnrt]|u[0-9a-fA-F]{4})|\\')
# The same for a Python string literal (not raw): its escapes, or a backslash starting none.
_PY_ESCAPE_OR_NOT = re.compile(r"\\(?:[\\'\"abfnrtv0-7\n]|\r\n?|x[0-9a-fA-F]{2}"
                               r"|u[0-9a-fA-F]{4}|U([0-9a-fA-F]{8})|N\{([^}\n]{1,100})\})|\\")
_PAIR = re.compile(r"\\(.)", re.DOTALL)  # a backslash and what it may escape
# A Python string literal in model text, with its prefix: triple-quoted or on one line.
_PY_LITERAL = re.compile(
    r"(?<!\w)([rRbBuUfF]{0,2})"
    r"(?:(''')((?:[^'\\]++|\\.|'(?!''))*+)'''"
    r'|(""")((?:[^"\\]++|\\.|"(?!""))*+)"""'
    r"|(')((?:[^'\\\n]++|\\.)*+)'"
    r'|(")((?:[^"\\\n]++|\\.)*+)")', re.DOTALL)


def literal_backslashes(body: str, quote: str) -> str:
    """A string literal's body written so that every backslash in it is a character of the
    value, but the one that escapes `quote` (the literal's delimiter, which that backslash
    keeps inside it): each doubled, as a run of them is read, in pairs from the left."""
    doubled = body.replace("\\", "\\\\")
    return doubled.replace("\\\\" + quote, "\\" + quote)


def as_written(body: str, quote: str) -> str:
    """The value of a string literal's body read with every backslash as a character, but
    one that escapes `quote` (see literal_backslashes)."""
    return _PAIR.sub(lambda pair: quote if pair[1] == quote else pair[0], body)


def json_token_as_written(token: str) -> str:
    """A JSON string token (quotes included) unchanged when all its escapes are JSON's, else
    with every backslash literal (see literal_backslashes)."""
    if "\\" not in token:
        return token
    if not any(len(escape[0]) == 1 for escape in _JSON_ESCAPE_OR_NOT.finditer(token)):
        return token
    return '"' + literal_backslashes(token[1:-1], '"') + '"'


def python_escape_undefined(body: str) -> bool:
    """Whether a (not raw) Python string body holds an escape Python does not define, or one
    it refuses (`\\U` past the last code point, `\\N{…}` naming no character)."""
    for escape in _PY_ESCAPE_OR_NOT.finditer(body):
        if len(escape[0]) == 1:
            return True
        wide, name = escape.groups()
        if wide is not None and int(wide, 16) > 0x10FFFF:
            return True
        if name is not None:
            try:
                unicodedata.lookup(name)
            except KeyError:
                return True
    return False


def python_body_as_written(body: str, quote: str) -> str:
    """A (not raw) Python string body, its backslashes made literal when it holds an escape
    Python does not define (see literal_backslashes); else unchanged."""
    if "\\" not in body or not python_escape_undefined(body):
        return body
    return literal_backslashes(body, quote)


def _python_token(match: re.Match[str]) -> str:
    prefix, *pairs = match.groups()
    quote, body = next((pairs[i], pairs[i + 1]) for i in range(0, 8, 2) if pairs[i])
    if "r" in prefix.lower():
        return match[0]
    return prefix + quote + python_body_as_written(body, quote[0]) + quote


def python_source_as_written(source: str) -> str:
    """Python source with each string literal that holds an undefined escape rewritten so
    that Python reads its backslashes as they stand (raw literals, and literals whose
    escapes are all Python's, unchanged): for `ast`, which would refuse it or read a
    `\\n` beside a `\\d` as a newline."""
    if "\\" not in source:
        return source
    return _PY_LITERAL.sub(_python_token, source)
