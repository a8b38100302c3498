"""The run directory as `python app.py` uses it (gunicorn, gevent workers): on a full file
system every worker keeps serving and one started there boots, its figures in memory; a run
directory another user made, or one others may write to, is refused at start with nothing in it
touched (the fourth adversarial probe of the production server, issue 38). `test_run_dir.py`
has the directory's checks without a server."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.serving import ROOT, Served, answer_hermes_call, free_port, served, tool_turn, wait_for

pytestmark = pytest.mark.integration

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
    answer_hermes_call(fake)
    run = small_tmpfs / "run"
    settings = {"PROMETHEUS_MULTIPROC_DIR": str(run), "TOOLCALL_PROXY_LOG_BODIES": "true"}
    with served(fake.url, settings, workers=2) as server:
        tool_turn(server.url)
        before = _workers(server)
        _fill(small_tmpfs)
        os.kill(before[0], signal.SIGKILL)  # its replacement boots on the full disk
        wait_for(lambda: len(set(_workers(server)) - set(before)) == 1, 30)
        for _ in range(60):  # each a new slot of the ring: pages never touched before
            tool_turn(server.url)
        assert requests.get(server.url + "/proxy/status.json", timeout=10).status_code == 200
        assert requests.get(server.url + "/proxy/metrics", timeout=10).status_code == 200
        assert _workers(server) == sorted({*before[1:], *_workers(server)})  # none died
    assert "kept in memory" in server.log
    assert "SIGBUS" not in server.log


def test_a_run_directory_another_user_made_is_refused_at_start(fake, os_users, tmp_path):
    attacker, _ = os_users
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    planted = shared / "status"
    planted.mkdir()
    victim_file = tmp_path / "precious"
    victim_file.write_text("the proxy user's own file")
    (planted / "turns-1.ring").symlink_to(victim_file)
    for path in (shared, planted):
        os.chown(path, attacker.pw_uid, attacker.pw_gid)
    for run_dir, why in ((shared, "is owned by another user"),
                         (tmp_path, "is writable by its group or by others")):
        if run_dir == tmp_path:
            run_dir.chmod(0o777)
        env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": fake.url,
               "TOOLCALL_PROXY_PORT": str(free_port()), "PROMETHEUS_MULTIPROC_DIR": str(run_dir)}
        started = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, timeout=60,
                                 capture_output=True, text=True)
        assert started.returncode == 2, started.stderr
        assert started.stderr.startswith(
            f"toolcall-proxy: PROMETHEUS_MULTIPROC_DIR {run_dir} {why}")
        assert len(started.stderr.splitlines()) == 1
    assert victim_file.read_text() == "the proxy user's own file"
    assert (planted / "turns-1.ring").is_symlink()  # nothing there was touched
