"""Fronts: the agent APIs the proxy speaks, each translated to one chat completion turn.

A front is one module (or package) with two pure halves: `parse` (the client's request, an
`Incoming`, → a chat plan) and the rendering of the turn's typed result (`TurnResult`) in
the client's wire format (`render_json`, a `StreamWriter`, `error_response`). It declares the
paths it serves (`Route`s: its turns, and endpoints such as a token count or `GET`/`DELETE` by
id) and the headers that carry a key for it; the shell routes through `registry` alone. Every front
runs on the same turn (`proxy.turn`), and the shell (`proxy.shell`) carries out its
waiting: heartbeats, the commit window, errors inside a stream that has started and clients
that leave are the turn's, never a front's. A front only says how each of them looks on its
wire.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, overload

from ..base.config import Config
from ..base.errors import ProxyError
from ..base.frozen import quick_init
from ..turn.plan import FrontData, PassthroughPlan, TurnPlan
from ..turn.result import TurnResult


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

    def answer(self, result: TurnResult) -> bytes:
        """The rest of the turn, through the stream's end: whatever of the turn's result
        `reasoning` and `text` did not already send. (The streamed mode's hold-back rule
        makes each choice's finished content and reasoning begin with exactly what was sent
        live: the rest is what follows it.)"""
        ...

    def error(self, error: ProxyError) -> bytes:
        """An error inside the started stream, and the stream's end."""
        ...


def unsent(text: str, sent: str) -> str:
    """What of a finished `text` is still to send once `sent` went out live: the streamed
    mode's rule, for every front's writer. The hold-back rule makes the finished text begin
    with exactly what was sent, so the rest is what follows it; a finish that does not (a
    broken promise, which the streamed-equals-buffered property tests catch) adds nothing,
    as text a client has shown cannot be taken back."""
    return text[len(sent):] if text.startswith(sent) else ""


@dataclass(frozen=True)
class ErrorResponse:
    """An error as a front answers it before any stream has started."""

    status: int
    body: bytes
    headers: Mapping[str, str]


class HeaderLookup(Protocol):
    """A request's headers, read by name: the server's (werkzeug's `Headers`, whose names
    match whatever their case), or a dict in tests and for `replay`."""

    @overload
    def get(self, key: str, /) -> str | None: ...

    @overload
    def get(self, key: str, default: str, /) -> str: ...

    def __contains__(self, key: str, /) -> bool: ...


Recall = Callable[[str], list[dict[str, Any]] | None]
"""The conversation items a kept answer continues (its own and those of every answer it
continued from, oldest first), by the answer's id; None when it is not kept (never was,
deleted, or expired)."""


def recall_nothing(_response_id: str) -> list[dict[str, Any]] | None:
    """The recall of a request without a store: no answer is kept."""
    return None


@quick_init
@dataclass(frozen=True)
class Incoming:
    """A request as a front sees it: method, path (without the query), query string,
    headers and body, the ids its route's pattern matched (`params`), and the store's
    `recall` for the answers this request may continue (`previous_response_id`)."""

    method: str
    path: str
    body: bytes
    query: str = ""
    headers: HeaderLookup = field(default_factory=dict[str, str])
    params: Mapping[str, str] = field(default_factory=dict)
    recall: Recall = recall_nothing

    @classmethod
    def post(cls, path: str, body: bytes, recall: Recall = recall_nothing) -> Incoming:
        """A POST of `body` to `path` (what a turn is), e.g. for `replay` and `doctor`."""
        return cls("POST", path, body, recall=recall)


# What the shell does with a request a route matched.
TURN = "turn"  # a turn: the front's `parse`, the core, the front's rendering
COUNT = "count"  # a token count (`Front.counter`)
STORED_GET = "stored_get"  # an answer the store keeps, by `params["id"]` (`Front.storing`)
STORED_DELETE = "stored_delete"  # its deletion
CATALOG = "catalog"  # an answer made of the upstream's models (`Route.serve(incoming, models)`)
EXCHANGE = "exchange"  # one upstream call or none, both ways translated (`Route.serve`)


def _always(_config: Config) -> bool:
    return True


@dataclass(frozen=True)
class ModelCard:
    """A model the upstream serves, as the shell learned it without a generation (its model
    list): the id it is asked by, its context length in tokens (None: not said), when it
    was made (Unix seconds, None: not said), who owns it, and whether it is known to reason
    (its settings say its template opens thinking, or it was seen closing such a block)."""

    id: str
    context_length: int | None = None
    created: int | None = None
    owned_by: str | None = None
    reasons: bool = False


@dataclass(frozen=True)
class Reply:
    """An answer a front makes itself, without a turn (a model list, a version, an
    embedding translated back): status, body and content type."""

    status: int
    body: bytes
    content_type: str = "application/json"


@dataclass(frozen=True)
class Ask:
    """The one upstream call of an `EXCHANGE` route: method, path, body (None: none) and the
    model it is for (which upstream); `then` makes the front's answer of the upstream's
    (its status and body; a ProxyError for an answer the front cannot use)."""

    method: str
    path: str
    body: bytes | None
    model: str
    then: Callable[[int, bytes], Reply]


@dataclass(frozen=True)
class Route:
    """A path a front serves: `method`, `pattern` (`{name}` matches one path segment, a
    trailing slash is the same path), what the shell does with it (`action`), and `when`
    the settings let the front serve it (else the request is relayed upstream). `serve` is
    the front's pure half of a `CATALOG` route (`(Incoming, tuple[ModelCard, ...]) → Reply`)
    or of an `EXCHANGE` route (`(Incoming, Config) → Ask | Reply`)."""

    method: str
    pattern: str
    action: str = TURN
    when: Callable[[Config], bool] = _always
    serve: Callable[..., Any] | None = field(default=None, compare=False)
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _compiled(self.pattern))

    def match(self, method: str, path: str) -> dict[str, str] | None:
        """The ids the path holds when this route serves it, else None."""
        if method != self.method:
            return None
        found = self.regex.fullmatch(path)
        return None if found is None else found.groupdict()


def _compiled(pattern: str) -> re.Pattern[str]:
    """`pattern` as a regular expression: `{name}` one non-empty segment, slashes after."""
    parts = re.split(r"\{(\w+)\}", pattern)
    regex = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)"
                    for i, part in enumerate(parts))
    return re.compile(regex + "/*")


@dataclass(frozen=True)
class StoredResponse:
    """One answer as the shell's store keeps it: what a later request that continues it needs
    (`items`: this turn's input then its output, in the front's own item shapes; `previous`:
    the answer this one continued, its `previous_response_id`), and what `GET` by id answers
    (`body`)."""

    id: str
    previous: str | None
    items: list[dict[str, Any]]
    body: bytes


@dataclass(frozen=True)
class Storing(Generic[FrontData]):
    """The hooks of a front whose API stores answers on the server (the Responses API's
    `store`, `previous_response_id`, `GET` and `DELETE` by id). Pure: the store itself is
    the shell's (`proxy.shell.store`), its recall handed to `parse` in the `Incoming`.

    `keep` says what a delivered answer leaves in the store (None: nothing, `store: false`);
    `deleted` is the body of a successful `DELETE` by id and `missing` the error for an id
    the store does not hold; `keeping` says how many bytes of items a turn will keep before
    its answer is known (None: it keeps nothing), so that the shell can refuse a turn the
    store has no room for before upstream is called."""

    keep: Callable[[TurnPlan[FrontData], TurnResult], StoredResponse | None]
    deleted: Callable[[str], bytes]
    missing: Callable[[str], ProxyError]
    keeping: Callable[[TurnPlan[FrontData]], int | None] = lambda plan: None


@dataclass(frozen=True)
class CountRequest:
    """A token count request, ready for the upstream's tokenizer."""

    model: str
    config: Config
    tokenize: bytes  # the body for vLLM's /tokenize
    estimate: int  # the count when no tokenizer answers


@dataclass(frozen=True)
class Counter:
    """The hooks of a front that counts a prompt's tokens (Messages' `count_tokens`):
    `request` translates it, `count_of` reads the tokenizer's answer (status, body; None
    when it holds no count), `response` is the body of the answer."""

    request: Callable[[Incoming, Config], CountRequest]
    count_of: Callable[[int, bytes], int | None]
    response: Callable[[int], bytes]


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
class Front(Generic[FrontData]):
    """One agent API: its name (for logs and metrics), the paths it serves (`routes`), its
    two pure halves (`parse` may answer a request without a turn: itself, a `Reply`, as
    Ollama's chat without messages, which only loads the model; or by one upstream call, an
    `Ask`, as Ollama's generate without the template), and where its turns go upstream
    (None: the client's own path and query, as the chat front relays them). `key_headers`:
    the headers its clients carry the proxy's key in (`Authorization` as Bearer or Basic, or
    the key itself). `storing`: the hooks of an API that stores answers on the server (None:
    a stateless API such as chat); `counter`: those of a token count; `sample`: the front's
    tool turn for `doctor`. `FrontData`: what its plans carry for its own renderers
    (`TurnPlan.front_data`)."""

    name: str
    routes: tuple[Route, ...]
    parse: Callable[[Incoming, Config], TurnPlan[FrontData] | PassthroughPlan | Reply | Ask]
    render_json: Callable[[TurnPlan[FrontData], TurnResult], bytes]
    stream_writer: Callable[[TurnPlan[FrontData]], StreamWriter]
    error_response: Callable[[ProxyError], ErrorResponse]
    key_headers: tuple[str, ...] = ("Authorization",)
    upstream_path: str | None = "/v1/chat/completions"
    storing: Storing[FrontData] | None = None
    counter: Counter | None = None
    sample: Sample | None = None

    @property
    def path(self) -> str:
        """The path its turns are posted to (its first turn route's)."""
        return next(route.pattern for route in self.routes if route.action == TURN)
