"""`/api/generate` without the model's template (`raw`, or a `suffix` to fill in before):
no turn, but one call to the upstream's `/v1/completions`, which takes the prompt as it is
(vLLM's `CompletionRequest`), and its text back as Ollama's `GenerateResponse`, one object or
NDJSON lines. Ollama refuses `system`, `template` and `context` in raw mode, and so does
this; an upstream without completions (or without `suffix`, as vLLM) says so in its error."""

from __future__ import annotations

import time
from typing import Any

import orjson

from ...base.errors import ProxyError, bad_request, from_upstream
from ...turn.result import LENGTH, STOP, Choice, TurnResult, Usage
from .. import Ask, Reply
from .output import GENERATE, OllamaData, finished, piece
from .request import apply_format, apply_options, bare_model

COMPLETIONS_PATH = "/v1/completions"


def _result(status: int, raw: bytes) -> TurnResult:
    """The upstream's completion as the turn's result (its first choice's text)."""
    if status == 404 and b"not found" in raw.lower() and b"model" not in raw.lower():
        raise ProxyError(404, "The upstream serves no completions (its /v1/completions is "
                              "not there): a raw prompt needs them.",
                         code="completions_unavailable")
    if status >= 400:
        raise from_upstream(status, raw, {})
    try:
        answer = orjson.loads(raw)
        choice = answer["choices"][0]
        text = choice["text"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        raise ProxyError(502, "The upstream's /v1/completions answer is not a completion.",
                         type_="upstream_error", code="upstream_bad_shape") from None
    if not isinstance(text, str):
        raise ProxyError(502, "The upstream's completion holds no text.",
                         type_="upstream_error", code="upstream_bad_shape")
    usage = answer.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion, total = (
        value if isinstance(value := usage.get(key), int) else None
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"))
    finish = LENGTH if choice.get("finish_reason") == LENGTH else STOP
    return TurnResult(answer.get("id"), answer.get("created"), answer.get("model", ""),
                      (Choice(0, text, finish=finish),), Usage(prompt, completion, total))


def _rendered(data: OllamaData, result: TurnResult, stream: bool) -> Reply:
    """The completion as one `GenerateResponse`, or as NDJSON: its text, then the done
    line."""
    text = result.first.content or ""
    if not stream:
        return Reply(200, orjson.dumps(finished(data, result, piece(data, text))))
    lines = [piece(data, text)] if text else []
    lines.append(finished(data, result, piece(data)))
    return Reply(200, b"".join(orjson.dumps(line) + b"\n" for line in lines),
                 "application/x-ndjson")


def raw_generate(raw: dict[str, Any], model: str, stream: bool) -> Ask:
    """The one upstream call of a generate without the template, and what its answer
    becomes."""
    started = time.monotonic_ns()
    for name in ("system", "template", "context"):
        if raw.get(name):
            raise bad_request(f"{name}: raw mode does not support template, system, or "
                              "context.", name)
    prompt = raw.get("prompt", "")
    suffix = raw.get("suffix")
    for name, value in (("prompt", prompt), ("suffix", suffix)):
        if value is not None and not isinstance(value, str):
            raise bad_request(f"{name}: expected a string.", name)
    if raw.get("images"):
        raise bad_request("images: a prompt without the template takes no images.", "images")
    # No `num_predict`: as far as the window allows (vLLM's completions stop at 16 else).
    body: dict[str, Any] = {"model": bare_model(model), "prompt": prompt, "max_tokens": None}
    if suffix:
        body["suffix"] = suffix
    apply_format(raw.get("format"), body)
    apply_options(raw.get("options"), body, [])
    data = OllamaData(model, GENERATE, started)
    return Ask("POST", COMPLETIONS_PATH, orjson.dumps(body), bare_model(model),
               lambda status, answer: _rendered(data, _result(status, answer), stream))
