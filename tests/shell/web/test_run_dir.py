"""The run directory the workers share (proxy.shell.web.run_dir.py): refused unless this user's
alone, emptied at start, and every file prometheus_client maps for a worker allocated whole
before it is mapped."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import textwrap

import pytest

from proxy.shell.web.run_dir import (
    PROM_FILE_BYTES,
    PROM_KINDS,
    allocate_worker_files,
    fresh_run_dir,
    unsafe_run_dir,
)


def test_a_missing_or_private_run_directory_may_be_used(tmp_path):
    assert unsafe_run_dir(str(tmp_path / "missing")) is None
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert unsafe_run_dir(str(private)) is None


@pytest.mark.parametrize(("make", "why"), [
    (lambda path: path.symlink_to(path.parent), "is not a directory"),
    (lambda path: path.write_text(""), "is not a directory"),
    (lambda path: (path.mkdir(), path.chmod(0o1777)), "is writable by its group or by others"),
    (lambda path: (path.mkdir(), path.chmod(0o770)), "is writable by its group or by others"),
])
def test_a_run_directory_others_could_have_made_or_change_is_refused(tmp_path, make, why):
    path = tmp_path / "run"
    make(path)
    assert unsafe_run_dir(str(path)) == why
    with pytest.raises(PermissionError, match=why):
        fresh_run_dir(str(path))


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user owns needs root")
@pytest.mark.parametrize("made", [True, False])
def test_a_run_directory_in_a_folder_another_user_owns_is_refused(tmp_path, made):
    """Sticky keeps other users from renaming what is kept in a folder, not its owner: the
    owner of a shared folder could swap a private run directory in it for one of theirs."""
    shared = tmp_path / "shared"
    shared.mkdir()
    nobody = pwd.getpwnam("nobody")
    os.chown(shared, nobody.pw_uid, nobody.pw_gid)
    shared.chmod(0o1777)
    path = shared / "run"
    if made:
        path.mkdir(mode=0o700)
    why = f"is in {shared}, which is owned by another user"
    assert unsafe_run_dir(str(path)) == why
    with pytest.raises(PermissionError, match=why):
        fresh_run_dir(str(path))
    assert unsafe_run_dir(str(tmp_path / "mine" / "run")) is None  # (pytest's, then root's)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user owns needs root")
def test_a_metrics_file_another_user_made_is_not_allocated_nor_mapped(tmp_path):
    nobody = pwd.getpwnam("nobody")
    planted = tmp_path / f"{PROM_KINDS[0]}_77.db"
    planted.write_bytes(b"")
    os.chown(planted, nobody.pw_uid, nobody.pw_gid)
    failed = allocate_worker_files(str(tmp_path), 77)
    assert isinstance(failed, PermissionError)
    assert list(tmp_path.iterdir()) == []  # nothing of it left to map


def test_a_fresh_run_directory_is_private_and_empty(tmp_path):
    path = tmp_path / "run"
    fresh_run_dir(str(path))
    assert (path.stat().st_mode & 0o777) == 0o700
    (path / "counter_1.db").write_bytes(b"old")
    (path / "status").mkdir()
    (path / "status" / "turns-1.ring").write_bytes(b"old")
    fresh_run_dir(str(path))
    assert list(path.iterdir()) == []


def test_every_file_the_metrics_map_is_one_allocated_whole(tmp_path):
    """In a process of its own (prometheus_client reads its mode from the environment once):
    the worker's files allocated, then every metric used; no file is made but those, and
    each holds its bytes (not a sparse file a full disk would fault on)."""
    script = textwrap.dedent(f"""
        import os
        from proxy.shell.web.run_dir import allocate_worker_files
        assert allocate_worker_files({str(tmp_path)!r}, os.getpid()) is None
        from proxy.telemetry.metrics import Metrics
        from proxy.telemetry.request_log import RequestLog
        metrics = Metrics()
        metrics.started()
        log = RequestLog("r", "POST", "/v1/chat/completions", upstream="u", upstream_ms=1.0,
                         status=502, upstream_status=502, heartbeats=1, rewrites=["x"])
        metrics.finished(log, 0.1)
        metrics.replica_requests.labels("u", "ok").inc()
        metrics.replica_failovers.labels("u").inc()
        metrics.replica_in_flight.labels("u").set(1)
        metrics.replica_up.labels("u").set(1)
        print(os.getpid())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)},
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                              os.path.dirname(__file__)))))
    assert done.returncode == 0, done.stderr
    pid = done.stdout.strip()
    made = sorted(path.name for path in tmp_path.iterdir())
    assert made == sorted(f"{kind}_{pid}.db" for kind in PROM_KINDS)
    for path in tmp_path.iterdir():
        assert path.stat().st_blocks * 512 >= PROM_FILE_BYTES == path.stat().st_size


def test_a_worker_that_cannot_allocate_leaves_nothing(tmp_path):
    (tmp_path / f"histogram_{os.getpid()}.db").mkdir()  # in the way: the allocation fails
    failed = allocate_worker_files(str(tmp_path), os.getpid())
    assert isinstance(failed, OSError)
    assert [path.name for path in tmp_path.iterdir()] == [f"histogram_{os.getpid()}.db"]
