"""What the upstream serves, learned without a generation: its models with their context
length (`model_cards`), read from the model list of every upstream. The one place a front's
model endpoints (Ollama's `/api/tags`, `/api/show`) learn it from; the upstream's profile
(server kind, template, constraint dialect) is to replace it with what it learns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..fronts import ModelCard
from ..observe import RequestLog
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
    return tuple(card for entry in entries if (card := card_of(entry)) is not None)
