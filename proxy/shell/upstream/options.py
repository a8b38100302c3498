"""What the upstream client hands urllib3 with every request, each made once: its timeouts
(per value) and its refusal to retry or follow redirects (urllib3 would build both anew on
each call, a few dozen Python calls of a request's ~1,300)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import urllib3
from urllib3.util import Retry

from ...base.frozen import quick_init

# What urllib3 makes of `retries=False, redirect=False` (it never changes a Retry it is given).
NO_RETRIES = Retry(total=False, redirect=False)


@quick_init
@dataclass(frozen=True)
class Timeouts:
    """Seconds to connect, and to wait for the next bytes (or the whole answer)."""

    connect: float
    read: float


@functools.lru_cache(maxsize=64)
def pool_timeout(timeouts: Timeouts) -> urllib3.Timeout:
    """urllib3's timeout for `timeouts` (urllib3 clones it for each request it serves)."""
    return urllib3.Timeout(connect=timeouts.connect, read=timeouts.read)
