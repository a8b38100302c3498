"""The Ollama front's errors: Ollama's envelope `{"error": "…"}`, with the error's own status
(Ollama answers 400 for a bad request, 404 for a model it does not have, 500 for the rest;
the proxy's 401, 413, 429, 502, 503 and 504 keep their meaning, and their headers)."""

from __future__ import annotations

import orjson

from ...base.errors import ProxyError
from .. import ErrorResponse


def message_of(error: ProxyError) -> str:
    """The error's words, as Ollama's envelope carries them."""
    return error.message


def error_response(error: ProxyError) -> ErrorResponse:
    """The error before any stream started: `{"error": "…"}` and its status."""
    return ErrorResponse(error.status, orjson.dumps({"error": message_of(error)}),
                         error.headers)


def upstreams_models(action: str) -> ProxyError:
    """What a model-management endpoint (`pull`, `push`, `create`, `copy`, `delete`, the
    blobs) answers: the models are the upstream's, served as it was started."""
    return ProxyError(
        400, f"{action}: the models here are the upstream server's (vLLM, SGLang, llama.cpp), "
             "served as it was started; this Ollama API cannot pull, push, create, copy or "
             "delete them. Change the upstream's models where it runs.",
        code="models_are_upstreams")


def not_served(name: str, served: tuple[str, ...]) -> ProxyError:
    """What a pull of a model the upstream does not serve answers: Ollama's 404 for a model
    it has not, saying which the upstream serves (the first few) and that none is pulled."""
    shown = name if len(name) <= _NAME_SHOWN else name[:_NAME_SHOWN] + "…"
    listed = ", ".join(served[:_SERVED_SHOWN]) + (", …" if len(served) > _SERVED_SHOWN else "")
    return ProxyError(
        404, f"pull model manifest: model '{shown}' is not one the upstream serves "
             f"({listed or 'it lists none'}); the models here are the upstream server's, "
             "served as it was started, and this Ollama API cannot pull one. Pick a listed "
             "model, or add it where the upstream runs.",
        param="model", code="model_not_found")


_NAME_SHOWN = 200  # characters of a client's model name echoed back
_SERVED_SHOWN = 8  # served models named
