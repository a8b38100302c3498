"""The server's run directory (PROMETHEUS_MULTIPROC_DIR): where every worker keeps its
Prometheus figures (prometheus_client's files) and its status ring, all written through
`mmap`.

It must be this user's alone: a directory another user made first, or may write to, could
hold a link that has a ring truncate and map a file of this user's, or a FIFO that hangs a
reader. So an operator's own directory is refused at start unless it is a directory (not a
link) owned by this user that no group or other user can write to, in folders no one else
may rename it out of (each owned by this user or root, and writable by others only when
sticky, as /tmp is).

A page of a mapped file first touched when the file system is full kills the process with
SIGBUS, not an error: so each worker allocates its files whole before prometheus_client maps
them (`allocate_worker_files`). A worker that cannot (a full disk) keeps its figures in
memory instead, and still serves.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

# The files prometheus_client maps for one worker of the proxy's metrics
# (`proxy.telemetry.metrics`): one per kind of value, `<kind>_<pid>.db`.
PROM_KINDS = ("counter", "histogram", "gauge_livesum", "gauge_livemin", "gauge_mostrecent")
# Each allocated at this size (prometheus_client starts at 64 KiB and grows by doubling, as
# sparse files): room for some thousands of series, more than the proxy's closed labels make.
PROM_FILE_BYTES = 512 * 1024


def unsafe_run_dir(path: str) -> str | None:
    """Why `path` must not be the run directory (None: it may, or it is missing and will be
    made private)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return _unsafe_above(path)
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return "is owned by another user"
    if info.st_mode & 0o022:
        return "is writable by its group or by others"
    return _unsafe_above(path)


def _unsafe_above(path: str) -> str | None:
    """Why someone else could rename `path` away and put a directory of theirs in its place:
    a folder above it (as written, or where its links lead) owned by another user than this
    one or root, or writable by others and not sticky."""
    parent = Path(os.path.abspath(path)).parent
    real = Path(os.path.realpath(parent))
    for folder in dict.fromkeys([parent, *parent.parents, real, *real.parents]):
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            continue  # (made by this user, when the run directory is)
        if info.st_uid not in (os.geteuid(), 0):
            return f"is in {folder}, which is owned by another user"
        if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return f"is in {folder}, which is writable by others and not sticky"
    return None


def fresh_run_dir(path: str) -> None:
    """Empty the run directory `path` (made 0700 if missing) for a new server; raise
    OSError if it is not safe (see `unsafe_run_dir`), checked before and after."""
    why = unsafe_run_dir(path)
    if not why:
        with contextlib.suppress(FileExistsError):
            os.makedirs(path, mode=0o700)
        why = unsafe_run_dir(path)  # (someone else's, made meanwhile)
    if why:
        raise PermissionError(f"{path} {why}")
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


def allocate_worker_files(directory: str, pid: int) -> OSError | None:
    """Allocate, whole, every file prometheus_client will map for worker `pid` (it then
    finds them and maps them as they are); the error when that fails (nothing is left)."""
    made = []
    try:
        for kind in PROM_KINDS:
            path = Path(directory, f"{kind}_{pid}.db")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            made.append(path)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                    raise PermissionError(f"{path} is not a regular file of this user's")
                os.posix_fallocate(fd, 0, PROM_FILE_BYTES)
            finally:
                os.close(fd)
    except OSError as exc:
        for path in made:
            with contextlib.suppress(OSError):
                path.unlink()
        return exc
    return None
