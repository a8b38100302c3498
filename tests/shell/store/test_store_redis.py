"""What the Redis store keeps beyond the store contract (tests/shell/store/test_store_contract.py):
one secret for every instance, expiry by Redis itself, a chain in one round trip, a bounded
number of keys, and a Redis that is down or silent answered at once as a 503; and the
settings that choose it."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.fronts import StoredResponse
from proxy.shell.config_load import ConfigError, build_config
from proxy.shell.store import open_store
from proxy.shell.store.interface import StoreLimits
from proxy.shell.store.redis import PREFIX, SECRET_SECONDS, RedisStore

A = "owner-a"


def kept(key: str, previous: str | None = None, pad: int = 0) -> StoredResponse:
    return StoredResponse(key, previous, [{"in": key, "pad": "x" * pad}],
                          b'{"id": "%s"}' % key.encode())


def limits(**settings: float) -> StoreLimits:
    return StoreLimits(**{"max_age_seconds": 3600.0, "max_responses": 100,
                          "max_bytes_per_key": 0, "max_bytes": 0, **settings})


def _integer(reply: bytes) -> int:
    assert reply.startswith(b":"), reply
    return int(reply[1:].strip())


def test_every_instance_names_an_owner_alike_and_sees_the_others_answers(redis_url):
    one, two = RedisStore(redis_url, limits()), RedisStore(redis_url, limits())
    assert one.owner("sk-alpha") == two.owner("sk-alpha")
    assert one.owner("sk-alpha") != two.owner("sk-beta")
    one.put(one.owner("sk-alpha"), kept("a"))
    two.put(two.owner("sk-alpha"), kept("b", "a"))
    assert one.recall(one.owner("sk-alpha"), "b") == [{"in": "a", "pad": ""},
                                                      {"in": "b", "pad": ""}]
    assert two.delete(two.owner("sk-alpha"), "a") is True
    assert one.get(one.owner("sk-alpha"), "a") is None


def test_a_new_redis_has_a_new_secret(redis_server, redis_url):
    before = RedisStore(redis_url, limits()).owner("sk-alpha")
    redis_server.command("FLUSHALL")
    assert RedisStore(redis_url, limits()).owner("sk-alpha") != before


def test_an_instance_follows_the_secret_another_set_in_an_emptied_redis(redis_server,
                                                                         redis_url,
                                                                         monkeypatch):
    one = RedisStore(redis_url, limits())
    before = one.owner("sk-alpha")
    redis_server.command("FLUSHALL")  # Redis restarted empty, say
    two = RedisStore(redis_url, limits())
    now = two.owner("sk-alpha")  # a new secret, set by the other instance
    assert now != before
    assert one.owner("sk-alpha") == before  # read again only every SECRET_SECONDS
    later = time.monotonic() + SECRET_SECONDS
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert one.owner("sk-alpha") == now


def test_redis_expires_the_answers_itself(redis_server, redis_url):
    store = RedisStore(redis_url, limits(max_age_seconds=60))
    store.put(A, kept("a"))
    for key in (f"{PREFIX}answer:{A}:a", f"{PREFIX}owner:{A}", f"{PREFIX}owner-bytes:{A}"):
        ttl = _integer(redis_server.command("PTTL", key))
        assert 0 < ttl <= 60_000, key
    forever = RedisStore(redis_url, limits(max_age_seconds=0))
    forever.put(A, kept("b"))
    assert _integer(redis_server.command("PTTL", f"{PREFIX}answer:{A}:b")) == -1  # no TTL


def test_a_chain_is_recalled_in_one_command(redis_url, monkeypatch):
    store = RedisStore(redis_url, limits())
    previous = None
    for key in "abcdefgh":
        store.put(A, kept(key, previous))
        previous = key
    assert store.recall(A, "h") is not None  # the script is loaded now
    sent: list[str] = []
    send = store.client.execute_command
    monkeypatch.setattr(store.client, "execute_command",
                        lambda *args, **kw: sent.append(args[0]) or send(*args, **kw))
    assert len(store.recall(A, "h") or ()) == 8
    assert sent == ["EVALSHA"]


def test_the_keys_stay_bounded(redis_server, redis_url):
    store = RedisStore(redis_url, limits(max_responses=5))
    owners = [store.owner(f"sk-{n}") for n in range(3)]
    for n in range(60):
        store.put(owners[n % 3], kept(f"r{n}", pad=100))
    # 5 answers per owner, each owner's set and byte count, the index, its bytes, the secret
    assert _integer(redis_server.command("DBSIZE")) == 3 * (5 + 2) + 3
    assert _integer(redis_server.command("ZCARD", f"{PREFIX}all")) == 15


def test_answers_past_their_age_leave_the_index_and_the_counts(redis_url, monkeypatch):
    store = RedisStore(redis_url, limits(max_age_seconds=60))
    store.put(A, kept("old", pad=1000))
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    store.put("owner-b", kept("new", pad=10))
    usage = store.usage(A)
    assert (usage.count, usage.bytes) == (0, 0)
    assert usage.total_bytes == store.usage("owner-b").bytes > 0
    assert store.expire() == 0  # already let go of by the write


@contextlib.contextmanager
def _silent_server() -> Iterator[tuple[int, threading.Event]]:
    """A TCP server that accepts and never answers (a Redis that hangs), until the event."""
    done = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        listener.settimeout(0.1)
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], done
    finally:
        done.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def _refused_port() -> Iterator[int]:
    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


@pytest.fixture(params=["refused", "silent"])
def unreachable(request) -> Iterator[str]:
    """The URL of a Redis that refuses connections, or one that never answers."""
    if request.param == "refused":
        for port in _refused_port():
            yield f"redis://127.0.0.1:{port}/0"
    else:
        with _silent_server() as (port, _):
            yield f"redis://127.0.0.1:{port}/0?socket_timeout=0.2&socket_connect_timeout=0.2"


def test_a_redis_down_or_silent_is_a_503_and_a_write_that_fails_is_false(unreachable):
    store = RedisStore(unreachable, limits())
    for read in (lambda: store.owner("sk-alpha"), lambda: store.get(A, "a"),
                 lambda: store.recall(A, "a"), lambda: store.delete(A, "a"),
                 lambda: store.usage(A), store.check):
        with pytest.raises(ProxyError) as caught:
            read()
        assert caught.value.status == 503
        assert caught.value.code == "store_unavailable"
        assert caught.value.headers == {"Retry-After": "1"}
        assert "127.0.0.1" not in caught.value.message  # where Redis lives: not the client's
    # Refused, the write was never sent; unanswered, it may have been run: nobody can say.
    assert store.put(A, kept("a")) is (None if "socket_timeout" in unreachable else False)


def test_settings_choose_redis(redis_url):
    config = build_config({"responses_store_url": redis_url})
    store = open_store(config)
    assert store.backend == "redis"
    store.check()
    rediss = build_config({"responses_store_url": "rediss://:pw@redis.example:6380/2"})
    assert open_store(rediss).backend == "redis"


def test_the_redis_password_never_shows_in_the_settings_summary():
    config = build_config({"responses_store_url": "redis://:s3cret-pw@10.0.0.5:6379/1"})
    assert "s3cret-pw" not in str(config.summary())
    assert config.summary()["responses_store_url"] == "redis://***@10.0.0.5:6379/1"
    assert Config().summary()["responses_store_url"] == ""


@pytest.mark.parametrize("url", ["redis://", "redis://:pw@/0", "redis://host:99999/0",
                                 "redis://host:6379/zero", "redis://host/0?socket_timeout=x",
                                 "redis:/host:6379/0"])
def test_a_bad_redis_url_is_refused_naming_the_setting(url):
    with pytest.raises(ConfigError) as caught:
        build_config({"responses_store_url": url})
    assert "responses_store_url" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_redis_url_without_the_package_is_one_clear_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "redis" else real(name, *a))
    with pytest.raises(ConfigError) as caught:
        build_config({"responses_store_url": "redis://127.0.0.1:6379/0"})
    assert str(caught.value) == ("'responses_store_url' is a Redis URL but the 'redis' "
                                 "package is not installed: pip install redis")
    build_config({"responses_store_url": "sqlite://:memory:"})  # SQLite needs no package


def test_the_redis_lock_pins_with_hashes_what_the_tests_run():
    """requirements-redis.lock (what the container installs) pins a redis that the tests'
    range admits, every line with its hash."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    root = Path(__file__).resolve().parents[3]
    text = (root / "requirements-redis.lock").read_text().replace("\\\n", " ")
    pins = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement = Requirement(line.split(" --hash")[0].strip())
            assert "--hash=sha256:" in line, line
            (spec,) = requirement.specifier
            pins[requirement.name] = Version(spec.version)
    tested = next(Requirement(line) for line in
                  (root / "requirements-dev.txt").read_text().splitlines()
                  if line.startswith("redis"))
    assert pins["redis"] in tested.specifier
    assert "-r requirements-redis.lock" in (root / "Dockerfile").read_text()


def test_a_redis_with_a_password(tmp_path):
    """`redis://:password@host:port/db`: the password opens it; a wrong one is the 503."""
    from tests.redis_server import NOT_INSTALLED, RedisServer

    if shutil.which("redis-server") is None:
        pytest.skip(NOT_INSTALLED)
    server = RedisServer(tmp_path, password="s3cret-pw")
    server.start()
    try:
        store = RedisStore(server.url, limits())
        assert store.put(store.owner("sk-alpha"), kept("a"))
        assert store.get(store.owner("sk-alpha"), "a") == b'{"id": "a"}'
        wrong = RedisStore(server.url.replace("s3cret-pw", "guess"), limits())
        with pytest.raises(ProxyError) as caught:
            wrong.get(A, "a")
        assert caught.value.code == "store_unavailable"
        assert "guess" not in caught.value.message
    finally:
        server.stop()
