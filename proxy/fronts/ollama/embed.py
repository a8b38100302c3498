"""The Ollama front's embeddings: `POST /api/embed` (`input`: a string or a list, many
vectors) and the older `POST /api/embeddings` (`prompt`, one vector), each one call to the
upstream's `/v1/embeddings`, translated both ways. An upstream serving no embedding model
answers an error, and the client reads it in Ollama's envelope with the upstream's words
(an upstream without the endpoint at all: a 404 that says so)."""

from __future__ import annotations

import time
from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import ProxyError, bad_request, from_upstream
from ...turn.plan import parse_body
from .. import Ask, Incoming, Reply
from .request import bare_model

EMBEDDINGS_PATH = "/v1/embeddings"


def _vectors(status: int, raw: bytes, count: int) -> tuple[list[Any], int | None]:
    """The vectors of the upstream's answer, in input order, and its prompt token count."""
    if status == 404 and b"embedding" not in raw.lower():
        raise ProxyError(404, "The upstream serves no embeddings (its /v1/embeddings is not "
                              "there): start an embedding model on it.",
                         code="embeddings_unavailable")
    if status >= 400:
        raise from_upstream(status, raw, {})
    try:
        answer = orjson.loads(raw)
        data = sorted(answer["data"], key=lambda item: item.get("index", 0))
        vectors = [item["embedding"] for item in data]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise ProxyError(502, "The upstream's /v1/embeddings answer is not a list of "
                              "embeddings.", type_="upstream_error",
                         code="upstream_bad_shape") from None
    if len(vectors) != count or not all(isinstance(v, list) for v in vectors):
        raise ProxyError(502, f"The upstream answered {len(vectors)} embeddings for {count} "
                              "inputs.", type_="upstream_error", code="upstream_bad_shape")
    usage = answer.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return vectors, tokens if isinstance(tokens, int) else None


def _ask(body: dict[str, Any], inputs: list[str], model: str,
         then: Any) -> Ask:
    upstream: dict[str, Any] = {"model": bare_model(model), "input": inputs}
    dimensions = body.get("dimensions")
    if dimensions is not None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise bad_request("dimensions: expected a positive integer.", "dimensions")
        upstream["dimensions"] = dimensions
    return Ask("POST", EMBEDDINGS_PATH, orjson.dumps(upstream), bare_model(model), then)


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("model: expected a non-empty string.", "model")
    return model


def embed(incoming: Incoming, _config: Config) -> Ask:
    """`POST /api/embed`: `{"model", "embeddings": [[…], …], "total_duration",
    "prompt_eval_count"}`."""
    started = time.monotonic_ns()
    body = parse_body(incoming.body)
    model = _model(body)
    raw = body.get("input")
    inputs = [raw] if isinstance(raw, str) else raw
    if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
        raise bad_request("input: expected a string or a non-empty list of strings.", "input")

    def then(status: int, answer: bytes) -> Reply:
        vectors, tokens = _vectors(status, answer, len(inputs))
        out: dict[str, Any] = {"model": model, "embeddings": vectors,
                               "total_duration": max(time.monotonic_ns() - started, 1)}
        if tokens:
            out["prompt_eval_count"] = tokens
        return Reply(200, orjson.dumps(out))

    return _ask(body, inputs, model, then)


def embeddings(incoming: Incoming, _config: Config) -> Ask:
    """`POST /api/embeddings` (the older endpoint): `{"embedding": […]}`."""
    body = parse_body(incoming.body)
    model = _model(body)
    prompt = body.get("prompt", "")
    if not isinstance(prompt, str):
        raise bad_request("prompt: expected a string.", "prompt")

    def then(status: int, answer: bytes) -> Reply:
        vectors, _ = _vectors(status, answer, 1)
        return Reply(200, orjson.dumps({"embedding": vectors[0]}))

    return _ask(body, [prompt], model, then)
