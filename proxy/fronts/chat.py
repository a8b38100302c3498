"""The Chat Completions front (`POST /v1/chat/completions`): OpenClaw, opencode, Cline,
Continue. Its request is already the turn's language; its answer is OpenAI's completion,
as JSON or as an SSE stream of `chat.completion.chunk`s ending in `[DONE]`."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..config import Config
from ..errors import ProxyError
from ..ids import random_alnum
from ..sse import event
from ..turn.context_window import refuses_window
from ..turn.plan import PassthroughPlan, TurnPlan, plan_chat
from . import ErrorResponse, Front, Incoming, Route, Sample, unsent

NAME = "chat"
PATH = "/v1/chat/completions"
DONE = b"data: [DONE]\n\n"
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
COMMENT_HEARTBEAT = b": ping\n\n"


@dataclass(frozen=True)
class StreamIdentity:
    """The `id`, `created` and `model` every chunk of one stream carries."""

    id: str
    created: int
    model: str

    @classmethod
    def new(cls, model: str) -> StreamIdentity:
        """A fresh identity, minted before upstream has answered."""
        return cls(f"chatcmpl-{random_alnum(24)}", int(time.time()), model)


def _chunk(ident: StreamIdentity, choices: list[dict[str, Any]], **extra: Any) -> bytes:
    body = {"id": ident.id, "object": "chat.completion.chunk", "created": ident.created,
            "model": ident.model, "choices": choices, **extra}
    return event(body)


def _delta(ident: StreamIdentity, index: int, delta: dict[str, Any],
           finish_reason: str | None = None, logprobs: Any = None) -> bytes:
    choice = {"index": index, "delta": delta, "logprobs": logprobs,
              "finish_reason": finish_reason}
    return _chunk(ident, [choice])


def role_chunks(ident: StreamIdentity) -> bytes:
    """The stream's first chunk, sent before upstream has answered: the first choice's role
    and empty content (other choices begin with their content, when they are known)."""
    return _delta(ident, 0, {"role": "assistant", "content": ""})


def heartbeat(ident: StreamIdentity, mode: str) -> bytes:
    """A frame that tells idle watchdogs the turn is alive and adds nothing to the message.

    `chunk`: an empty-delta chunk (counted by clients that ignore SSE comments);
    `comment`: an SSE comment line (kept by proxies, invisible to clients); `both`.
    """
    frames = b""
    if mode in ("comment", "both"):
        frames += COMMENT_HEARTBEAT
    if mode in ("chunk", "both"):
        frames += _delta(ident, 0, {})
    return frames


def error_event(error: dict[str, Any]) -> bytes:
    """An error inside a stream that has started, in OpenAI's streaming form."""
    return event(error)


def completion_chunks(ident: StreamIdentity, completion: dict[str, Any],
                      include_usage: bool, announced: Collection[int] = (0,),
                      ) -> Iterator[bytes]:
    """Every chunk after the role chunk(s) for a normalised completion, through `[DONE]`.

    Choices in `announced` had their role chunk already (`role_chunks`); any other gets it
    here, and an announced choice the completion does not hold is closed, so that every
    choice a client saw begin also ends.
    """
    rendered = set()
    for choice in completion["choices"]:
        index = choice["index"]
        message = choice["message"]
        if index not in announced:
            yield _delta(ident, index, {"role": "assistant", "content": ""})
        rendered.add(index)
        for key in ("reasoning_content", "reasoning"):
            if message.get(key):
                yield _delta(ident, index, {key: message[key]})
        logprobs = choice.get("logprobs")  # the whole answer's, once, with its text
        if message.get("content"):
            yield _delta(ident, index, {"content": message["content"]}, logprobs=logprobs)
            logprobs = None
        if message.get("refusal"):
            yield _delta(ident, index, {"refusal": message["refusal"]})
        for position, call in enumerate(message.get("tool_calls") or ()):
            function = call["function"]
            yield _delta(ident, index, {"tool_calls": [{
                "index": position, "id": call["id"], "type": "function",
                "function": {"name": function["name"], "arguments": ""}}]})
            yield _delta(ident, index, {"tool_calls": [{
                "index": position, "function": {"arguments": function["arguments"]}}]})
        yield _delta(ident, index, {}, choice["finish_reason"], logprobs=logprobs)
    for index in sorted(announced):
        if index not in rendered:
            yield _delta(ident, index, {}, "stop")
    if include_usage and completion.get("usage"):
        yield _chunk(ident, [], usage=completion["usage"])
    yield DONE


def _after(text: Any, sent: str) -> Any:
    """A message field's value with what went out live taken off (`unsent`; a field that
    is not text, or nothing sent, as it is)."""
    return unsent(text, sent) if sent and isinstance(text, str) else text


class ChatStream:
    """One `chat.completion.chunk` stream: the role chunk, heartbeats, live deltas, then the
    rest of the completion and `[DONE]`."""

    content_type = "text/event-stream"

    def __init__(self, ident: StreamIdentity, *, include_usage: bool = False,
                 heartbeat_mode: str = "chunk",
                 reasoning_keys: tuple[str, ...] = ("reasoning_content",)) -> None:
        self.ident = ident
        self.include_usage = include_usage
        self.heartbeat_mode = heartbeat_mode
        self.reasoning_keys = reasoning_keys
        self._announced: set[int] = set()
        self._sent: dict[tuple[int, str], str] = {}  # (choice, "reasoning" | "content")

    @classmethod
    def for_plan(cls, plan: TurnPlan) -> ChatStream:
        """The stream for a planned turn, with a fresh identity."""
        return cls(StreamIdentity.new(plan.model), include_usage=plan.include_usage,
                   heartbeat_mode=plan.config.heartbeat_mode,
                   reasoning_keys=reasoning_keys(plan.config.reasoning_field))

    def head(self) -> bytes:
        """The first choice's role chunk."""
        self._announced.add(0)
        return role_chunks(self.ident)

    def heartbeat(self) -> bytes:
        """An empty-delta chunk and/or an SSE comment (`heartbeat_mode`)."""
        return heartbeat(self.ident, self.heartbeat_mode)

    def _live(self, choice: int, kind: str, keys: tuple[str, ...], text: str) -> bytes:
        out = b""
        if choice not in self._announced:
            self._announced.add(choice)
            out = _delta(self.ident, choice, {"role": "assistant", "content": ""})
        self._sent[choice, kind] = self._sent.get((choice, kind), "") + text
        return out + b"".join(_delta(self.ident, choice, {key: text}) for key in keys)

    def reasoning(self, text: str, choice: int = 0) -> bytes:
        """A reasoning delta, under the configured field name(s)."""
        return self._live(choice, "reasoning", self.reasoning_keys, text)

    def text(self, text: str, choice: int = 0) -> bytes:
        """A content delta."""
        return self._live(choice, "content", ("content",), text)

    def answer(self, completion: dict[str, Any]) -> bytes:
        """The chunks of `completion` not yet sent, through `[DONE]`, in one piece."""
        completion = named_reasoning(completion, self.reasoning_keys)
        if self._sent:
            completion = {**completion, "choices": [self._unsent(c)
                                                    for c in completion["choices"]]}
        return b"".join(completion_chunks(self.ident, completion, self.include_usage,
                                          self._announced))

    def _unsent(self, choice: dict[str, Any]) -> dict[str, Any]:
        index = choice["index"]
        message = dict(choice["message"])
        reasoning = self._sent.get((index, "reasoning"), "")
        for key in ("reasoning_content", "reasoning"):
            message[key] = _after(message.get(key), reasoning)
        message["content"] = _after(message.get("content"),
                                    self._sent.get((index, "content"), ""))
        return {**choice, "message": message}

    def error(self, error: ProxyError) -> bytes:
        """OpenAI's in-stream error (`data: {"error": …}`), then `[DONE]`."""
        return error_event(worded(error, "messages").body()) + DONE


def reasoning_keys(field: str) -> tuple[str, ...]:
    """The message fields the `reasoning_field` setting writes the reasoning under (the chat
    wire's own choice: vLLM's `reasoning_content`, `reasoning`, both, or none)."""
    return {"both": ("reasoning_content", "reasoning"), "drop": ()}.get(field, (field,))


def named_reasoning(completion: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """`completion` on the chat wire: each message's reasoning (the turn's
    `reasoning_content`) under `keys`, in its place among the message's fields, and no
    `stop_reason` (vLLM's, which OpenAI's schema does not have)."""
    choices = []
    for choice in completion["choices"]:
        message: dict[str, Any] = {}
        for key, value in choice["message"].items():
            if key == "reasoning_content":
                message.update(dict.fromkeys(keys, value))
            else:
                message[key] = value
        choices.append({k: v for k, v in choice.items() if k != "stop_reason"}
                       | {"message": message})
    return {**completion, "choices": choices}


def parse(incoming: Incoming, config: Config) -> TurnPlan | PassthroughPlan:
    """The client's body is a chat completion already: planned as it is."""
    return plan_chat(incoming.body, config)


def render_json(plan: TurnPlan, completion: dict[str, Any]) -> bytes:
    """The completion, as the body of a non-streaming answer (the reasoning under the
    fields `reasoning_field` names)."""
    return orjson.dumps(named_reasoning(completion, reasoning_keys(plan.config.reasoning_field)))


def worded(error: ProxyError, param: str) -> ProxyError:
    """`error` as OpenAI's APIs word it: a refusal for the context window (any phrasing
    `refuses_window` reads) gets the code `context_length_exceeded`, which OpenAI's clients
    act on (Codex stops retrying and says the context is full), with the upstream's message
    kept; `param` names the request field that holds the prompt. Any other error as it is."""
    if not refuses_window(error.status, error.message):
        return error
    return ProxyError(error.status, error.message, type_="invalid_request_error", param=param,
                      code=CONTEXT_LENGTH_EXCEEDED, headers=error.headers)


def openai_error(error: ProxyError, param: str) -> ErrorResponse:
    """OpenAI's error envelope with the error's own status (and `Retry-After`, if any)."""
    error = worded(error, param)
    return ErrorResponse(error.status, error.json_bytes(), error.headers)


def error_response(error: ProxyError) -> ErrorResponse:
    """The error before any stream started, in OpenAI's envelope (the prompt is in
    `messages`)."""
    return openai_error(error, "messages")


def sample_request(model: str, tool: dict[str, Any], prompt: str,
                   max_tokens: int) -> dict[str, Any]:
    """A chat client's tool turn (for `doctor`)."""
    return {"model": model, "messages": [{"role": "user", "content": prompt}],
            "tools": [{"type": "function", "function": tool}], "tool_choice": "auto",
            "stream": False, "max_tokens": max_tokens}


def sample_calls(answer: Any) -> list[dict[str, str]]:
    """The calls of a completion's first choice (for `doctor`)."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    message = choices[0].get("message") if isinstance(choices, list) and choices else None
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return [{"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
            for call in calls or ()]


FRONT = Front(NAME, (Route("POST", PATH),), parse, render_json, ChatStream.for_plan,
              error_response, key_headers=("Authorization", "Api-Key"), upstream_path=None,
              sample=Sample(sample_request, sample_calls))
