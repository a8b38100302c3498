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


Recall = Callable[[str], list[dict[str, Any]] | None]
"""The conversation items a kept answer continues (its own and those of every answer it
continued from, oldest first), by the answer's id; None when it is not kept (never was,
deleted, or expired)."""


@dataclass(frozen=True)
class Kept:
    """One answer as the shell's store keeps it: what a later request that continues it needs
    (`items`: this turn's input then its output, in the front's own item shapes; `previous`:
    the answer this one continued), and what `GET` by id answers (`body`)."""

    id: str
    previous: str | None
    items: list[dict[str, Any]]
    body: bytes


@dataclass(frozen=True)
class Keeper:
    """A front whose API keeps answers on the server (the Responses API's `store`,
    `previous_response_id`, `GET` and `DELETE` by id). Pure hooks: the store itself (SQLite)
    is the shell's (`proxy.shell.store`).

    `parse` replaces `Front.parse`, with the store's `Recall` to continue a kept answer;
    `keep` says what a delivered answer leaves in the store (None: nothing, `store: false`);
    `active` says whether the settings let the front keep anything (else the requests under
    `path` are relayed); `deleted` is the body of a successful `DELETE {path}/{id}` and
    `missing` the error for an id the store does not hold; `keeping` says how many bytes of
    items a turn will keep before its answer is known (None: it keeps nothing), so that the
    shell can refuse a turn the store has no room for before upstream is called."""

    path: str
    parse: Callable[[bytes, Config, Recall], TurnPlan | PassthroughPlan]
    keep: Callable[[TurnPlan, dict[str, Any]], Kept | None]
    active: Callable[[Config], bool]
    deleted: Callable[[str], bytes]
    missing: Callable[[str], ProxyError]
    keeping: Callable[[TurnPlan], int | None] = lambda plan: None


@dataclass(frozen=True)
class Sample:
    """A tool turn as the front's clients send it, for `doctor`'s probe of each front.

    `request(model, tool, prompt, max_tokens)` is the body of such a turn (`tool`: a chat
    function's `name`, `description` and `parameters`, offered with the choice left to the
    model), and `calls(answer)` the calls (`name`, `arguments` as JSON text) in the front's
    decoded answer to it."""

    request: Callable[[str, dict[str, Any], str, int], dict[str, Any]]
    calls: Callable[[Any], list[dict[str, str]]]


@dataclass(frozen=True)
class Front:
    """One agent API: its name (for logs and metrics), its two pure halves, and where its
    turns go upstream (None: the client's own path and query, as the chat front relays
    them). `keeper`: the hooks of an API that keeps answers on the server (None, the
    default: a stateless API such as chat). `sample`: the front's tool turn for `doctor`."""

    name: str
    parse: Callable[[bytes, Config], TurnPlan | PassthroughPlan]
    render_json: Callable[[TurnPlan, dict[str, Any]], bytes]
    stream_writer: Callable[[TurnPlan], StreamWriter]
    error_response: Callable[[ProxyError], ErrorResponse]
    upstream_path: str | None = "/v1/chat/completions"
    keeper: Keeper | None = None
    sample: Sample | None = None
