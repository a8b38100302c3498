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
