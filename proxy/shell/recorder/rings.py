"""Where the status page's records are kept: bounded rings, so memory and disk stay flat.

One process keeps them in memory (`MemoryRecorder`). Under gunicorn every worker appends to a
ring file of its own in the server's shared run directory (`RingFileRecorder`), and the
status page reads every worker's file: the numbers are the whole server's. A store shared by
several instances (Redis) would be one more class with the same five methods.

A ring is written through `mmap`, so every byte of it is allocated before it is mapped (a
page first touched on a full file system would kill the worker with SIGBUS): a worker that
cannot allocate its ring keeps its records in memory instead. Rings are read as untrusted
bytes (only regular files, never through a link; a malformed one is skipped, slot by slot).
A capture belongs to the key that made it: it is kept under its owner's keyed hash and
served to that owner only.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import secrets
import stat
import struct
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from ...telemetry.status import CHART_MINUTES, MinuteCount, TurnRecord
from ..runtime.background import native_lock
from ..store.interface import owner_hash

RING_TURNS = 2000  # records each worker (or the one process) keeps
CAPTURES_KEPT = 100  # captures (log_bodies) each worker keeps, the newest
CAPTURE_MAX_BYTES = 4 * 1024 * 1024  # a larger capture is not kept (the log line has it)
MAX_RING_FILES = 32  # rings in all, at most (the oldest removed first)
GONE_RINGS_KEPT = 2  # rings of workers gone (restarts, reloads) kept, the newest
PRUNE_SECONDS = 60.0  # the rings of workers gone are looked for this often
_FORKS = [0]  # this process's forks so far, as the child sees them (a child opens its own ring)
os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))


class Recorder(Protocol):
    """Keeps the last turns, per-minute counts and captures; reads back everyone's."""

    capacity: int

    def owner(self, api_key: str | None) -> str:
        """Who a request with `api_key` is, as its records and captures name it: a keyed
        hash, never the key itself."""

    def record(self, turn: TurnRecord, capture: bytes | None = None) -> None:
        """Keep `turn` (and its capture, whose key it then carries)."""

    def turns(self) -> list[TurnRecord]:
        """The turns kept, every worker's, in any order."""

    def minutes(self) -> list[MinuteCount]:
        """Turns and failures per minute over the last hour, every worker's."""

    def capture(self, key: str, owner: str) -> bytes | None:
        """A kept capture by its key, if `owner` made it; else None."""


class MinuteTable:
    """Turns and failures of the last CHART_MINUTES minutes, in a fixed table."""

    def __init__(self) -> None:
        self.slots = [MinuteCount(0, 0, 0)] * CHART_MINUTES

    def count(self, now: float, failed: bool) -> None:
        minute = int(now // 60)
        index = minute % CHART_MINUTES
        slot = self.slots[index]
        if slot.minute != minute:
            slot = MinuteCount(minute, 0, 0)
        self.slots[index] = MinuteCount(minute, slot.turns + 1, slot.failures + failed)


class MemoryRecorder:
    """One process's records, in memory (`worker` names its captures' keys)."""

    def __init__(self, capacity: int = RING_TURNS, captures: int = CAPTURES_KEPT,
                 worker: int = 0, secret: bytes | None = None) -> None:
        self.capacity = capacity
        self._turns: deque[TurnRecord] = deque(maxlen=capacity)
        self._minutes = MinuteTable()
        self._captures: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._captures_kept = captures
        self._worker = worker
        self._secret = secret or secrets.token_bytes(32)
        self._seq = 0
        self._lock = native_lock()  # (its sections: dicts and deques, nothing that waits)

    def owner(self, api_key: str | None) -> str:
        return owner_hash(self._secret, api_key)

    def record(self, turn: TurnRecord, capture: bytes | None = None) -> None:
        with self._lock:
            self._seq += 1
            if capture is not None and len(capture) <= CAPTURE_MAX_BYTES:
                turn.capture = f"{self._worker}-{self._seq}"
                self._captures[turn.capture] = (turn.owner, capture)
                while len(self._captures) > self._captures_kept:
                    self._captures.popitem(last=False)
            self._turns.append(turn)
            self._minutes.count(turn.ts, turn.failed)

    def turns(self) -> list[TurnRecord]:
        with self._lock:
            return list(self._turns)

    def minutes(self) -> list[MinuteCount]:
        with self._lock:
            return list(self._minutes.slots)

    def capture(self, key: str, owner: str) -> bytes | None:
        with self._lock:
            kept = self._captures.get(key)
        return kept[1] if kept is not None and kept[0] == owner else None


# -- one ring file per worker ------------------------------------------------------------------
#
# header (64 bytes): magic, slot count, slot size, the next sequence number
# minutes (CHART_MINUTES × 16 bytes): minute, turns, failures
# slots: sequence (0 while being written), payload length, CRC-32 of the payload, payload

_MAGIC = b"TCPSTAT1"
RING_HEADER = struct.Struct("<8sIIQ")
_MINUTE = struct.Struct("<QII")
SLOT_HEAD = struct.Struct("<QII")
_MINUTES_AT = 64
SLOTS_AT = _MINUTES_AT + CHART_MINUTES * _MINUTE.size
SLOT_BYTES = 1024
_PAYLOAD_MAX = SLOT_BYTES - SLOT_HEAD.size
_SUFFIX = ".ring"
_CAPTURE_SUFFIX = ".json"
_SECRET_FILE = "owner.key"
_SECRET_BYTES = 32


class RingFileRecorder:
    """This worker's ring file in `directory` (0600), beside those of the other workers;
    in memory instead when its ring cannot be allocated (a full disk: `warn` says so once)."""

    def __init__(self, directory: str, capacity: int = RING_TURNS,
                 captures: int = CAPTURES_KEPT, worker: Callable[[], int] = os.getpid,
                 warn: Callable[[str], object] = lambda message: None) -> None:
        self.directory = Path(directory)
        self._worker = worker  # this worker's id (its pid): names its ring
        self._warn = warn
        self.capacity = capacity
        self._captures_kept = captures
        self._pid = 0
        self._opened_in = -1  # the fork (`_FORKS`) whose process opened the ring; none yet
        self._map: mmap.mmap | None = None
        self._memory: MemoryRecorder | None = None  # this worker's records when not on disk
        self._secret = b""
        self._kept: deque[Path] = deque()  # this worker's captures, oldest first
        self._seq = 0
        self._decoded: dict[tuple[str, int], tuple[bytes, TurnRecord | None]] = {}
        # The OS threads' own lock: its sections read and write this worker's mapped ring and
        # files on local disk (calls gevent leaves blocking: no greenlet switch comes inside)
        # and may log a line (to stderr), never wait on the hub; two a turn, each some 2,500
        # instructions less than a greenlet's lock.
        self._lock = native_lock()
        self._pruned = 0.0

    def _ring(self) -> mmap.mmap | None:
        """This process's ring, opened (or made) on first use after a fork; None when it
        lives in memory (`_memory`). A fork is seen by the fork count, not by asking the
        process id (a system call, twice a request)."""
        if self._opened_in == _FORKS[0]:
            return self._map
        self._opened_in = _FORKS[0]
        self._pid = self._worker()
        self._map, self._memory, self._seq = None, None, 0
        self._kept.clear()
        try:
            private_folder(self.directory)
            private_folder(self.directory / "captures")
            self._secret = _shared_secret(self.directory / _SECRET_FILE)
            self._prune()
            self._map = self._mapped(self.directory / f"turns-{self._pid}{_SUFFIX}")
        except OSError as exc:
            self._secret = self._secret or secrets.token_bytes(_SECRET_BYTES)
            self._memory = MemoryRecorder(self.capacity, self._captures_kept, self._pid,
                                          self._secret)
            self._warn(f"status records of worker {self._pid} kept in memory: "
                       f"{self.directory}: {exc.strerror or exc}")
            return None
        if self._map[:8] != _MAGIC:
            RING_HEADER.pack_into(self._map, 0, _MAGIC, self.capacity, SLOT_BYTES, 0)
        self._seq = RING_HEADER.unpack_from(self._map, 0)[3]
        return self._map

    def _mapped(self, path: Path) -> mmap.mmap:
        """The ring file at `path`, a regular file of ours, every byte allocated, mapped."""
        size = SLOTS_AT + self.capacity * SLOT_BYTES
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, 0o600)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                raise OSError(errno.EPERM, f"{path.name} is not a file of this user's")
            try:
                if info.st_size != size:
                    os.ftruncate(fd, 0)
                os.posix_fallocate(fd, 0, size)  # (glibc writes zeros where unsupported)
            except OSError:
                os.unlink(path)  # no half-made ring is left for the page to read
                raise
            return mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def _prune(self) -> None:
        """Remove the oldest rings of workers gone, beyond MAX_RING_FILES, and captures of
        workers gone beyond the newest CAPTURES_KEPT (a reload leaves every worker's)."""
        self._pruned = time.monotonic()
        rings = sorted(self.directory.glob("*" + _SUFFIX), key=_mtime)
        for old in rings[:max(0, len(rings) - MAX_RING_FILES + 1)]:
            old.unlink(missing_ok=True)
        mine = f"turns-{self._worker()}{_SUFFIX}"
        gone = [path for path in rings[max(0, len(rings) - MAX_RING_FILES + 1):]
                if path.name != mine and not _alive(_ring_worker(path.name))]
        for old in gone[:max(0, len(gone) - GONE_RINGS_KEPT)]:  # (oldest first)
            old.unlink(missing_ok=True)
        gone = [path for path in (self.directory / "captures").glob("*" + _CAPTURE_SUFFIX)
                if not _alive(path.name.split("-", 1)[0])]
        gone.sort(key=_mtime, reverse=True)
        for old in gone[self._captures_kept:]:
            old.unlink(missing_ok=True)

    def owner(self, api_key: str | None) -> str:
        with self._lock:
            self._ring()
            return owner_hash(self._secret, api_key)

    def record(self, turn: TurnRecord, capture: bytes | None = None) -> None:
        with self._lock:
            ring = self._ring()
            if ring is None and self._memory is not None:
                self._memory.record(turn, capture)
                return
            assert ring is not None
            seq = self._seq = self._seq + 1
            if capture is not None and len(capture) <= CAPTURE_MAX_BYTES:
                turn.capture = f"{self._pid}-{seq}"
                if not self._keep_capture(turn, capture):
                    turn.capture = ""
            payload = turn.encode()
            if len(payload) > _PAYLOAD_MAX:  # only with many long names: keep the facts
                turn.formats, turn.repairs, turn.left = {}, {}, {}
                payload = turn.encode()[:_PAYLOAD_MAX]
            at = SLOTS_AT + (seq % self.capacity) * SLOT_BYTES
            SLOT_HEAD.pack_into(ring, at, 0, 0, 0)
            end = at + SLOT_HEAD.size + len(payload)
            ring[at + SLOT_HEAD.size:end] = payload
            SLOT_HEAD.pack_into(ring, at, seq, len(payload), zlib.crc32(payload))
            RING_HEADER.pack_into(ring, 0, _MAGIC, self.capacity, SLOT_BYTES, seq)
            self._count_minute(ring, turn.ts, turn.failed)

    @staticmethod
    def _count_minute(ring: mmap.mmap, now: float, failed: bool) -> None:
        minute = int(now // 60)
        at = _MINUTES_AT + (minute % CHART_MINUTES) * _MINUTE.size
        stored, turns, failures = _MINUTE.unpack_from(ring, at)
        if stored != minute:
            turns = failures = 0
        _MINUTE.pack_into(ring, at, minute, turns + 1, failures + failed)

    def _capture_path(self, key: str, owner: str) -> Path:
        return self.directory / "captures" / f"{key}.{owner}{_CAPTURE_SUFFIX}"

    def _keep_capture(self, turn: TurnRecord, capture: bytes) -> bool:
        """Write the capture (its owner in its name); False when it could not be kept."""
        path = self._capture_path(turn.capture, turn.owner)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(capture)
        except OSError:  # a full disk: the turn is kept, its capture not
            path.unlink(missing_ok=True)
            return False
        self._kept.append(path)
        while len(self._kept) > self._captures_kept:
            self._kept.popleft().unlink(missing_ok=True)
        return True

    def _files(self) -> Iterator[tuple[str, bytes]]:
        """Every worker's ring (regular files only, never through a link), as bytes."""
        try:
            names = [entry.name for entry in os.scandir(self.directory)
                     if entry.name.endswith(_SUFFIX)]
        except OSError:
            return
        for name in names:
            data = read_private(self.directory / name, SLOTS_AT + RING_TURNS * 4 * SLOT_BYTES)
            if data is not None:
                yield name, data

    def turns(self) -> list[TurnRecord]:
        with self._lock:
            self._ring()
            if time.monotonic() - self._pruned >= PRUNE_SECONDS:
                with contextlib.suppress(OSError):
                    self._prune()  # a worker gone since: its ring is read no more
            memory = self._memory.turns() if self._memory is not None else []
            decoded: dict[tuple[str, int], tuple[bytes, TurnRecord | None]] = {}
            for name, data in self._files():
                for at, head, payload in ring_slots(data):
                    kept = self._decoded.get((name, at))
                    if kept is None or kept[0] != head:  # decoded once, while it stays
                        kept = (head, TurnRecord.decode(payload))
                    decoded[name, at] = kept
            self._decoded = decoded
        return memory + [turn for _, turn in decoded.values() if turn is not None]

    def minutes(self) -> list[MinuteCount]:
        with self._lock:
            self._ring()
            counts = self._memory.minutes() if self._memory is not None else []
        for _, data in self._files():
            if len(data) >= SLOTS_AT and data[:8] == _MAGIC:
                counts.extend(
                    MinuteCount(*_MINUTE.unpack_from(data, _MINUTES_AT + i * _MINUTE.size))
                    for i in range(CHART_MINUTES))
        return counts

    def capture(self, key: str, owner: str) -> bytes | None:
        with self._lock:
            self._ring()
            memory = self._memory
        if memory is not None and (found := memory.capture(key, owner)) is not None:
            return found
        return read_private(self._capture_path(key, owner), CAPTURE_MAX_BYTES)


def ring_slots(data: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """The whole, checked slots of a ring's bytes: (offset, slot head, payload). A ring of
    another layout, or cut short, gives what it wholly holds (or nothing), never an error."""
    if len(data) < SLOTS_AT or data[:8] != _MAGIC:
        return
    _, capacity, slot_bytes, _ = RING_HEADER.unpack_from(data, 0)
    if slot_bytes != SLOT_BYTES:
        return
    end = min(len(data), SLOTS_AT + capacity * SLOT_BYTES)
    for at in range(SLOTS_AT, end - SLOT_BYTES + 1, SLOT_BYTES):
        seq, length, crc = SLOT_HEAD.unpack_from(data, at)
        if seq and length <= _PAYLOAD_MAX:
            payload = data[at + SLOT_HEAD.size:at + SLOT_HEAD.size + length]
            if zlib.crc32(payload) == crc:
                yield at, data[at:at + SLOT_HEAD.size], payload


def private_folder(path: Path) -> None:
    """Make `path` (0700) if missing; raise unless it is a directory of this user's that no
    one else may write to (what is read from it is then this user's)."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise OSError(errno.EPERM, f"{path} is not a private folder of this user's")


def read_private(path: Path, limit: int) -> bytes | None:
    """At most `limit` bytes of `path` if it is a regular file of this user's (opened without
    following a link or waiting on a FIFO), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        chunks, left = [], min(limit, info.st_size)
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _shared_secret(path: Path) -> bytes:
    """The run directory's secret for owners' keyed hashes, the same in every worker: read,
    or made by whichever worker comes first (published whole, by a link)."""
    found = read_private(path, _SECRET_BYTES)
    if found is not None and len(found) == _SECRET_BYTES:
        return found
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        os.write(fd, secrets.token_bytes(_SECRET_BYTES))
    finally:
        os.close(fd)
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink(missing_ok=True)
    found = read_private(path, _SECRET_BYTES)
    if found is None or len(found) != _SECRET_BYTES:
        raise OSError(errno.EIO, f"{path} holds no secret")
    return found


def _alive(worker: str) -> bool:
    """Whether the process `worker` (a pid, as text) still runs."""
    try:
        os.kill(int(worker), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


def _ring_worker(name: str) -> str:
    """The worker (pid) a ring file's name `turns-{pid}.ring` names."""
    return name.removeprefix("turns-").removesuffix(_SUFFIX)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def make_recorder(environ: dict[str, str] | os._Environ[str] = os.environ,
                  warn: Callable[[str], object] = lambda message: None) -> Recorder:
    """The recorder for this server: ring files in the workers' shared run directory when
    gunicorn set one up (PROMETHEUS_MULTIPROC_DIR), else memory."""
    shared = environ.get("PROMETHEUS_MULTIPROC_DIR")
    if shared:
        return RingFileRecorder(os.path.join(shared, "status"), warn=warn)
    return MemoryRecorder()
