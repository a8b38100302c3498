"""The store of kept answers (SQLite): chains, retention, deletion, and a store that fails."""

from __future__ import annotations

import time

import pytest

from proxy.errors import ProxyError
from proxy.fronts import Kept
from proxy.shell.store import KeptStore


def kept(key: str, previous: str | None = None) -> Kept:
    return Kept(key, previous, [{"in": key}, {"out": key}], b'{"id": "%s"}' % key.encode())


@pytest.fixture(params=["file", "memory"])
def store(request, tmp_path) -> KeptStore:
    path = str(tmp_path / "sub" / "responses.sqlite3") if request.param == "file" else ":memory:"
    return KeptStore(path, max_age_seconds=3600, max_count=100)


def test_a_chain_is_recalled_oldest_first(store):
    store.put(kept("a"))
    store.put(kept("b", "a"))
    store.put(kept("c", "b"))
    assert store.recall("c") == [{"in": "a"}, {"out": "a"}, {"in": "b"}, {"out": "b"},
                                 {"in": "c"}, {"out": "c"}]
    assert store.recall("a") == [{"in": "a"}, {"out": "a"}]
    assert store.body("b") == b'{"id": "b"}'
    assert store.recall("zzz") is None
    assert store.body("zzz") is None


def test_a_chain_with_a_missing_link_is_not_recalled(store):
    store.put(kept("b", "a"))
    assert store.recall("b") is None


def test_delete(store):
    store.put(kept("a"))
    assert store.delete("a") is True
    assert store.delete("a") is False
    assert store.body("a") is None


def test_retention_by_count_lets_the_oldest_go(tmp_path):
    store = KeptStore(str(tmp_path / "r.sqlite3"), max_age_seconds=0, max_count=2)
    for key in "abc":
        store.put(kept(key))
        time.sleep(0.01)
    assert store.body("a") is None
    assert store.body("b")
    assert store.body("c")


def test_retention_by_age(tmp_path, monkeypatch):
    store = KeptStore(str(tmp_path / "r.sqlite3"), max_age_seconds=60, max_count=0)
    store.put(kept("a"))
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    assert store.body("a") is None
    assert store.recall("a") is None
    assert store.delete("a") is False


def test_the_file_is_shared_by_every_store_on_it(tmp_path):
    path = str(tmp_path / "r.sqlite3")
    KeptStore(path, 3600, 10).put(kept("a"))
    assert KeptStore(path, 3600, 10).body("a") == b'{"id": "a"}'  # another worker


def test_nothing_is_created_until_something_is_kept(tmp_path):
    path = tmp_path / "lazy" / "r.sqlite3"
    KeptStore(str(path), 3600, 10)
    assert not path.parent.exists()


def test_a_store_that_cannot_be_written_fails_softly_and_reads_as_an_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = KeptStore(str(blocker / "r.sqlite3"), 3600, 10)
    assert store.put(kept("a")) is False
    with pytest.raises(ProxyError) as caught:
        store.recall("a")
    assert caught.value.status == 500
    assert caught.value.code == "store_unavailable"
