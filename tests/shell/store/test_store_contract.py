"""The contract every response store backend keeps
(`proxy.shell.store.interface.ResponseStore`): chains recalled whole in one round trip, answers
scoped to their owner, caps per owner, sizes checked before a conversation is loaded, errors as
values. Adding a backend is one entry in `BACKENDS` below (a factory that may ask pytest for the
fixtures it needs)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from proxy.base.errors import ProxyError
from proxy.fronts import StoredResponse
from proxy.shell.store.interface import NO_KEY_OWNER, ResponseStore, StoreLimits, Usage
from proxy.shell.store.sqlite import SqliteStore

MakeStore = Callable[..., ResponseStore]


def _sqlite_file(request: Any, limits: StoreLimits) -> ResponseStore:
    path = request.getfixturevalue("tmp_path") / "sub" / "responses.sqlite3"
    return SqliteStore(str(path), limits)


def _sqlite_memory(request: Any, limits: StoreLimits) -> ResponseStore:
    return SqliteStore(":memory:", limits)


def _redis(request: Any, limits: StoreLimits) -> ResponseStore:
    from proxy.shell.store.redis import RedisStore

    return RedisStore(request.getfixturevalue("redis_url"), limits)


BACKENDS: dict[str, Callable[[Any, StoreLimits], ResponseStore]] = {
    "sqlite-file": _sqlite_file,
    "sqlite-memory": _sqlite_memory,
    "redis": _redis,
}


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: Any) -> MakeStore:
    """A store of the backend under test, with `StoreLimits` overridden by keyword."""
    def make(**limits: Any) -> ResponseStore:
        settings = {"max_age_seconds": 3600.0, "max_responses": 100,
                    "max_bytes_per_key": 0, "max_bytes": 0, **limits}
        return BACKENDS[request.param](request, StoreLimits(**settings))
    return make


@pytest.fixture
def store(make_store: MakeStore) -> ResponseStore:
    return make_store()


def kept(key: str, previous: str | None = None, pad: int = 0) -> StoredResponse:
    return StoredResponse(key, previous, [{"in": key, "pad": "x" * pad}, {"out": key}],
                b'{"id": "%s"}' % key.encode())


def items(*keys: str) -> list[dict[str, Any]]:
    return [item for key in keys for item in kept(key).items]


A, B = "owner-a", "owner-b"


def test_a_chain_is_recalled_oldest_first(store):
    assert store.put(A, kept("a"))
    assert store.put(A, kept("b", "a"))
    assert store.put(A, kept("c", "b"))
    assert store.recall(A, "c") == items("a", "b", "c")
    assert store.recall(A, "a") == items("a")
    assert store.get(A, "b") == b'{"id": "b"}'
    assert store.recall(A, "zzz") is None
    assert store.get(A, "zzz") is None


def test_a_chain_with_a_missing_link_is_not_recalled(store):
    store.put(A, kept("b", "a"))
    assert store.recall(A, "b") is None
    store.put(A, kept("a"))
    assert store.recall(A, "b") == items("a", "b")


def test_delete(store):
    store.put(A, kept("a"))
    assert store.delete(A, "a") is True
    assert store.delete(A, "a") is False
    assert store.get(A, "a") is None
    assert store.recall(A, "a") is None


def test_another_owners_answer_is_as_if_never_kept(store):
    store.put(A, kept("a"))
    store.put(A, kept("b", "a"))
    assert store.get(B, "a") is None
    assert store.recall(B, "b") is None
    assert store.delete(B, "a") is False
    assert store.get(A, "a") == b'{"id": "a"}'  # A still has it
    assert store.recall(A, "b") == items("a", "b")


def test_a_chain_through_another_owners_answer_is_not_recalled(store):
    store.put(A, kept("a"))
    store.put(B, kept("b", "a"))  # B names A's answer as its previous one
    assert store.recall(B, "b") is None


def test_owners_are_keyed_hashes_of_the_key(make_store):
    store = make_store()
    first = store.owner("sk-alpha")
    assert first == store.owner("sk-alpha")
    assert first != store.owner("sk-beta")
    assert "sk-alpha" not in first
    plain = (hashlib.sha256(b"sk-alpha").hexdigest(), hashlib.sha1(b"sk-alpha").hexdigest(),
             hashlib.md5(b"sk-alpha").hexdigest())
    assert first not in plain
    assert store.owner(None) == NO_KEY_OWNER
    assert NO_KEY_OWNER not in (first, store.owner("sk-beta"))


def test_a_conversation_over_the_byte_limit_is_refused_before_it_is_loaded(store):
    store.put(A, kept("a", pad=1000))
    store.put(A, kept("b", "a", pad=1000))
    whole = sum(len(str(item)) for item in items("a", "b"))  # about the stored size
    assert store.recall(A, "b", max_bytes=100 * whole) is not None
    with pytest.raises(ProxyError) as caught:
        store.recall(A, "b", max_bytes=1500)
    assert caught.value.status == 413
    assert caught.value.code == "conversation_too_large"
    assert caught.value.param == "previous_response_id"
    assert store.recall(A, "a", max_bytes=1500) is not None  # one answer alone fits
    assert store.recall(B, "b", max_bytes=1500) is None  # another's: not found, not too large


def test_the_count_cap_is_per_owner(make_store):
    store = make_store(max_responses=2)
    store.put(B, kept("b1"))
    for key in ("a1", "a2", "a3"):
        store.put(A, kept(key))
    assert store.get(A, "a1") is None  # A's oldest let go
    assert store.get(A, "a2")
    assert store.get(A, "a3")
    assert store.get(B, "b1")  # never another owner's
    assert store.usage(A).count == 2


def test_the_byte_cap_is_per_owner(make_store):
    store = make_store(max_bytes_per_key=5000)
    store.put(B, kept("b1", pad=3000))
    for key in ("a1", "a2", "a3"):
        store.put(A, kept(key, pad=2000))
    assert store.get(A, "a1") is None
    assert store.get(A, "a2")
    assert store.get(A, "a3")
    assert store.get(B, "b1")
    usage = store.usage(A)
    assert 4000 < usage.bytes <= 5000
    assert usage.total_bytes == usage.bytes + store.usage(B).bytes


def test_the_total_cap_lets_go_of_the_writers_own_answers_only(make_store):
    store = make_store(max_bytes=9000)
    store.put(B, kept("b1", pad=3000))
    store.put(B, kept("b2", pad=3000))
    store.put(A, kept("a1", pad=2000))
    store.put(A, kept("a2", pad=2000))  # past the total: A's own oldest goes
    assert store.get(A, "a1") is None
    assert store.get(A, "a2")
    assert store.get(B, "b1")
    assert store.get(B, "b2")


def test_an_answer_just_kept_is_never_let_go(make_store):
    store = make_store(max_bytes_per_key=100)
    assert store.put(A, kept("big", pad=1000))
    assert store.get(A, "big")


def test_usage_counts_an_owners_answers(store):
    assert store.usage(A) == Usage(0, 0, 0)
    store.put(A, kept("a", pad=100))
    store.put(B, kept("b", pad=100))
    usage = store.usage(A)
    assert usage.count == 1
    assert usage.bytes > 100
    assert usage.total_bytes == usage.bytes + store.usage(B).bytes


def test_retention_by_age(make_store, monkeypatch):
    store = make_store(max_age_seconds=60)
    store.put(A, kept("a"))
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    assert store.get(A, "a") is None
    assert store.recall(A, "a") is None
    assert store.delete(A, "a") is False
    assert store.expire() == 1


def test_a_fresh_store_is_healthy(store):
    store.check()
    store.put(A, kept("a"))
    store.check()


def test_a_lowered_count_cap_lets_every_answer_past_it_go_at_once(make_store, request):
    store = make_store(max_responses=5)
    for key in ("a1", "a2", "a3", "a4", "a5"):
        store.put(A, kept(key))
    assert store.usage(A).count == 5
    if request.node.callspec.params["make_store"] == "sqlite-memory":
        return  # a restart with other settings: only a store that outlives the process
    lowered = make_store(max_responses=2)  # the next start, with a lower cap
    lowered.put(A, kept("a6"))
    assert [key for key in ("a1", "a2", "a3", "a4", "a5", "a6") if lowered.get(A, key)] == [
        "a5", "a6"]


def test_an_upstream_profile_is_kept_by_its_key_for_every_reader(store):
    """Not an owner's: kept once for every worker and instance, the last one kept wins."""
    key = "http://10.0.0.5:8000|Qwen/Qwen3-8B"
    assert store.get_profile(key) is None
    assert store.put_profile(key, b'{"kind": "vllm"}', 60)
    assert store.put_profile(key + "x", b'{"kind": "sglang"}', 60)
    assert store.get_profile(key) == b'{"kind": "vllm"}'
    assert store.put_profile(key, b'{"kind": "vllm", "version": "0.33.0"}', 60)
    assert store.get_profile(key) == b'{"kind": "vllm", "version": "0.33.0"}'
    assert store.get(NO_KEY_OWNER, key) is None  # no answer by that name


def test_an_upstream_profile_goes_after_its_ttl(store):
    assert store.put_profile("u|m", b"{}", 0.001)
    deadline = time.monotonic() + 5  # Redis expires it on its own clock
    while store.get_profile("u|m") is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.get_profile("u|m") is None


# -- the profile area ---------------------------------------------------------------------

def test_a_profile_is_kept_until_its_time_and_swept_after(store):
    assert store.put_profile("p1", b'{"kind": "vllm"}', 0.2)
    assert store.get_profile("p1") == b'{"kind": "vllm"}'
    time.sleep(0.3)
    assert store.get_profile("p1") is None
    assert store.put_profile("p2", b"{}", 60)  # a write sweeps the expired: p1's row goes
    assert store.get_profile("p1") is None
    assert store.get_profile("p2") == b"{}"


def test_profiles_past_the_cap_go_soonest_to_expire_first(store, monkeypatch):
    from proxy.shell.store import redis as redis_backend
    from proxy.shell.store import sqlite as sqlite_backend

    for module in (sqlite_backend, redis_backend):
        monkeypatch.setattr(module, "MAX_PROFILES", 3)
    for i in range(5):
        assert store.put_profile(f"p{i}", b"{}", 100 + i)
    assert [store.get_profile(f"p{i}") is not None for i in range(5)] == [
        False, False, True, True, True]


def test_a_profile_larger_than_its_cap_is_not_kept(store):
    from proxy.shell.store.interface import MAX_PROFILE_BYTES

    assert not store.put_profile("big", b"x" * (MAX_PROFILE_BYTES + 1), 60)
    assert store.get_profile("big") is None


def test_profiles_count_in_the_total(store):
    before = store.usage(A).total_bytes
    assert store.put_profile("p", b"x" * 1000, 60)
    assert store.usage(A).total_bytes == before + 1000
    assert store.put_profile("p", b"x" * 10, 60)  # replaced, not added
    assert store.usage(A).total_bytes == before + 10
