"""What the upstream serves, learned without a generation: its models with their context
length (`model_cards`), read from the model list of every upstream. The one place a front's
model endpoints (Ollama's `/api/tags`, `/api/show`) learn it from; the upstream's profile
(server kind, template, constraint dialect) is to replace it with what it learns."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ProxyError
from ..fronts import ModelCard
from ..observe import RequestLog
from ..turn.plan import TurnPlan
from .relay import model_entries

if TYPE_CHECKING:
    from .handlers import Proxy

MODELS_PATH = "/v1/models"


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


def model_cards(app: Proxy, log: RequestLog) -> tuple[ModelCard, ...]:
    """Every upstream's models (each upstream asked with its own key), as cards."""
    entries = model_entries(app, log, MODELS_PATH,
                            lambda settings: app.upstream_headers(settings, buffered=True))
    cards = tuple(card for entry in entries if (card := card_of(entry)) is not None)
    app.contexts.learn(cards)
    return cards


class ContextLengths:
    """The upstream's context length of each model as this process last read it (from the
    first turn that needs it, and from every read of the model list since), to say once in
    the log that a client believes in a larger window than the upstream's (Ollama's
    `num_ctx`: the upstream's window is fixed where it runs)."""

    def __init__(self) -> None:
        self._lengths: dict[str, int] = {}
        self._read = False
        self._said: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def learn(self, cards: tuple[ModelCard, ...]) -> None:
        """What a read of the model list said."""
        with self._lock:
            self._read = True
            self._lengths.update({card.id: card.context_length for card in cards
                                  if card.context_length})

    def check(self, app: Proxy, plan: TurnPlan, log: RequestLog) -> None:
        """Say once (per model and window asked) when `plan`'s window is above the
        upstream's, reading the model list first if this process never has."""
        asked = plan.context_asked
        if not asked:
            return
        if not self._read:
            try:
                model_cards(app, log)
            except ProxyError:  # no list to read now: the turn itself will say what is wrong
                return
        length = self._lengths.get(plan.model)
        with self._lock:
            if length is None or asked <= length or (plan.model, asked) in self._said:
                return
            self._said.add((plan.model, asked))
        app.logger.warning("model %s: a client asks for a context window of %d tokens; the "
                           "upstream's is %d (set where it runs, e.g. vLLM's "
                           "--max-model-len)", plan.model, asked, length)
