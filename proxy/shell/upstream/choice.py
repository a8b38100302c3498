"""Which replica of a model a request goes to, as functions of data (no I/O, no clock).

A conversation goes where its prefix is already in cache: its affinity key (a session header
the client sends, else a hash of its stable prefix: system prompt, tools, first user message)
orders the replicas by rendezvous hashing (consistent hashing without a ring: each replica's
score is a hash of the key and its name, highest first), so every proxy instance, with no
state shared between them, sends a conversation to the same replica, and taking one replica
out moves only the conversations that were on it. That order is walked with bounded load
(Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing with Bounded Loads", 2016): a replica
that is down, or would hold more than (1 + ε) × the average turns in flight, is passed over
for the next one. A request without a conversation goes to the least busy replica.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ...base.frozen import quick_init

POLICIES = ("affinity", "round_robin", "least_busy")  # what `upstream_routing` may say


@quick_init
@dataclass(frozen=True)
class ReplicaLoad:
    """What the choice needs of one replica: is it taking turns, and how many it holds."""

    url: str
    up: bool = True
    in_flight: int = 0


def _digest(data: bytes) -> bytes:
    """A stable 128-bit hash (the same in every process: never Python's salted `hash`)."""
    return hashlib.blake2b(data, digest_size=16).digest()


def session_key(value: str) -> str:
    """The affinity key of a client's session header value."""
    return "session:" + _digest(value.encode("utf-8", "replace")).hex()


def replica_name(url: str) -> str:
    """A replica's name in the hash: its URL without credentials (the same replica has the
    same place whoever holds its key)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=netloc)).rstrip("/")


def preference(key: str, urls: Sequence[str]) -> list[str]:
    """`urls` in the order a conversation with `key` tries them (rendezvous hashing)."""
    return sorted(urls, key=lambda url: _digest(f"{key}\n{replica_name(url)}".encode()),
                  reverse=True)


def capacity(loads: Sequence[ReplicaLoad], load_factor: float) -> int:
    """The most turns in flight one replica may hold once the new turn is placed:
    ⌈(1 + ε) × the average over the replicas that are up⌉, at least 1."""
    up = [load for load in loads if load.up] or list(loads)
    total = sum(load.in_flight for load in up) + 1
    return max(1, math.ceil((1 + load_factor) * total / len(up)))


def by_affinity(key: str, loads: Sequence[ReplicaLoad], load_factor: float) -> str:
    """The first replica in `key`'s order that is up and has room; if none has room, the
    least busy one that is up; if none is up, the first in the order (it may be back)."""
    order = preference(key, [load.url for load in loads])
    by_url = {load.url: load for load in loads}
    room = capacity(loads, load_factor)
    for url in order:
        load = by_url[url]
        if load.up and load.in_flight + 1 <= room:
            return url
    up = [by_url[url] for url in order if by_url[url].up]
    return least_busy(up) if up else order[0]


def least_busy(loads: Sequence[ReplicaLoad]) -> str:
    """The replica that is up with the fewest turns in flight (the first of equals); if none
    is up, the first."""
    up = [load for load in loads if load.up] or list(loads)
    return min(up, key=lambda load: load.in_flight).url


def round_robin(turn: int, loads: Sequence[ReplicaLoad]) -> str:
    """The `turn`-th replica in turn among those that are up (for comparison: it ignores
    caches)."""
    up = [load for load in loads if load.up] or list(loads)
    return up[turn % len(up)].url


def choose(policy: str, key: str | None, loads: Sequence[ReplicaLoad], *,
           load_factor: float, turn: int = 0) -> str:
    """The replica for one request: by `policy` (`affinity`, `round_robin`, `least_busy`);
    a request without a key (no conversation) goes to the least busy one."""
    if len(loads) == 1:
        return loads[0].url
    if policy == "round_robin":
        return round_robin(turn, loads)
    if policy == "affinity" and key is not None:
        return by_affinity(key, loads, load_factor)
    return least_busy(loads)
