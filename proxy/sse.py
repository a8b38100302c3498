"""A chat completion as OpenAI's SSE stream of `chat.completion.chunk`s, plus heartbeats."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from .ids import random_alnum

DONE = b"data: [DONE]\n\n"
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


def event(payload: Any) -> bytes:
    """One SSE `data:` event."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


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
                      include_usage: bool, announced: int = 1) -> Iterator[bytes]:
    """Every chunk after the role chunk(s) for a normalised completion, through `[DONE]`.

    Choices below `announced` had their role chunk already (`role_chunks`); any other gets
    it here, and an announced choice the completion does not hold is closed, so that every
    choice a client saw begin also ends.
    """
    rendered = set()
    for choice in completion["choices"]:
        index = choice["index"]
        message = choice["message"]
        if not 0 <= index < announced:
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
    for index in range(announced):
        if index not in rendered:
            yield _delta(ident, index, {}, "stop")
    if include_usage and completion.get("usage"):
        yield _chunk(ident, [], usage=completion["usage"])
    yield DONE


_EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")


class SseEvents:
    """Relayed SSE bytes cut at event boundaries: a piece ending mid-event keeps its tail
    until the event is whole, so that a stream that breaks off never hands the client half
    an event (which it would fail to parse) before the proxy's error event."""

    MAX_PENDING = 1 << 20  # an event longer than this is passed on in pieces regardless

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._seam = b""  # the last bytes held, where a boundary may begin

    @property
    def pending(self) -> bytes:
        """The bytes held: the start of an event not yet whole."""
        return b"".join(self._parts)

    def complete(self, data: bytes) -> bytes:
        """The whole events `data` completes; the rest is held (each byte is searched once
        for a boundary, whatever the length of the event)."""
        if not data:
            return b""
        if not self._parts and data.endswith(b"\n\n"):  # the usual piece: whole events
            self._seam = data[-3:]
            return data
        seam = self._seam
        probe = seam + data
        self._seam = probe[-3:]
        end = max((at + len(blank) for blank in _EVENT_ENDS
                   if (at := probe.rfind(blank)) >= 0), default=0) - len(seam)
        if end <= 0 and self._size + len(data) <= self.MAX_PENDING:
            self._parts.append(data)
            self._size += len(data)
            return b""
        if end <= 0:
            end = len(data)
        out = b"".join([*self._parts, data[:end]])
        self._parts = [data[end:]] if end < len(data) else []
        self._size = len(data) - end
        self._seam = data[end:][-3:] if end < len(data) else probe[-3:]
        return out
