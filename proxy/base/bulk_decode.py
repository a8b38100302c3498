"""Decoding a large JSON document with the cyclic garbage collector paused.

A megabyte of rows decodes to some 10^5 lists and dicts; each few hundred of them start a
collection, and the older generations' collections walk every object the process holds, so
on a busy server they cost more than the decode itself (a 1 MB call of rows: 14 → 11 ms).
Nothing the decoder builds can be garbage while it runs, so the pause frees nothing later.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

# Below this many characters a document builds too few containers to start more than a
# young-generation collection or two.
PAUSE_FROM = 1 << 16


def loads(data: str | bytes) -> Any:
    """`orjson.loads(data)`, with the collector paused while a large document decodes.
    The collector is started again only if it ran before (an operator's gc.disable stands).
    The switch is the process's: under threads, decodes that overlap start it again when the
    first ends, which costs only the pause."""
    if len(data) < PAUSE_FROM:  # (no context manager made for the many short documents)
        return orjson.loads(data)
    with collector_paused(len(data)):
        return orjson.loads(data)


@contextmanager
def collector_paused(size: int) -> Iterator[None]:
    """The collector paused for the block when `size` (the characters it reads) is at least
    PAUSE_FROM: for work that decodes a large document and drops all it built before the
    block ends (extract's decode, schema check and serialisation of a megabyte of rows).
    Paused for the decode alone, the collector would run at the first allocation after it and
    walk every container the decode built (a young-generation collection of 10^5 objects,
    3 ms of a 19 ms extract); freed inside the pause, they leave its count as they entered
    it, so no collection ever walks them. Started again only if it ran before (an operator's
    gc.disable stands)."""
    if size < PAUSE_FROM or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
