"""Server-sent events as bytes: writing one, and cutting a relayed byte stream at event
boundaries. Wire-neutral: each front builds its own events with these."""

from __future__ import annotations

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


class SseDecoder:
    """Incoming SSE bytes → the `data` of each whole event, as events complete (an upstream's
    stream read by the proxy). Comments, `event:`/`id:`/`retry:` lines and events without
    data are skipped; several `data:` lines of one event are joined by newlines (the spec)."""

    def __init__(self) -> None:
        self._buffer = b""

    @property
    def pending(self) -> bytes:
        """The bytes of an event not yet whole (at the stream's end: an event cut off)."""
        return self._buffer

    def feed(self, data: bytes) -> list[bytes]:
        """The data of every event `data` completes, in order."""
        buffer = self._buffer + data if self._buffer else data
        out: list[bytes] = []
        start = 0
        while True:
            end, size = _event_end(buffer, start)
            if end < 0:
                break
            payload = _event_data(buffer[start:end])
            if payload is not None:
                out.append(payload)
            start = end + size
        self._buffer = buffer[start:]
        return out


def _event_end(buffer: bytes, start: int) -> tuple[int, int]:
    """Where the first event from `start` ends (the blank line's position, its length)."""
    found = buffer.find(b"\n\n", start)
    if b"\r" not in buffer:  # the usual stream: lines end in \n only
        return found, 2
    ends = [(at, len(blank)) for blank in _EVENT_ENDS
            if (at := buffer.find(blank, start)) >= 0]
    return min(ends) if ends else (-1, 0)


def _event_data(event: bytes) -> bytes | None:
    """The data of one event's lines, or None when it has none."""
    if event.startswith(b"data: ") and b"\n" not in event and b"\r" not in event:
        return event[6:]  # the usual event: one data line
    data = [line[5:].removeprefix(b" ") for line in event.splitlines()
            if line.startswith(b"data:")]
    return b"\n".join(data) if data else None
