"""Server-sent events as bytes: writing one, and cutting a relayed byte stream at event
boundaries. Wire-neutral: each front builds its own events with these."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson


def event(payload: Any) -> bytes:
    """One SSE `data:` event."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def named_event(name: str, payload: Any) -> bytes:
    """One SSE event with an `event:` line (Anthropic's wire names every event)."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


_EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")


class SseEvents:
    """Relayed SSE bytes cut at event boundaries: a piece ending mid-event keeps its tail
    until the event is whole, so that a stream that breaks off never hands the client half
    an event (which it would fail to parse) before the proxy's error event."""

    MAX_PENDING = 1 << 20  # an event longer than this is passed on in pieces regardless

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._seam = b""  # the last bytes held, where a boundary may begin

    @property
    def pending(self) -> bytes:
        """The bytes held: the start of an event not yet whole."""
        return b"".join(self._parts)

    def complete(self, data: bytes) -> bytes:
        """The whole events `data` completes; the rest is held (each byte is searched once
        for a boundary, whatever the length of the event)."""
        if not data:
            return b""
        if not self._parts and data.endswith(b"\n\n"):  # the usual piece: whole events
            self._seam = data[-3:]
            return data
        seam = self._seam
        probe = seam + data
        self._seam = probe[-3:]
        end = max((at + len(blank) for blank in _EVENT_ENDS
                   if (at := probe.rfind(blank)) >= 0), default=0) - len(seam)
        if end <= 0 and self._size + len(data) <= self.MAX_PENDING:
            self._parts.append(data)
            self._size += len(data)
            return b""
        if end <= 0:
            end = len(data)
        out = b"".join([*self._parts, data[:end]])
        self._parts = [data[end:]] if end < len(data) else []
        self._size = len(data) - end
        self._seam = data[end:][-3:] if end < len(data) else probe[-3:]
        return out


class SseEventTooLarge(ValueError):
    """An incoming event grew past the decoder's limit before it ended."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an event is larger than {limit} bytes")
        self.limit = limit


class SseDecoder:
    """Incoming SSE bytes → the `data` of each whole event, as events complete (an upstream's
    stream read by the proxy). Comments, `event:`/`id:`/`retry:` lines and events without
    data are skipped; several `data:` lines of one event are joined by newlines (the spec).

    Linear in the bytes fed, however they are cut: an event not yet whole is held as its
    pieces (joined once, when it ends), and each new piece is searched for the event's end
    with only the held tail that may begin one. `max_event` (0: none) refuses an event that
    grows past it as soon as it does (SseEventTooLarge), before the rest is read."""

    def __init__(self, max_event: int = 0) -> None:
        self._parts: list[bytes] = []  # the event not yet whole, in pieces
        self._size = 0
        self._tail = b""  # its last bytes, where an event's end may begin
        self._max_event = max_event

    @property
    def pending(self) -> bytes:
        """The bytes of an event not yet whole (at the stream's end: an event cut off)."""
        return b"".join(self._parts)

    def feed(self, data: bytes) -> list[bytes]:
        """The data of every event `data` completes, in order."""
        if not data:
            return []
        if (not self._parts and data.startswith(b"data: ")
                and data.find(b"\n") == len(data) - 2 and data.endswith(b"\n\n")
                and b"\r" not in data):
            return [data[6:-2]]  # the usual piece: one whole event of one data line
        out: list[bytes] = []
        if self._parts:
            seam = len(self._tail)
            end = next(_event_ends(self._tail + data), None)
            if end is None:
                self._hold(data)
                return out
            at, size = end[0] - seam, end[1]
            held = b"".join(self._parts)  # the event's pieces, joined once
            # The end may begin in the held tail: the event then stops before it.
            payload = _event_data(held[:at] if at < 0 else held + data[:at])
            if payload is not None:
                out.append(payload)
            self._parts, self._size, self._tail = [], 0, b""
            data = data[at + size:]
        start = 0
        for at, size in _event_ends(data):
            payload = _event_data(data[start:at])
            if payload is not None:
                out.append(payload)
            start = at + size
        if start < len(data):
            self._hold(data[start:])
        return out

    def _hold(self, piece: bytes) -> None:
        """Keep `piece` of the event not yet whole (refused past `max_event`)."""
        self._parts.append(piece)
        self._size += len(piece)
        if self._max_event and self._size > self._max_event:
            raise SseEventTooLarge(self._max_event)
        self._tail = (self._tail + piece)[-3:]


def _event_ends(buffer: bytes) -> Iterator[tuple[int, int]]:
    """Where each event in `buffer` ends, in order (the blank line's position, its length).
    Each kind of blank line is searched for forward only: linear in the buffer."""
    if b"\r" not in buffer:  # the usual stream: lines end in \n only
        at = buffer.find(b"\n\n")
        while at >= 0:
            yield at, 2
            at = buffer.find(b"\n\n", at + 2)
        return
    found = {blank: buffer.find(blank) for blank in _EVENT_ENDS}
    while True:
        ends = [(at, len(blank)) for blank, at in found.items() if at >= 0]
        if not ends:
            return
        at, size = min(ends)
        yield at, size
        start = at + size
        for blank, next_at in found.items():
            if 0 <= next_at < start:
                found[blank] = buffer.find(blank, start)


def _event_data(event: bytes) -> bytes | None:
    """The data of one event's lines, or None when it has none."""
    if event.startswith(b"data: ") and b"\n" not in event and b"\r" not in event:
        return event[6:]  # the usual event: one data line
    data = [line[5:].removeprefix(b" ") for line in event.splitlines()
            if line.startswith(b"data:")]
    return b"\n".join(data) if data else None
