"""Where the status page's records are kept: bounded rings, so memory and disk stay flat.

One process keeps them in memory (`MemoryRecorder`). Under gunicorn every worker appends to a
ring file of its own in the server's shared run directory (`RingFileRecorder`), and the
status page reads every worker's file: the numbers are the whole server's. A store shared by
several instances (Redis) would be one more class with the same four methods.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ...telemetry.status import CHART_MINUTES, MinuteCount, TurnRecord

RING_TURNS = 2000  # records each worker (or the one process) keeps
CAPTURES_KEPT = 100  # captures (log_bodies) each worker keeps, the newest
CAPTURE_MAX_BYTES = 4 * 1024 * 1024  # a larger capture is not kept (the log line has it)
MAX_RING_FILES = 32  # rings of workers gone (restarts) beyond this are removed, oldest first


class Recorder(Protocol):
    """Keeps the last turns, per-minute counts and captures; reads back everyone's."""

    capacity: int

    def record(self, turn: TurnRecord, capture: bytes | None = None) -> None:
        """Keep `turn` (and its capture, whose key it then carries)."""

    def turns(self) -> list[TurnRecord]:
        """The turns kept, every worker's, in any order."""

    def minutes(self) -> list[MinuteCount]:
        """Turns and failures per minute over the last hour, every worker's."""

    def capture(self, key: str) -> bytes | None:
        """A kept capture by its key, or None."""


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
    """One process's records, in memory."""

    def __init__(self, capacity: int = RING_TURNS, captures: int = CAPTURES_KEPT) -> None:
        self.capacity = capacity
        self._turns: deque[TurnRecord] = deque(maxlen=capacity)
        self._minutes = MinuteTable()
        self._captures: OrderedDict[str, bytes] = OrderedDict()
        self._captures_kept = captures
        self._seq = 0
        self._lock = threading.Lock()

    def record(self, turn: TurnRecord, capture: bytes | None = None) -> None:
        with self._lock:
            self._seq += 1
            if capture is not None and len(capture) <= CAPTURE_MAX_BYTES:
                turn.capture = f"0-{self._seq}"
                self._captures[turn.capture] = capture
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

    def capture(self, key: str) -> bytes | None:
        with self._lock:
            return self._captures.get(key)


# -- one ring file per worker ------------------------------------------------------------------
#
# header (64 bytes): magic, slot count, slot size, the next sequence number
# minutes (CHART_MINUTES × 16 bytes): minute, turns, failures
# slots: sequence (0 while being written), payload length, CRC-32 of the payload, payload

_MAGIC = b"TCPSTAT1"
_HEADER = struct.Struct("<8sIIQ")
_MINUTE = struct.Struct("<QII")
_SLOT_HEAD = struct.Struct("<QII")
_MINUTES_AT = 64
_SLOTS_AT = _MINUTES_AT + CHART_MINUTES * _MINUTE.size
SLOT_BYTES = 1024
_PAYLOAD_MAX = SLOT_BYTES - _SLOT_HEAD.size
_SUFFIX = ".ring"


class RingFileRecorder:
    """This worker's ring file in `directory` (0600), beside those of the other workers."""

    def __init__(self, directory: str, capacity: int = RING_TURNS,
                 captures: int = CAPTURES_KEPT, worker: Callable[[], int] = os.getpid) -> None:
        self.directory = Path(directory)
        self._worker = worker  # this worker's id (its pid): names its ring
        self.capacity = capacity
        self._captures_kept = captures
        self._pid = 0
        self._map: mmap.mmap | None = None
        self._seq = 0
        self._lock = threading.Lock()

    def _ring(self) -> mmap.mmap:
        """This process's ring, opened (or made) on first use after a fork."""
        if self._map is not None and self._pid == self._worker():
            return self._map
        self._pid = self._worker()
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.directory / "captures").mkdir(mode=0o700, exist_ok=True)
        self._prune()
        path = self.directory / f"turns-{self._pid}{_SUFFIX}"
        size = _SLOTS_AT + self.capacity * SLOT_BYTES
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fresh = os.fstat(fd).st_size != size
            if fresh:
                os.ftruncate(fd, 0)
                os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        if fresh or self._map[:8] != _MAGIC:
            _HEADER.pack_into(self._map, 0, _MAGIC, self.capacity, SLOT_BYTES, 0)
        self._seq = _HEADER.unpack_from(self._map, 0)[3]
        return self._map

    def _prune(self) -> None:
        """Remove the oldest rings of workers gone, beyond MAX_RING_FILES."""
        rings = sorted(self.directory.glob("*" + _SUFFIX), key=_mtime)
        for old in rings[:max(0, len(rings) - MAX_RING_FILES + 1)]:
            old.unlink(missing_ok=True)

    def record(self, turn: TurnRecord, capture: bytes | None = None) -> None:
        with self._lock:
            ring = self._ring()
            seq = self._seq = self._seq + 1
            if capture is not None and len(capture) <= CAPTURE_MAX_BYTES:
                turn.capture = f"{self._pid}-{seq}"
                self._keep_capture(turn.capture, capture, seq)
            payload = turn.encode()
            if len(payload) > _PAYLOAD_MAX:  # only with many long names: keep the facts
                turn.formats, turn.repairs, turn.left = {}, {}, {}
                payload = turn.encode()[:_PAYLOAD_MAX]
            at = _SLOTS_AT + (seq % self.capacity) * SLOT_BYTES
            _SLOT_HEAD.pack_into(ring, at, 0, 0, 0)
            end = at + _SLOT_HEAD.size + len(payload)
            ring[at + _SLOT_HEAD.size:end] = payload
            _SLOT_HEAD.pack_into(ring, at, seq, len(payload), zlib.crc32(payload))
            _HEADER.pack_into(ring, 0, _MAGIC, self.capacity, SLOT_BYTES, seq)
            self._count_minute(ring, turn.ts, turn.failed)

    @staticmethod
    def _count_minute(ring: mmap.mmap, now: float, failed: bool) -> None:
        minute = int(now // 60)
        at = _MINUTES_AT + (minute % CHART_MINUTES) * _MINUTE.size
        stored, turns, failures = _MINUTE.unpack_from(ring, at)
        if stored != minute:
            turns = failures = 0
        _MINUTE.pack_into(ring, at, minute, turns + 1, failures + failed)

    def _keep_capture(self, key: str, capture: bytes, seq: int) -> None:
        folder = self.directory / "captures"
        fd = os.open(folder / f"{key}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(capture)
        (folder / f"{self._pid}-{seq - self._captures_kept}.json").unlink(missing_ok=True)

    def _files(self) -> list[bytes]:
        """Every worker's ring, as bytes read now."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.glob("*" + _SUFFIX):
            try:
                found.append(path.read_bytes())
            except OSError:  # a ring pruned meanwhile
                continue
        return found

    def turns(self) -> list[TurnRecord]:
        turns = []
        for data in self._files():
            if data[:8] != _MAGIC:
                continue
            _, capacity, slot_bytes, _ = _HEADER.unpack_from(data, 0)
            for at in range(_SLOTS_AT, min(len(data), _SLOTS_AT + capacity * slot_bytes),
                            slot_bytes):
                seq, length, crc = _SLOT_HEAD.unpack_from(data, at)
                payload = data[at + _SLOT_HEAD.size:at + _SLOT_HEAD.size + length]
                if seq and zlib.crc32(payload) == crc:
                    turn = TurnRecord.decode(payload)
                    if turn is not None:
                        turns.append(turn)
        return turns

    def minutes(self) -> list[MinuteCount]:
        counts = []
        for data in self._files():
            if data[:8] == _MAGIC:
                counts.extend(
                    MinuteCount(*_MINUTE.unpack_from(data, _MINUTES_AT + i * _MINUTE.size))
                    for i in range(CHART_MINUTES))
        return counts

    def capture(self, key: str) -> bytes | None:
        try:
            return (self.directory / "captures" / f"{key}.json").read_bytes()
        except OSError:
            return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def make_recorder(environ: dict[str, str] | os._Environ[str] = os.environ) -> Recorder:
    """The recorder for this server: ring files in the workers' shared run directory when
    gunicorn set one up (PROMETHEUS_MULTIPROC_DIR), else memory."""
    shared = environ.get("PROMETHEUS_MULTIPROC_DIR")
    if shared:
        return RingFileRecorder(os.path.join(shared, "status"))
    return MemoryRecorder()
