"""Object literals written the JavaScript or Python way, read as the JSON they mean.

Small models write a call's arguments as `{city: 'Paris', days: 3,}` or `{'metric': True}`:
unquoted keys, single-quoted strings, trailing commas, `true`/`True`, `null`/`None`. This reads
such a literal from its opening brace, by its own small grammar (nothing is evaluated), and
says where it ends: a bracket counter that knows only double quotes would end `{k: 'a}b'}`
inside the string. An identifier is a value only when it is one of the constants; anything
else (an expression, a variable, a call) is not a literal, and the text stays text.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from ..exact_json import loads as exact_loads

JS_LITERAL = "js_object_literal"  # the repair: the object was not JSON, but this literal

_SPACE = re.compile(r"(?:\s++|//[^\n]*+|/\*(?:[^*]++|\*(?!/))*+\*/)*+")
_STRING = {'"': re.compile(r'"(?:[^"\\\n]++|\\.)*+"', re.DOTALL),
           "'": re.compile(r"'(?:[^'\\\n]++|\\.)*+'", re.DOTALL)}
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*+)(?:\.\d++)?(?:[eE][+-]?\d++)?(?![\w.])")
_IDENT = re.compile(r"[A-Za-z_$][\w$]{0,200}+")
_CONSTANTS = {"true": True, "True": True, "false": False, "False": False, "null": None,
              "None": None, "undefined": None}
_MAX_DEPTH = 64
_MAX_ITEMS = 20_000  # far more than a call's arguments: past it, not read


class _NotLiteral(Exception):
    pass


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.items = 0
        self.loose = False  # something JSON does not allow was read

    def space(self) -> None:
        space = _SPACE.match(self.text, self.pos)
        assert space is not None  # it matches the empty string
        self.pos = space.end()

    def peek(self) -> str:
        self.space()
        return self.text[self.pos:self.pos + 1]

    def value(self, depth: int) -> Any:
        char = self.peek()
        self.items += 1
        if depth > _MAX_DEPTH or self.items > _MAX_ITEMS:
            raise _NotLiteral
        if char == "{":
            return self.container(depth, "}")
        if char == "[":
            return self.container(depth, "]")
        if char in _STRING:
            return self.string()
        number = _NUMBER.match(self.text, self.pos)
        if number is not None:
            self.pos = number.end()
            return exact_loads(number[0])
        ident = _IDENT.match(self.text, self.pos)
        if ident is not None and ident[0] in _CONSTANTS:
            self.pos = ident.end()
            self.loose |= ident[0] not in ("true", "false", "null")
            return _CONSTANTS[ident[0]]
        raise _NotLiteral

    def string(self) -> str:
        quote = self.text[self.pos]
        match = _STRING[quote].match(self.text, self.pos)
        if match is None:
            raise _NotLiteral
        self.pos = match.end()
        token = match[0]
        if quote == '"':
            try:
                value = exact_loads(token)
            except ValueError:
                value = None
            if isinstance(value, str):
                return value
        self.loose = True
        try:
            value = ast.literal_eval(token)  # one string literal: Python's escapes, as JS's
        except (SyntaxError, ValueError):
            raise _NotLiteral from None
        if not isinstance(value, str):
            raise _NotLiteral
        return value

    def key(self) -> str:
        char = self.peek()
        if char in _STRING:
            return self.string()
        ident = _IDENT.match(self.text, self.pos)
        if ident is None:
            raise _NotLiteral
        self.pos = ident.end()
        self.loose = True
        return ident[0]

    def container(self, depth: int, close: str) -> Any:
        self.pos += 1
        items: Any = {} if close == "}" else []
        while True:
            char = self.peek()
            if char == close:
                self.pos += 1
                return items
            if close == "}":
                key = self.key()
                if self.peek() != ":":
                    raise _NotLiteral
                self.pos += 1
                items[key] = self.value(depth + 1)
            else:
                items.append(self.value(depth + 1))
            char = self.peek()
            if char == ",":
                self.pos += 1
                if self.peek() == close:
                    self.loose = True  # a trailing comma
            elif char != close:
                raise _NotLiteral


def read_object(text: str, start: int) -> tuple[dict[str, Any], int, tuple[str, ...]] | None:
    """The object literal whose `{` stands at `start`: its value, where it ends, and the
    repair it took (none when it was JSON); None when it is no literal."""
    if not text.startswith("{", start):
        return None
    reader = _Reader(text)
    reader.pos = start
    try:
        value = reader.value(0)
    except (_NotLiteral, RecursionError, ValueError):
        return None
    return value, reader.pos, (JS_LITERAL,) if reader.loose else ()
