"""Spans of the text that frames have taken, and the outermost of frames that overlap."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Protocol, TypeVar


class Spanned(Protocol):
    """What stands somewhere in the text: a frame."""

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


S = TypeVar("S", bound=Spanned)


class Spans:
    """Disjoint spans of the text, sorted: those frames have taken, so formats never overlap."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def overlaps(self, start: int, end: int) -> bool:
        """Whether [start, end) (at least one character) meets any span."""
        i = bisect_right(self.starts, start)
        if i > 0 and self.ends[i - 1] > start:
            return True
        return i < len(self.starts) and self.starts[i] < max(end, start + 1)

    def end_of(self, pos: int) -> int | None:
        """The end of the span holding `pos`, or None."""
        i = bisect_right(self.starts, pos)
        return self.ends[i - 1] if i > 0 and self.ends[i - 1] > pos else None

    def encloses(self, start: int, end: int) -> bool:
        """Whether every span meeting [start, end) lies inside it, and it is wider than each
        (a frame that holds others in its payload)."""
        i = bisect_right(self.starts, start - 1)
        if i > 0 and self.ends[i - 1] > start:
            return False  # one starts before it and reaches into it
        j = bisect_right(self.starts, end - 1)
        return all(self.ends[k] <= end and (self.starts[k], self.ends[k]) != (start, end)
                   for k in range(i, j))

    def remove_inside(self, start: int, end: int) -> list[tuple[int, int]]:
        """Remove the spans inside [start, end), and return them."""
        i = bisect_right(self.starts, start - 1)
        j = i
        while j < len(self.starts) and self.ends[j] <= end:
            j += 1
        removed = list(zip(self.starts[i:j], self.ends[i:j], strict=True))
        del self.starts[i:j], self.ends[i:j]
        return removed

    def add(self, start: int, end: int) -> None:
        """Add a span that overlaps none already held."""
        i = bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)

    def add_all(self, spans: list[tuple[int, int]]) -> None:
        """Add spans that overlap none already held (nor each other)."""
        for start, end in spans:
            self.add(start, end)


def outermost(*finds: Iterator[S]) -> Iterator[S]:
    """The frames of a format's several spellings, in order, without those that stand inside
    another one's frame: they are text of its payload (a value that quotes a call)."""
    frames = sorted((frame for find in finds for frame in find),
                    key=lambda frame: (frame.start, -frame.end))
    reach = -1
    for frame in frames:
        if frame.end > reach:
            yield frame
            reach = frame.end
