"""A real `redis-server` (Debian's package; `make test` installs it) for the tests: started
once per session on a free loopback port, in a temporary directory, with no persistence, and
stopped after. `redis_url` hands each test an empty database; `RedisServer.stop`/`start` let
a test take Redis away and bring it back on the same port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.serving import free_port

NOT_INSTALLED = "redis-server is not installed here (make test installs it)"
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None, reason=NOT_INSTALLED)


class RedisServer:
    """One redis-server process on 127.0.0.1:`port`, its files in `folder`."""

    def __init__(self, folder: Path, port: int | None = None, password: str = "") -> None:
        self.folder = folder
        self.port = port or free_port()
        self.password = password
        self.url = f"redis://{':' + password + '@' if password else ''}127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start it and wait until it answers PING."""
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.folder),
             "--protected-mode", "yes", "--loglevel", "warning",
             *(["--requirepass", self.password] if self.password else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.process.stderr.read()!r}")
            if self.ping():
                return
            time.sleep(0.02)
        raise RuntimeError("redis-server did not answer PING in 20 s")

    def ping(self) -> bool:
        """Whether it answers PING now."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))  # up, either way
        except OSError:
            return False

    def command(self, *words: str) -> bytes:
        """One command (inline form), its raw reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(" ".join(words).encode() + b"\r\n")
            return sock.recv(65536)

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL) and wait for it to exit."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A redis-server in a folder of its own, started, and stopped after."""
    with tempfile.TemporaryDirectory(prefix="toolcall-redis-") as folder:
        server = RedisServer(Path(folder))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The session's redis-server (skips where it is not installed)."""
    if shutil.which("redis-server") is None:
        pytest.skip(NOT_INSTALLED)
    with running_redis() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of an empty database on the session's redis-server (started again when a
    test stopped it)."""
    if not redis_server.ping():
        redis_server.stop()
        redis_server.start()
    assert redis_server.command("FLUSHALL").startswith(b"+OK")
    return redis_server.url
