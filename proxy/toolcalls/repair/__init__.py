"""Narrow, named repairs that turn almost-JSON written by models into JSON.

Each repair changes only what lies outside JSON strings (or, for control characters, only
raw characters that JSON forbids inside strings), so valid JSON never reaches one: repairs run
only after a strict parse has failed. The names are recorded for logs and metrics.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..exact_json import loads
from .at_errors import NotJson, _repaired_at_errors, _repaired_at_once
from .python_literal import NotLiteral, _python_dict
from .regexes import REPAIRS

__all__ = ["NotJson", "loads_repaired"]  # (NotJson: what loads_repaired raises)

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
