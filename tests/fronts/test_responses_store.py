"""The SQLite response store's own behaviour (the contract every backend keeps is
`test_store_contract`): one file shared by every worker, created lazily, a store that fails,
the factory that reads `responses_store_url`."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from proxy.base.errors import ProxyError
from proxy.fronts import StoredResponse
from proxy.shell.config_load import ConfigError, build_config
from proxy.shell.store import open_store, store_url
from proxy.shell.store.interface import StoreLimits
from proxy.shell.store.sqlite import SqliteStore, default_path

LIMITS = StoreLimits(3600, 10)


def kept(key: str, previous: str | None = None) -> StoredResponse:
    return StoredResponse(key, previous, [{"in": key}, {"out": key}],
                          b'{"id": "%s"}' % key.encode())


def test_the_file_and_its_secret_are_shared_by_every_store_on_it(tmp_path):
    path = str(tmp_path / "r.sqlite3")
    first, second = SqliteStore(path, LIMITS), SqliteStore(path, LIMITS)  # two workers
    owner = first.owner("sk-a")
    assert second.owner("sk-a") == owner
    first.put(owner, kept("a"))
    assert second.get(owner, "a") == b'{"id": "a"}'


def test_memory_stores_do_not_share(tmp_path):
    first, second = SqliteStore(":memory:", LIMITS), SqliteStore(":memory:", LIMITS)
    first.put("o", kept("a"))
    assert second.get("o", "a") is None


def test_nothing_is_created_until_something_is_kept(tmp_path):
    path = tmp_path / "lazy" / "r.sqlite3"
    store = SqliteStore(str(path), LIMITS)
    store.check()
    store.owner(None)
    assert not path.parent.exists()


def test_a_store_that_cannot_be_written_fails_softly_and_reads_as_a_503(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = SqliteStore(str(blocker / "r.sqlite3"), LIMITS)
    assert store.put("o", kept("a")) is False
    for read in (lambda: store.recall("o", "a"), lambda: store.get("o", "a"),
                 lambda: store.delete("o", "a"), lambda: store.owner("sk")):
        with pytest.raises(ProxyError) as caught:
            read()
        assert caught.value.status == 503
        assert caught.value.code == "store_unavailable"


def test_a_corrupt_file_fails_the_health_check(tmp_path):
    path = tmp_path / "r.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ProxyError) as caught:
        SqliteStore(str(path), LIMITS).check()
    assert caught.value.status == 503


@pytest.mark.parametrize(("settings", "url"), [
    ({}, None),  # the default path, read as the test runs (its state folder is the test's)
    ({"responses_store_path": "/data/r.db"}, "sqlite:///data/r.db"),
    ({"responses_store_path": ":memory:"}, "sqlite://:memory:"),
    ({"responses_store_url": "sqlite:///srv/r.db"}, "sqlite:///srv/r.db"),
    ({"responses_store_url": "sqlite://:memory:"}, "sqlite://:memory:"),
])
def test_the_store_url_comes_from_the_url_or_the_path(settings, url):
    url = url or "sqlite://" + default_path()
    config = build_config({"upstream": "http://127.0.0.1:1", **settings})
    assert store_url(config) == url
    store = open_store(config)
    assert store.backend == "sqlite"
    assert isinstance(store, SqliteStore)
    assert "sqlite://" + store.path == url


@pytest.mark.parametrize("settings", [
    {"responses_store_url": "mysql://x/y"},
    {"responses_store_url": "sqlite://relative/path"},
    {"responses_store_url": "/just/a/path"},
    {"responses_store_url": "sqlite:///a.db", "responses_store_path": "/b.db"},
    {"responses_store_max_bytes": -1},
    {"responses_store_max_bytes_per_key": -1},
])
def test_a_bad_store_setting_stops_the_proxy(settings):
    with pytest.raises(ConfigError):
        build_config({"upstream": "http://127.0.0.1:1", **settings})


@pytest.fixture
def open_umask():
    """A umask that would let anyone read new files (so the store's own care shows)."""
    old = os.umask(0o002)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _another_worker(path) -> sqlite3.Connection:
    """A connection holding the file open with a write done: its -wal and -shm exist (SQLite
    removes them when the last connection closes)."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    with db:
        db.execute("CREATE TABLE IF NOT EXISTS scratch (x)")
        db.execute("INSERT INTO scratch VALUES (1)")
    return db


def test_the_store_file_and_its_wal_are_private_in_a_private_folder(tmp_path, open_umask):
    path = tmp_path / "state" / "toolcall-proxy" / "r.sqlite3"
    store = SqliteStore(str(path), LIMITS)
    store.put(store.owner("sk-a"), kept("a"))
    assert _mode(path.parent) == 0o700
    assert _mode(path) == 0o600
    held = _another_worker(path)
    try:
        store.put(store.owner("sk-a"), kept("b"))
        for name in ("r.sqlite3-wal", "r.sqlite3-shm"):
            assert _mode(path.parent / name) == 0o600, name
    finally:
        held.close()


def test_an_existing_store_file_is_narrowed_to_its_owner(tmp_path, open_umask):
    folder = tmp_path / "mine"
    folder.mkdir()
    folder.chmod(0o775)
    path = folder / "r.sqlite3"
    SqliteStore(str(path), LIMITS).put("o", kept("a"))
    held = _another_worker(path)
    try:
        for name in ("r.sqlite3", "r.sqlite3-wal", "r.sqlite3-shm"):
            os.chmod(folder / name, 0o644)  # as an earlier version left them
        store = SqliteStore(str(path), LIMITS)  # the next start
        assert store.get("o", "a") == b'{"id": "a"}'
        for name in ("r.sqlite3", "r.sqlite3-wal", "r.sqlite3-shm"):
            assert _mode(folder / name) == 0o600, name
    finally:
        held.close()
    assert _mode(folder) == 0o775  # a folder the user made: left as it is


def test_the_default_folder_is_made_private_even_when_it_exists(tmp_path, monkeypatch,
                                                                open_umask):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    folder = tmp_path / "toolcall-proxy"
    folder.mkdir(mode=0o755)
    store = SqliteStore(default_path(), LIMITS)
    store.put("o", kept("a"))
    assert _mode(folder) == 0o700
    assert _mode(folder / "responses.sqlite3") == 0o600
