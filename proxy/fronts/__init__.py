"""Fronts: the agent APIs the proxy speaks, each translated to one chat completion turn.

A front is one module with two pure halves: `parse` (the client's request → a chat plan) and
the rendering of the turn's result in the client's wire format (`render_json`, a
`StreamWriter`, `error_response`). Every front runs on the same turn (`proxy.turn`), and the
shell (`proxy.shell`) carries out its waiting: heartbeats, the commit window, errors inside a
stream that has started and clients that leave are the turn's, never a front's. A front only
says how each of them looks on its wire.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import Config
from ..errors import ProxyError
from ..turn.plan import PassthroughPlan, TurnPlan


class StreamWriter(Protocol):
    """One response stream in a front's wire format: a state machine that turns what the
    turn says into bytes (it writes nothing itself)."""

    content_type: str

    def head(self) -> bytes:
        """The stream's first bytes, sent when it commits (before upstream has answered)."""
        ...

    def heartbeat(self) -> bytes:
        """A frame that keeps the client's idle watchdog calm and adds nothing to the answer."""
        ...

    def reasoning(self, text: str, choice: int = 0) -> bytes:
        """Reasoning text as it comes (the streamed mode)."""
        ...

    def text(self, text: str, choice: int = 0) -> bytes:
        """Visible text as it comes (the streamed mode)."""
        ...

    def answer(self, completion: dict[str, Any]) -> bytes:
        """The rest of the turn, through the stream's end: whatever of the finished
        (normalised) completion `reasoning` and `text` did not already send. (The streamed
        mode's hold-back rule makes each choice's finished content and reasoning begin
        with exactly what was sent live: the rest is what follows it.)"""
        ...

    def error(self, error: ProxyError) -> bytes:
        """An error inside the started stream, and the stream's end."""
        ...


@dataclass(frozen=True)
class ErrorResponse:
    """An error as a front answers it before any stream has started."""

    status: int
    body: bytes
    headers: Mapping[str, str]


@dataclass(frozen=True)
class Front:
    """One agent API: its name (for logs and metrics), its two pure halves, and where its
    turns go upstream (None: the client's own path and query, as the chat front relays
    them)."""

    name: str
    parse: Callable[[bytes, Config], TurnPlan | PassthroughPlan]
    render_json: Callable[[TurnPlan, dict[str, Any]], bytes]
    stream_writer: Callable[[TurnPlan], StreamWriter]
    error_response: Callable[[ProxyError], ErrorResponse]
    upstream_path: str | None = "/v1/chat/completions"
