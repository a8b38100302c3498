"""The readiness hooks without a server: a worker that can serve tells systemd so, whether
it opened the port or found it open (systemd's socket activation, `reuse_port`, a
descriptor among the binds, a re-exec's inherited listeners)."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from proxy.shell.server import readiness


def _worker(listener: socket.socket) -> SimpleNamespace:
    log = SimpleNamespace(info=lambda *args: None)
    return SimpleNamespace(sockets=[listener], cfg=SimpleNamespace(backlog=16), log=log)


@pytest.fixture
def systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as heard:
        heard.bind(path)
        heard.settimeout(0.5)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        readiness.take_notify_socket()
        yield heard
    monkeypatch.setattr(readiness, "_notify_address", None)


def test_a_worker_that_opens_the_port_tells_systemd(systemd):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        assert readiness.open_listeners(_worker(listener))
        assert systemd.recv(4096).startswith(b"READY=1")


def test_a_worker_whose_port_was_opened_elsewhere_still_tells_systemd(systemd):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # inherited listening: socket activation, reuse_port, fd://
        assert not readiness.open_listeners(_worker(listener))
        assert systemd.recv(4096).startswith(b"READY=1")
