"""vLLM 0.33's answer shapes: a chat completion and its stream exactly as vLLM serialises
them, its error envelopes, and its context-window refusal
(vllm/entrypoints/openai/chat_completion/protocol.py: ChatCompletionResponse,
ChatCompletionStreamResponse; vllm/frontend/entrypoints/serve/exception_handling/)."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from tests.fakes.base import Answer, Received

MODEL = "Qwen/Qwen3.6-27B-FP8"


def vllm_tool_call(name: str, arguments: str) -> dict[str, Any]:
    """A tool call as vLLM's own parser returns it."""
    return {"id": f"chatcmpl-tool-{uuid.uuid4().hex}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def vllm_completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
    finish_reason: str = "stop",
    model: str = MODEL,
    choices: int = 1,
) -> dict[str, Any]:
    """A non-streaming chat completion exactly as vLLM 0.33 serialises it: every vendor field
    present (null when unused), `reasoning`, and the `tool_calls` key omitted when empty."""
    message: dict[str, Any] = {
        "role": "assistant", "content": content, "refusal": None, "annotations": None,
        "audio": None, "function_call": None, "reasoning": reasoning,
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": i, "message": dict(message), "logprobs": None,
            "finish_reason": finish_reason, "stop_reason": None, "token_ids": None,
            "routed_experts": None,
        } for i in range(choices)],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": {"prompt_tokens": 31, "total_tokens": 52, "completion_tokens": 21,
                  "prompt_tokens_details": {"cached_tokens": 0, "cached_tokens_by_device": None},
                  "completion_tokens_details": None},
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
        "weight_versions": None,
    }


def vllm_text_completion(text: str, finish_reason: str = "stop",
                         model: str = MODEL) -> dict[str, Any]:
    """A non-streaming /v1/completions answer as vLLM serialises it (`text_completion`:
    vllm/entrypoints/openai/protocol.py CompletionResponse, CompletionResponseChoice)."""
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None,
                         "finish_reason": finish_reason, "stop_reason": None,
                         "token_ids": None, "prompt_logprobs": None,
                         "prompt_token_ids": None}],
            "service_tier": None, "system_fingerprint": None,
            "usage": {"prompt_tokens": 7, "total_tokens": 12, "completion_tokens": 5,
                      "prompt_tokens_details": None},
            "kv_transfer_params": None}


def vllm_error(status: int, message: str, type_: str = "BadRequestError",
               param: str | None = None) -> Answer:
    """vLLM's error envelope from `create_error_response`, with its integer `code`
    (vllm/frontend/entrypoints/serve/exception_handling/error_response.py)."""
    return Answer(status=status, body={"error": {"message": message, "type": type_,
                                                 "param": param, "code": status}})


def vllm_validation_error(reason: str, param: str | None = None) -> Answer:
    """vLLM's 400 for a request its protocol model's validators refuse: the pydantic errors
    listed, type "Bad Request", the validator's parameter as `param`
    (vllm/frontend/entrypoints/serve/exception_handling/handlers/validation.py)."""
    error = {"type": "value_error", "loc": ("body",), "msg": f"Value error, {reason}"}
    return vllm_error(400, f"1 validation error:\n  {error}", "Bad Request", param)


def vllm_stream_chunks(text: str, pieces: int = 5, model: str = MODEL) -> list[bytes]:
    """A streamed answer as vLLM sends it: role chunk, content pieces, finish, [DONE]."""
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish, "token_ids": None}]}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    size = max(1, -(-len(text) // pieces))
    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": text[i:i + size]}) for i in range(0, len(text), size)]
    parts += [chunk({}, "stop"), b"data: [DONE]\n\n"]
    return parts


def fake_token_count(body: Any) -> int:
    """The fake tokenizer: a token per 4 bytes of the messages' and tools' JSON."""
    return len(orjson.dumps([body.get("messages"), body.get("tools")])) // 4


def vllm_context_window(window: int, then: Callable[[Received], Answer],
                        prompt_tokens: Callable[[Any], int] = fake_token_count,
                        wording: str = "current") -> Callable[[Received], Answer]:
    """vLLM's check of a request against `--max-model-len` `window`: a prompt plus the
    completion's `max_tokens` (at least 1) that does not fit is refused with a 400 in vLLM's
    words, `current` ones (the prompt counted only up to where it overflows: a floor) or
    `earlier` ones (counted whole); anything else is answered by `then`."""
    def answer(received: Received) -> Answer:
        body = received.json
        prompt = prompt_tokens(body)
        asked = body.get("max_tokens", body.get("max_completion_tokens"))
        wanted = asked or 0
        if prompt + max(wanted, 1) <= window:
            return then(received)
        if wording == "current":
            counted = max(1, min(prompt, window - wanted + 1))
            return vllm_error(400, f"This model's maximum context length is {window} tokens. "
                              f"However, you requested {wanted} output tokens and your prompt "
                              f"contains at least {counted} input tokens, for a total of at "
                              f"least {counted + wanted} tokens. Please reduce the length of "
                              "the input prompt or the number of requested output tokens. "
                              f"(parameter=input_tokens, value={counted})")
        head = f"This model's maximum context length is {window} tokens."
        if asked is None or prompt >= window:
            return vllm_error(400, f"{head} However, your request has {prompt} input tokens. "
                              "Please reduce the length of the input messages.")
        return vllm_error(400, f"'max_tokens' or 'max_completion_tokens' is too large: "
                          f"{asked}. This model's maximum context length is {window} "
                          f"tokens and your request has {prompt} input tokens "
                          f"({asked} > {window} - {prompt}).")
    return answer


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def vllm_stream_of(completion: dict[str, Any], *, size: int = 4, cumulative: bool = False,
                   ids: bool = True, indexes: bool = True, usage: bool = True,
                   done: bool = True, reasoning_key: str = "reasoning") -> list[bytes]:
    """The stream vLLM sends for the same answer as `completion` (built by vllm_completion):
    the role chunk, reasoning and content in pieces of `size` characters, each tool call as
    its own parser streams it (id, name and empty arguments, then the arguments in pieces),
    each choice's finish, the usage chunk and `[DONE]`; choices interleaved, as with `n`.

    `cumulative`: each arguments chunk is the whole arguments so far, and the name comes
    again (llama.cpp). `ids`/`indexes` False: calls without their id / index (servers that
    leave them out). `done` False: the stream ends without `[DONE]`."""
    ident, created, model = completion["id"], completion["created"], completion["model"]

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice: dict[str, Any] = {"index": index, "delta": delta, "logprobs": None,
                                  "finish_reason": finish, "token_ids": None}
        if finish is not None:
            choice["stop_reason"] = None
        return b"data: " + orjson.dumps({"id": ident, "object": "chat.completion.chunk",
                                         "created": created, "model": model,
                                         "choices": [choice]}) + b"\n\n"

    lanes: list[list[bytes]] = []
    for choice in completion["choices"]:
        index, message = choice["index"], choice["message"]
        lane = [chunk(index, {"role": "assistant", "content": ""})]
        lane += [chunk(index, {reasoning_key: part})
                 for part in _pieces(message.get("reasoning") or "", size)]
        lane += [chunk(index, {"content": part})
                 for part in _pieces(message.get("content") or "", size)]
        for position, call in enumerate(message.get("tool_calls") or ()):
            head: dict[str, Any] = {"type": "function",
                                    "function": {"name": call["function"]["name"],
                                                 "arguments": ""}}
            head |= {"id": call["id"]} if ids else {}
            head |= {"index": position} if indexes else {}
            lane.append(chunk(index, {"tool_calls": [head]}))
            arguments = call["function"]["arguments"]
            for end in range(size, len(arguments) + size, size):
                part = arguments[:end] if cumulative else arguments[end - size:end]
                delta: dict[str, Any] = {"function": {"arguments": part}}
                delta |= {"index": position} if indexes else {}
                if cumulative:
                    delta["function"]["name"] = call["function"]["name"]
                    delta |= {"id": call["id"]} if ids else {}
                lane.append(chunk(index, {"tool_calls": [delta]}))
        lane.append(chunk(index, {}, choice["finish_reason"]))
        lanes.append(lane)
    parts = [part for row in itertools.zip_longest(*lanes) for part in row if part]
    if usage:
        parts.append(b"data: " + orjson.dumps({
            "id": ident, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [], "usage": completion["usage"]}) + b"\n\n")
    if done:
        parts.append(b"data: [DONE]\n\n")
    return parts


def vllm_answer(completion: dict[str, Any], **stream: Any) -> Callable[[Received], Answer]:
    """vLLM's answer to a request of either kind: `completion` as JSON, or (the request
    streams) the same answer streamed (`stream` as for vllm_stream_of)."""
    def answer(received: Received) -> Answer:
        if received.json.get("stream"):
            return Answer(chunks=vllm_stream_of(completion, **stream))
        return Answer(body=completion)
    return answer
