"""A tool name as the model wrote it, matched to the request's tools.

Models write a name a little off the one offered: `Bash` for `bash`, `get-weather` for
`get_weather`, `functions.read` (Harmony's and Kimi's namespace) for `read`. A name that
matches exactly one offered tool once case, `-`/`_`, spaces and a `prefix.` are set aside is
that tool's (a named repair); one that matches none, or several, is not repaired.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from ..base.frozen import quick_init

NAME_MATCHED = "tool_name_matched"  # the repair: the name was matched once folded
UNKNOWN_TOOL = "unknown_tool"  # a call made to a name that matches no offered tool
_SET_ASIDE = re.compile(r"[\s\-_]+")
_PREFIX = re.compile(r"[A-Za-z_][\w\-]{0,63}\.(?=.)", re.ASCII)
# What a function's name can be (OpenAI's `^[a-zA-Z0-9_-]{1,64}$`, namespaces and other
# scripts allowed, ending in a letter or digit: `Name:` is a label): a name matching no tool
# is delivered as written only when it is one, and is not a placeholder that documentation
# and examples write where a name goes (`NAME`, `function_name`, `example`).
_PLAUSIBLE = re.compile(r"[^\W\d](?:[\w.:/\-]{0,126}[^\W_])?")
_PLACEHOLDERS = frozenset({
    "name", "function", "function_name", "functionname", "func", "fn", "tool", "tool_name",
    "toolname", "example", "example_function", "example_tool", "your_function", "your_tool",
    "my_function", "my_tool", "some_function", "some_tool", "placeholder", "foo", "bar",
    "xxx", "todo", "tbd", "none", "null", "undefined"})


def _folded(name: str) -> str:
    return _SET_ASIDE.sub("", name).casefold()


@quick_init
@dataclass(frozen=True)
class Match:
    """The offered tool a written name stands for, and whether it took a repair."""

    name: str
    repaired: bool


class ToolNames:
    """The request's tool names, looked up as written or folded (see the module)."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = frozenset(names)
        folded: dict[str, list[str]] = {}
        for name in self._names:
            folded.setdefault(_folded(name), []).append(name)
        self._folded = folded

    def __contains__(self, name: str) -> bool:
        return name in self._names

    @staticmethod
    def plausible(written: str) -> bool:
        """Whether `written` can be a function's name (no spaces, quotes, tags, a label's
        colon, a placeholder, …)."""
        return (_PLAUSIBLE.fullmatch(written) is not None
                and written.casefold() not in _PLACEHOLDERS)

    def match(self, written: str) -> Match | None:
        """The offered tool `written` names, or None when it matches none or several."""
        if written in self._names:
            return Match(written, False)
        for candidate in (written, _PREFIX.sub("", written.strip(), count=1)):
            found = self._folded.get(_folded(candidate))
            if found is not None:
                return Match(found[0], True) if len(found) == 1 else None
        return None


@lru_cache(maxsize=32)
def tool_names(names: frozenset[str]) -> ToolNames:
    """`ToolNames(names)`, made once per set of names: an agent offers the same tools every
    turn, and the index is immutable (never shared between different sets: the key is the
    set itself)."""
    return ToolNames(names)
