"""The Chat Completions front (`POST /v1/chat/completions`): OpenClaw, opencode, Cline,
Continue. Its request is already the turn's language; its answer is OpenAI's completion,
as JSON or as an SSE stream of `chat.completion.chunk`s ending in `[DONE]`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from ..base.config import Config
from ..base.errors import ProxyError
from ..base.frozen import quick_init, replaced
from ..base.ids import random_alnum
from ..base.sse import event
from ..turn.context_window import refuses_window
from ..turn.plan import PassthroughPlan, TurnPlan, plan_chat
from ..turn.result import STOP, Call, Choice, TurnResult, Usage
from . import ErrorResponse, Front, Incoming, Route, Sample, unsent

NAME = "chat"
PATH = "/v1/chat/completions"
DONE = b"data: [DONE]\n\n"
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
COMMENT_HEARTBEAT = b": ping\n\n"


@quick_init
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

    @cached_property
    def opening(self) -> bytes:
        """Every chunk's bytes up to its first choice, written once for the stream: the
        SSE event's `data: `, then the chunk object's members before `choices`' items."""
        return (b'data: {"id":' + orjson.dumps(self.id)
                + b',"object":"chat.completion.chunk","created":' + orjson.dumps(self.created)
                + b',"model":' + orjson.dumps(self.model) + b',"choices":[')


def _delta(ident: StreamIdentity, index: int, delta: dict[str, Any],
           finish_reason: str | None = None, logprobs: Any = None) -> bytes:
    """One chunk of one choice: the stream's opening, the choice, the chunk's end (the bytes
    orjson writes for the whole chunk, its identity written once per stream)."""
    choice = {"index": index, "delta": delta, "logprobs": logprobs,
              "finish_reason": finish_reason}
    return ident.opening + orjson.dumps(choice) + b"]}\n\n"


# A live delta's chunk after its text: the delta's end, its choice's other members, the
# chunk's end (as orjson writes `_delta`'s for a delta of one text).
_TEXT_END = b'},"logprobs":null,"finish_reason":null}]}\n\n'


def text_opening(ident: StreamIdentity, index: int, key: str) -> bytes:
    """A live delta's chunk before its text, for one choice and key: `_delta(ident, index,
    {key: text})` is this, the text as orjson writes it, and `_TEXT_END` (the same bytes,
    one string written a token instead of a chunk's objects)."""
    return (ident.opening + b'{"index":' + orjson.dumps(index) + b',"delta":{'
            + orjson.dumps(key) + b":")


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


def _call_deltas(position: int, call: Call) -> list[dict[str, Any]]:
    """A call as chat streams it: its id, type and name, then its whole `arguments`."""
    return [{"tool_calls": [{"index": position, "id": call.id, "type": "function",
                             "function": {"name": call.name, "arguments": ""}}]},
            {"tool_calls": [{"index": position, "function": {"arguments": call.arguments}}]}]


def completion_chunks(ident: StreamIdentity, result: TurnResult, include_usage: bool,
                      announced: Collection[int] = (0,),
                      reasoning_keys: tuple[str, ...] = ("reasoning_content",),
                      ) -> Iterator[bytes]:
    """Every chunk after the role chunk(s) for the turn's result, through `[DONE]` (the
    reasoning under `reasoning_keys`).

    Choices in `announced` had their role chunk already (`role_chunks`); any other gets it
    here, and an announced choice the result does not hold is closed, so that every
    choice a client saw begin also ends.
    """
    rendered = set()
    for choice in result.choices:
        index = choice.index
        if index not in announced:
            yield _delta(ident, index, {"role": "assistant", "content": ""})
        rendered.add(index)
        if choice.reasoning:
            for key in reasoning_keys:
                yield _delta(ident, index, {key: choice.reasoning})
        logprobs = choice.logprobs  # the whole answer's, once, with its text
        if choice.content:
            yield _delta(ident, index, {"content": choice.content}, logprobs=logprobs)
            logprobs = None
        if choice.refusal:
            yield _delta(ident, index, {"refusal": choice.refusal})
        for position, call in enumerate(choice.calls):
            for delta in _call_deltas(position, call):
                yield _delta(ident, index, delta)
        yield _delta(ident, index, {}, choice.finish, logprobs=logprobs)
    for index in sorted(announced):
        if index not in rendered:
            yield _delta(ident, index, {}, STOP)
    usage = usage_of(result.usage)
    if include_usage and usage:
        yield ident.opening + b'],"usage":' + orjson.dumps(usage) + b"}\n\n"
    yield DONE


def _after(text: str | None, sent: str) -> str | None:
    """A choice's text with what went out live taken off (`unsent`; none stays none)."""
    return None if text is None else unsent(text, sent)


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
        # what went out live, in pieces: (choice, "reasoning" | "content")
        self._sent: dict[tuple[int, str], list[str]] = {}
        self._openings: dict[tuple[int, str], bytes] = {}  # (choice, key): `text_opening`

    @classmethod
    def for_plan(cls, plan: TurnPlan[None]) -> ChatStream:
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
        self._sent.setdefault((choice, kind), []).append(text)
        written = orjson.dumps(text)
        openings = self._openings
        for key in keys:
            opening = openings.get((choice, key))
            if opening is None:
                opening = openings[choice, key] = text_opening(self.ident, choice, key)
            out += opening + written + _TEXT_END
        return out

    def reasoning(self, text: str, choice: int = 0) -> bytes:
        """A reasoning delta, under the configured field name(s)."""
        return self._live(choice, "reasoning", self.reasoning_keys, text)

    def text(self, text: str, choice: int = 0) -> bytes:
        """A content delta."""
        return self._live(choice, "content", ("content",), text)

    def answer(self, result: TurnResult) -> bytes:
        """The chunks of `result` not yet sent, through `[DONE]`, in one piece."""
        if self._sent:
            result = dataclasses.replace(result, choices=tuple(
                self._unsent(choice) for choice in result.choices))
        return b"".join(completion_chunks(self.ident, result, self.include_usage,
                                          self._announced, self.reasoning_keys))

    def _unsent(self, choice: Choice) -> Choice:
        """`choice` less the reasoning and content that went out live (`unsent`)."""
        reasoning = "".join(self._sent.get((choice.index, "reasoning"), ()))
        content = "".join(self._sent.get((choice.index, "content"), ()))
        return dataclasses.replace(choice, reasoning=_after(choice.reasoning, reasoning),
                                   content=_after(choice.content, content))

    def error(self, error: ProxyError) -> bytes:
        """OpenAI's in-stream error (`data: {"error": …}`), then `[DONE]`."""
        return error_event(worded(error, "messages").body()) + DONE


def reasoning_keys(field: str) -> tuple[str, ...]:
    """The message fields the `reasoning_field` setting writes the reasoning under (the chat
    wire's own choice: vLLM's `reasoning_content`, `reasoning`, both, or none)."""
    return {"both": ("reasoning_content", "reasoning"), "drop": ()}.get(field, (field,))


def usage_of(usage: Usage | None) -> dict[str, Any] | None:
    """The turn's usage as chat reports it: the counts upstream gave, and their details."""
    if usage is None:
        return None
    out: dict[str, Any] = {key: value for key in ("prompt_tokens", "completion_tokens",
                                                  "total_tokens")
                           if (value := getattr(usage, key)) is not None}
    if usage.prompt_details:
        out["prompt_tokens_details"] = dict(usage.prompt_details)
    if usage.completion_details:
        out["completion_tokens_details"] = dict(usage.completion_details)
    return out


def message_of(choice: Choice, reasoning_keys: tuple[str, ...]) -> dict[str, Any]:
    """A choice's `message`: content, the reasoning under `reasoning_keys`, a refusal, the
    calls (`function.arguments` a JSON object as text)."""
    message: dict[str, Any] = {"role": "assistant", "content": choice.content}
    if choice.reasoning is not None:
        message.update(dict.fromkeys(reasoning_keys, choice.reasoning))
    if choice.refusal is not None:
        message["refusal"] = choice.refusal
    if choice.calls:
        message["tool_calls"] = [{"id": call.id, "type": "function", "function": {
            "name": call.name, "arguments": call.arguments}} for call in choice.calls]
    return message


def completion_of(result: TurnResult,
                  reasoning_keys: tuple[str, ...] = ("reasoning_content",)) -> dict[str, Any]:
    """The turn's result as OpenAI's chat completion (the reasoning under `reasoning_keys`;
    vLLM's `stop_reason`, which OpenAI's schema does not have, left out; an id and a time of
    its own when upstream gave none)."""
    completion: dict[str, Any] = {
        "id": result.id or f"chatcmpl-{random_alnum(24)}", "object": "chat.completion",
        "created": int(time.time()) if result.created is None else result.created,
        "model": result.model,
        "choices": [{"index": choice.index, "message": message_of(choice, reasoning_keys),
                     "logprobs": choice.logprobs, "finish_reason": choice.finish}
                    for choice in result.choices]}
    usage = usage_of(result.usage)
    if usage is not None:
        completion["usage"] = usage
    for key in ("system_fingerprint", "service_tier"):
        if (value := getattr(result, key)) is not None:
            completion[key] = value
    return completion


def parse(incoming: Incoming, config: Config) -> TurnPlan[None] | PassthroughPlan:
    """The client's body is a chat completion already: planned as it is, the reasoning left
    out of the turn when `reasoning_field` (this wire's setting alone) drops it."""
    plan = plan_chat(incoming.body, config)
    if isinstance(plan, TurnPlan) and plan.config.reasoning_field == "drop":
        return replaced(plan, extraction=replaced(plan.extraction, reasoning_shown=False))
    return plan


def render_json(plan: TurnPlan[None], result: TurnResult) -> bytes:
    """The completion, as the body of a non-streaming answer (the reasoning under the
    fields `reasoning_field` names)."""
    return orjson.dumps(completion_of(result, reasoning_keys(plan.config.reasoning_field)))


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


FRONT: Front[None] = Front(
    NAME, (Route("POST", PATH),), parse, render_json, ChatStream.for_plan, error_response,
    key_headers=("Authorization", "Api-Key"), upstream_path=None,
    sample=Sample(sample_request, sample_calls))
