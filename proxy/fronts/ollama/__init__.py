"""Ollama's API (`POST /api/chat`, `/api/generate`, and the endpoints its clients probe):
Home Assistant, VS Code Copilot's Ollama provider, Zed, JetBrains AI Assistant, Continue
(`provider: ollama`), Open WebUI.

A chat or generate request is translated to a chat completion (`request`) and answered by
the same turn as every front (calls recovered and repaired, thinking in its field, the
streamed mode, heartbeats); the result comes back as one JSON object or, Ollama's default
(`stream` absent), as NDJSON lines (`output`, `stream`). The model endpoints are made of the
upstream's model list (`catalog`), embeddings are one upstream call (`embed`), and so is a
generate without the template, to the upstream's completions (`complete`); a request that
only loads a model is answered at once, a pull of a model the upstream serves is the success
Ollama streams (`catalog`), and every other request to the endpoints that manage models
(any method, blobs included) says the models are the upstream's, without asking it
(`errors`). Errors use Ollama's envelope, `{"error": "…"}`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import bad_request
from ...base.frozen import replaced
from ...turn.plan import TurnPlan, parse_body, plan_turn
from .. import CATALOG, EXCHANGE, Ask, Front, Incoming, Reply, Route, Sample
from . import catalog, embed
from .complete import raw_generate
from .errors import error_response, upstreams_models
from .output import CHAT, GENERATE, OllamaData, loaded, render_json
from .request import (
    Translation,
    bare_model,
    loads_only,
    translate_chat,
    translate_generate,
    without_template,
)
from .sample import sample_calls, sample_request
from .stream import OllamaStream

__all__ = ["CHAT_PATH", "FRONT", "GENERATE_PATH", "NAME", "OllamaData", "OllamaStream",
           "error_response", "parse", "render_json"]

NAME = "ollama"
CHAT_PATH = "/api/chat"
GENERATE_PATH = "/api/generate"
# The endpoints that manage models (Ollama's routes and the blobs its `create` uploads): every
# method is refused here, the upstream never asked (a pull of a served model is answered).
_MANAGING = (("pull", "/api/pull"), ("push", "/api/push"), ("create", "/api/create"),
             ("copy", "/api/copy"), ("delete", "/api/delete"), ("blobs", "/api/blobs/{digest}"))
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def parse(incoming: Incoming, config: Config) -> TurnPlan[OllamaData] | Reply | Ask:
    """An `/api/chat` or `/api/generate` request as a turn (its answer is Ollama's, with or
    without tools); answered at once when it only loads or unloads the model; one call to
    the upstream's completions for a generate without the template."""
    started = time.monotonic_ns()
    body = parse_body(incoming.body)
    model = body.get("model")
    config = config.for_model(bare_model(model) if isinstance(model, str) else "")
    generate = incoming.path.rstrip("/") == GENERATE_PATH
    if loads_only(body, generate) and isinstance(model, str) and model:
        data = OllamaData(model, GENERATE if generate else CHAT)
        return Reply(200, orjson.dumps(loaded(data, body.get("keep_alive") in (0, "0", "0s"))))
    if generate and without_template(body):
        if not isinstance(model, str) or not model:
            raise bad_request("model: expected a non-empty string.", "model")
        stream = body.get("stream", True)
        if not isinstance(stream, bool) and stream is not None:
            raise bad_request("stream: expected true or false.", "stream")
        return raw_generate(body, model, stream is not False)
    request: Translation = (translate_generate if generate else translate_chat)(body, config)
    plan = plan_turn(request.body, config, client_stream=request.stream, include_usage=False,
                     front_data=OllamaData(request.model, GENERATE if generate else CHAT,
                                           started))
    # The thinking is Ollama's own field, whatever the chat front's setting says.
    return replaced(
        plan, extraction=replaced(plan.extraction, reasoning_shown=True),
        rewrites=(*request.rewrites, *plan.rewrites), context_asked=request.num_ctx)


def _refusal(action: str) -> Callable[[Incoming, Config], Any]:
    def refuse(_incoming: Incoming, _config: Config) -> Any:
        raise upstreams_models(action)
    return refuse


ROUTES = (
    Route("POST", CHAT_PATH),
    Route("POST", GENERATE_PATH),
    Route("GET", "/", EXCHANGE, serve=catalog.root),
    Route("HEAD", "/", EXCHANGE, serve=catalog.root),
    Route("GET", "/api/version", EXCHANGE, serve=catalog.version),
    Route("HEAD", "/api/version", EXCHANGE, serve=catalog.version),
    Route("GET", "/api/tags", CATALOG, serve=catalog.tags),
    Route("HEAD", "/api/tags", CATALOG, serve=catalog.tags),
    Route("POST", "/api/show", CATALOG, serve=catalog.show),
    Route("GET", "/api/ps", CATALOG, serve=catalog.ps),
    Route("POST", "/api/embed", EXCHANGE, serve=embed.embed),
    Route("POST", "/api/embeddings", EXCHANGE, serve=embed.embeddings),
    Route("POST", "/api/pull", CATALOG, serve=catalog.pull),
    *(Route(method, path, EXCHANGE, serve=_refusal(action)) for action, path in _MANAGING
      for method in _METHODS if (method, path) != ("POST", "/api/pull")),
)

FRONT: Front[OllamaData] = Front(
    NAME, ROUTES, parse, render_json, OllamaStream.for_plan, error_response,
    key_headers=("Authorization",), sample=Sample(sample_request, sample_calls))
