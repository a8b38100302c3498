"""The Ollama front's model endpoints, made of the upstream's model list (`ModelCard`s, which
the shell reads): `GET /api/tags`, `POST /api/show`, `GET /api/ps`, `POST /api/pull` (a
model the upstream serves is there already: the success Ollama's pull answers); and those that need
nothing: `GET /` ("Ollama is running") and `GET /api/version`.

Every field a strict client reads is there (Ollama's `ListModelResponse`, `ShowResponse`,
`ProcessModelResponse`), with what the upstream says and nothing invented: no weights are
on this side, so `size` is 0 and the `digest` is the name's (stable, never a file's);
`family`, `parameter_size` and `quantization_level` are read from the model's name when it
holds them (`Qwen3-27B-FP8`: `qwen3`, `27B`, `FP8`), else empty. `model_info` holds
`general.architecture` (the family) and `<family>.context_length` (the upstream's own, from
its model list) that VS Code Copilot sizes its prompts by, and `general.basename`, its
display name. Names are listed bare, as the upstream serves them (Copilot sends the listed
name to `/v1/chat/completions` on the same base URL); `name:latest` is the same model.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

import orjson

from ...base.errors import ProxyError
from ...turn.plan import parse_body
from .. import Incoming, ModelCard, Reply
from .errors import not_served
from .request import bare_model

VERSION = "0.33.0"
"""The Ollama release whose API this front speaks (VS Code Copilot wants at least 0.6.4 and
reads each part as a number)."""

_FAMILY = re.compile(r"[a-z]+(?:[0-9]+(?![0-9]*[bm]\b))?")
_SIZE = re.compile(r"(?<![a-z0-9.])([0-9]+(?:\.[0-9]+)?)([bm])(?![a-z0-9])", re.IGNORECASE)
_QUANT = re.compile(r"(?<![a-z0-9])(fp8|fp16|bf16|fp4|nvfp4|mxfp4|int4|int8|w4a16|w8a8|awq|"
                    r"gptq|q[0-9]_k(?:_[sml])?|q[0-9]_[0-9]|iq[0-9]_[a-z]+)(?![a-z0-9])",
                    re.IGNORECASE)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _json(value: Any, status: int = 200) -> Reply:
    return Reply(status, orjson.dumps(value))


def root(_incoming: Incoming, _config: Any) -> Reply:
    """`GET /`: what Ollama answers, which clients probe for."""
    return Reply(200, b"Ollama is running", "text/plain; charset=utf-8")


def version(_incoming: Incoming, _config: Any) -> Reply:
    """`GET /api/version`."""
    return _json({"version": VERSION})


def details(card: ModelCard) -> dict[str, Any]:
    """A model's `details`, as far as its name says them."""
    base = card.id.rsplit("/", 1)[-1].lower()
    family = _FAMILY.match(base)
    size = _SIZE.search(base)
    quant = _QUANT.search(base)
    name = family.group(0) if family else ""
    return {"parent_model": "",
            "format": "gguf" if card.owned_by == "llamacpp" else "safetensors",
            "family": name, "families": [name] if name else None,
            "parameter_size": f"{size.group(1)}{size.group(2).upper()}" if size else "",
            "quantization_level": quant.group(1).upper() if quant else ""}


def _modified(card: ModelCard) -> str:
    seconds = card.created or 0
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _digest(card: ModelCard) -> str:
    return hashlib.sha256(card.id.encode()).hexdigest()


def _listed(card: ModelCard) -> dict[str, Any]:
    return {"name": card.id, "model": card.id, "modified_at": _modified(card), "size": 0,
            "digest": _digest(card), "details": details(card)}


def tags(_incoming: Incoming, cards: tuple[ModelCard, ...]) -> Reply:
    """`GET /api/tags`: every model the upstream serves."""
    return _json({"models": [_listed(card) for card in cards]})


def ps(_incoming: Incoming, cards: tuple[ModelCard, ...]) -> Reply:
    """`GET /api/ps`: the upstream's models are all loaded, for as long as it runs."""
    return _json({"models": [{**_listed(card), "expires_at": "2318-01-01T00:00:00Z",
                              "size_vram": 0, "context_length": card.context_length or 0}
                             for card in cards]})


def found(name: str, cards: tuple[ModelCard, ...]) -> ModelCard:
    """The model a client names (`name` or `name:latest`), or Ollama's 404."""
    for candidate in (name, bare_model(name)):
        card = next((card for card in cards if card.id == candidate), None)
        if card is not None:
            return card
    raise ProxyError(404, f"model '{name}' not found", code="model_not_found")


def show(incoming: Incoming, cards: tuple[ModelCard, ...]) -> Reply:
    """`POST /api/show` (`model`, or the older `name`): what the model can do, its family
    and its context length (`model_info`)."""
    body = parse_body(incoming.body)
    name = body.get("model") or body.get("name")
    if not isinstance(name, str) or not name:
        raise ProxyError(400, "model is required", param="model", code="invalid_request")
    card = found(name, cards)
    about = details(card)
    architecture = about["family"] or "unknown"
    info: dict[str, Any] = {"general.architecture": architecture,
                            "general.basename": card.id, "general.name": card.id}
    if card.context_length:
        info[f"{architecture}.context_length"] = card.context_length
    # Every upstream model completes and takes tools (the proxy reads calls from any text);
    # thinking when it is known to reason; vision is known only by a profile of the upstream.
    capabilities = ["completion", "tools", *(["thinking"] if card.reasons else [])]
    return _json({"license": "", "modelfile": f"FROM {card.id}\n", "parameters": "",
                  "template": "{{ .Prompt }}", "details": about, "model_info": info,
                  "capabilities": capabilities, "modified_at": _modified(card)})


PULLED = ("pulling manifest", "verifying sha256 digest", "writing manifest", "success")
"""The status lines of Ollama's pull of a model it has, less the layers (no weights are on
this side to count): what its clients wait for, the last one `success`."""


def pull(incoming: Incoming, cards: tuple[ModelCard, ...]) -> Reply:
    """`POST /api/pull` (`model`, or the older `name`; `stream`, true when absent): for a
    model the upstream serves, Ollama's success at once (its status lines as NDJSON, or the
    last alone with `stream: false`), so that a client that pulls before it chats (Home
    Assistant's setup) goes on; nothing is downloaded. Another name is a 404 saying which
    models the upstream serves."""
    body = parse_body(incoming.body)
    name = body.get("model") or body.get("name")
    if not isinstance(name, str) or not name:
        raise ProxyError(400, "model is required", param="model", code="invalid_request")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ProxyError(400, "stream: expected true or false.", param="stream",
                         code="invalid_request")
    try:
        found(name, cards)
    except ProxyError:
        raise not_served(name, tuple(card.id for card in cards)) from None
    if stream is False:
        return _json({"status": PULLED[-1]})
    return Reply(200, b"".join(orjson.dumps({"status": status}) + b"\n" for status in PULLED),
                 "application/x-ndjson")
