"""What the upstreams serve, learned without a generation: each upstream's model list
(`model_entries`, merged: `/v1/models` across several upstreams), and the models as cards
with their context length (`model_cards`), the one place a front's model endpoints (Ollama's
`/api/tags`, `/api/show`) and a client's own idea of the window (`ContextLengths`) learn it
from. The upstream's profile (server kind, template, constraint dialect) is to replace the
cards with what it learns."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ...base.config import Config, mask_url, upstream_groups
from ...base.errors import ProxyError, from_upstream
from ...fronts import ModelCard
from ...telemetry.request_log import RequestLog
from ...turn.core import UpstreamReply
from ...turn.plan import TurnPlan
from .client import Timeouts, Upstream
from .replicas import Replicas

MODELS_PATH = "/v1/models"
HeadersFor = Callable[[Config], dict[str, str]]  # the headers an upstream is asked with


def model_ids(reply: UpstreamReply) -> list[Any] | None:
    """The model ids of a `/v1/models` answer, or None when it is not a model list."""
    if reply.status != 200:
        return None
    try:
        data = orjson.loads(reply.body).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [model.get("id") for model in data if isinstance(model, dict)]


def model_entries(upstreams: Mapping[str, Upstream], replicas: Replicas, config: Config,
                  log: RequestLog, target: str, headers_for: HeadersFor,
                  ) -> list[dict[str, Any]]:
    """The entries of every upstream's model list (`target`: its path, `/v1/models`), each
    model once (an entry without a string id names none: left out); one upstream that fails
    leaves its models out, not the others' (all failing: the first failure). Of the replicas
    of one model, one is asked (one that is up first; the next if it fails)."""
    models: list[dict[str, Any]] = []
    seen: set[str] = set()
    failures: list[ProxyError] = []
    for urls, settings in upstream_groups(config):
        reply = _models_of(upstreams, replicas, urls, settings, target,
                           headers_for(settings), log)
        if isinstance(reply, ProxyError):
            failures.append(reply)
            continue
        for model in orjson.loads(reply.body)["data"]:
            model_id = model.get("id") if isinstance(model, dict) else None
            if isinstance(model_id, str) and model_id not in seen:  # (else: names no model)
                seen.add(model_id)
                models.append(model)
    if failures and not models:
        raise failures[0]
    return models


def _models_of(upstreams: Mapping[str, Upstream], replicas: Replicas, urls: tuple[str, ...],
               settings: Config, target: str, headers: dict[str, str],
               log: RequestLog) -> UpstreamReply | ProxyError:
    """The model list of one upstream (of the first of its replicas that answers one)."""
    timeouts = Timeouts(settings.connect_timeout_seconds, settings.read_timeout_seconds)
    failure = ProxyError(502, "No upstream answered.", code="upstream_unreachable")
    for url in replicas.up_first(urls):
        try:
            reply = upstreams[url].complete_get(target, headers, timeouts,
                                                settings.max_upstream_body_bytes)
            if reply.status >= 400:
                raise from_upstream(reply.status, reply.body, reply.headers)
            if model_ids(reply) is None:
                raise ProxyError(502, f"{mask_url(url)}/v1/models is not a model list.",
                                 type_="upstream_error", code="upstream_bad_shape")
            return reply
        except ProxyError as exc:
            failure = exc
            log.notes.append(f"models_unavailable:{exc.code or exc.status}")
    return failure


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def card_of(entry: Mapping[str, Any]) -> ModelCard | None:
    """One entry of a `/v1/models` list as a card: vLLM and SGLang say the context length as
    `max_model_len`; llama.cpp says its model's training context (`meta.n_ctx_train`), an
    upper bound of the server's own `n_ctx`, so it is not taken. None: no model id."""
    model_id = entry.get("id")
    if not isinstance(model_id, str) or not model_id:
        return None
    owner = entry.get("owned_by")
    created = entry.get("created")
    return ModelCard(model_id, _positive(entry.get("max_model_len")),
                     created if isinstance(created, int) and not isinstance(created, bool)
                     else None, owner if isinstance(owner, str) else None)


def model_cards(upstreams: Mapping[str, Upstream], replicas: Replicas, config: Config,
                log: RequestLog, headers_for: HeadersFor) -> tuple[ModelCard, ...]:
    """Every upstream's models (each upstream asked with its own key), as cards."""
    entries = model_entries(upstreams, replicas, config, log, MODELS_PATH, headers_for)
    return tuple(card for entry in entries if (card := card_of(entry)) is not None)


class ContextLengths:
    """The upstream's context length of each model as this process last read it (from the
    first turn that needs it, and from every read of the model cards since), to say once per
    model in the log that a client believes in a larger window than the upstream's (Ollama's
    `num_ctx`: the upstream's window is fixed where it runs). What it keeps is bounded by the
    models the upstream lists: a client's windows and names grow nothing."""

    def __init__(self) -> None:
        self._lengths: dict[str, int] = {}
        self._read = False
        self._said: set[str] = set()  # the models whose larger window was said (listed ones)
        self._lock = threading.Lock()

    def learn(self, cards: tuple[ModelCard, ...]) -> None:
        """What a read of the model cards said."""
        with self._lock:
            self._read = True
            self._lengths.update({card.id: card.context_length for card in cards
                                  if card.context_length})

    def above(self, plan: TurnPlan, read: Callable[[], tuple[ModelCard, ...]],
              ) -> tuple[int, int] | None:
        """(asked, the upstream's) the first time (per model the upstream lists) a plan's
        window is above the upstream's, reading the cards (`read`) first if this process
        never has; else None (a later, other window above it is not said again)."""
        asked = plan.context_asked
        if not asked:
            return None
        if not self._read:
            try:
                self.learn(read())
            except ProxyError:  # no list to read now: the turn itself will say what is wrong
                return None
        length = self._lengths.get(plan.model)
        with self._lock:
            if length is None or asked <= length or plan.model in self._said:
                return None
            self._said.add(plan.model)
        return asked, length
