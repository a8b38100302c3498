"""The ways through the proxy the score asks a turn: each front's client's request for a
suite turn (None where its API cannot say the turn) and how that client reads the answer.
Chat's is the suite's own request; the other fronts' are the same turn in their wire shapes
(`--fronts`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .reading import Reading, read_completion, read_stream
from .suite import SuiteTurn


@dataclass(frozen=True)
class FrontWay:
    """A front as the score drives it: its name, the path its turns are posted to, the
    client's request for a turn, and the client's reading of the answer (status, body,
    streamed, cost → Reading)."""

    name: str
    path: str
    request: Callable[[SuiteTurn, str, int, bool], dict[str, Any] | None]
    read: Callable[..., Reading]


def _chat_read(status: int, body: bytes, stream: bool, **cost: Any) -> Reading:
    return (read_stream if stream and status < 400 else read_completion)(status, body, **cost)


CHAT = FrontWay("chat", "/v1/chat/completions",
                lambda turn, model, max_tokens, stream: turn.request(model, max_tokens, stream),
                _chat_read)
WAYS: dict[str, FrontWay] = {way.name: way for way in (CHAT,)}
