"""What the fourth adversarial probe of the production server found (issue 38), as
regressions against `python app.py` (gunicorn, gevent workers, a real run directory):
half-open request heads, a full run directory, captures read across keys, an open and costly
status.json, a run directory someone else made, and the page's minor leaks."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.serving import Served, served
from tests.shell.test_entrypoints import _hermes, _tool_turn, _wait_for

pytestmark = pytest.mark.integration


def test_half_open_request_heads_do_not_hold_the_server(fake):
    """Connections that send part of a request line and stop are closed once a head's own
    time is over (not the keep-alive's 75 s), so they cannot keep everyone else out."""
    settings = {"GUNICORN_WORKER_CONNECTIONS": "40", "GUNICORN_HEAD_TIMEOUT": "2"}
    with served(fake.url, settings) as server:
        stalled: list[socket.socket] = []
        try:
            for _ in range(120):  # three times what the worker holds at once
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                sock.sendall(b"GET /proxy/hea")  # 14 bytes of a request line, then nothing
                stalled.append(sock)
            for sock in stalled:
                sock.settimeout(30)  # a bound well below the keep-alive's 75 s
                assert sock.recv(100) == b""  # closed, without a word
            health = requests.get(server.url + "/proxy/health", timeout=30)
            assert health.status_code == 200
        finally:
            for sock in stalled:
                sock.close()


@pytest.fixture
def small_tmpfs(tmp_path) -> Iterator[Path]:
    """A real tmpfs of 16 MiB (as /tmp often is), mounted for the test and unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "small"
    point.mkdir(mode=0o700)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs",
                              str(point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs was refused here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _fill(folder: Path) -> None:
    """Write a file in `folder` until its file system has not one block left."""
    with open(folder / "filler", "wb", buffering=0) as filler:
        chunk = 1 << 20
        while chunk:
            try:
                filler.write(b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2


def _workers(server: Served) -> list[int]:
    pid = server.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sorted(int(child) for child in children)


def test_a_full_run_directory_keeps_every_worker_serving(fake, small_tmpfs):
    """Rings and Prometheus files are mapped: on a full file system a first touch of an
    unallocated page would kill the worker (SIGBUS). Every worker keeps serving, and one
    started on the full disk boots and serves, its figures in memory."""
    _hermes(fake)
    run = small_tmpfs / "run"
    settings = {"PROMETHEUS_MULTIPROC_DIR": str(run), "TOOLCALL_PROXY_LOG_BODIES": "true"}
    with served(fake.url, settings, workers=2) as server:
        _tool_turn(server.url)
        before = _workers(server)
        _fill(small_tmpfs)
        os.kill(before[0], signal.SIGKILL)  # its replacement boots on the full disk
        _wait_for(lambda: len(set(_workers(server)) - set(before)) == 1, 30)
        for _ in range(60):  # each a new slot of the ring: pages never touched before
            _tool_turn(server.url)
        assert requests.get(server.url + "/proxy/status.json", timeout=10).status_code == 200
        assert requests.get(server.url + "/proxy/metrics", timeout=10).status_code == 200
        assert _workers(server) == sorted({*before[1:], *_workers(server)})  # none died
    assert "kept in memory" in server.log
    assert "SIGBUS" not in server.log
