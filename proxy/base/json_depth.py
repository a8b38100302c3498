"""How deep a JSON document nests, measured on its bytes in linear time.

orjson reads documents 1,024 levels deep but writes at most 254, so a body between the two
would be accepted, then fail when the proxy writes it on (upstream, to a client, to the
store). Every body a front reads is held to one limit, well under what orjson writes, with
room for the few levels a front's translation adds.
"""

from __future__ import annotations

import itertools
from typing import Any

MAX_DEPTH = 128  # arrays and objects inside one another; real agent bodies nest under 20

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# An opening bracket as +1, a closing one as -1 (read as signed bytes).
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def deeper_than(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON in `raw` nests arrays and objects more than `limit` levels deep
    (brackets inside strings do not count). Linear, at C speed: the strings are cut out,
    the brackets kept, and the running depth's maximum taken (about 4 ms a MB of a real agent
    body, a quarter of orjson's decoding). Meant for well-formed JSON; on anything else the
    answer is only an estimate (the parser refuses such text anyway)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:  # the usual small body: nothing to scan
        return False
    brackets = _outside_strings(raw).translate(None, _NOT_BRACKETS)
    if len(brackets) <= limit:
        return False
    steps = memoryview(brackets.translate(_STEPS)).cast("b")
    return max(itertools.accumulate(steps)) > limit


def _outside_strings(raw: bytes) -> bytes:
    """What of the JSON in `raw` lies outside its strings. Escaped backslashes, then escaped
    quotes, are dropped (backslashes pair from the left, as the escapes do), so that the
    quotes left alternate: opening a string, closing it."""
    plain = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(plain.split(b'"')[0::2])


def deep_path(value: Any, limit: int = MAX_DEPTH, shown: int = 4) -> str:
    """Where a decoded value first nests past `limit`: the path's first `shown` steps, as
    the fronts name fields (`tools[0].function.parameters…`); "" when it does not."""
    # Each entry: a value, its depth, and its path as a chain (parent's chain, key).
    stack: list[tuple[Any, int, Any]] = [(value, 1, None)]
    while stack:
        item, depth, chain = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > limit:
            path: list[str | int] = []
            while chain is not None:
                chain, key = chain
                path.append(key)
            path.reverse()
            return _path_text(path[:shown]) + ("…" if len(path) > shown else "")
        children = item.items() if isinstance(item, dict) else enumerate(item)
        stack.extend((child, depth + 1, (chain, key)) for key, child in reversed(list(children)))
    return ""


def _path_text(path: list[str | int]) -> str:
    """`["tools", 0, "function"]` as `tools[0].function`."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text
