"""What a client got for one turn, read from the bytes it received: a chat completion as JSON
or as its event stream (assembled by the turn's own `StreamAssembler`), an error in either.
Pure: bytes in, a `Reading` out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ...turn.assemble import StreamAssembler


@dataclass(frozen=True)
class Call:
    """One call as delivered: the tool's name and its `arguments` text."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Reading:
    """One answer as its client read it: the HTTP status, the error it carried (None:
    none), the content and reasoning text, the calls, the finish reason; and what it cost
    (upstream requests, seconds)."""

    status: int | None
    error: str | None = None
    content: str = ""
    reasoning: str = ""
    calls: tuple[Call, ...] = ()
    finish: str | None = None
    requests: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def answered(self) -> bool:
        """An answer came (HTTP 200, no error in it)."""
        return self.status == 200 and self.error is None

    def same_answer(self, other: Reading) -> bool:
        """Whether `other` says what this one says: the same calls (arguments as data), the
        same content (trimmed) and finish; or the same failure."""
        if not (self.answered and other.answered):
            return self.answered == other.answered and self.status == other.status
        return (_calls(self) == _calls(other) and self.content.strip() == other.content.strip()
                and self.finish == other.finish)


def _calls(reading: Reading) -> list[tuple[str, Any]]:
    out = []
    for call in reading.calls:
        try:
            arguments: Any = orjson.loads(call.arguments)
        except orjson.JSONDecodeError:
            arguments = call.arguments
        out.append((call.name, orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)))
    return out


def failed(status: int | None, error: str, **cost: Any) -> Reading:
    """No answer: the request failed (no status: the network)."""
    return Reading(status, error or "failed", **cost)


def read_completion(status: int, body: bytes, **cost: Any) -> Reading:
    """A chat completion answered as one JSON body (or an error in its place)."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return Reading(status, "the answer is not JSON", **cost)
    if status >= 400:
        return Reading(status, error_text(answer, body), **cost)
    return _from_completion(status, answer, cost)


def read_stream(status: int, body: bytes, **cost: Any) -> Reading:
    """A chat completion answered as server-sent events, up to `[DONE]`; an error event
    in it is the answer's error."""
    if status >= 400:
        return read_completion(status, body, **cost)
    assembler = StreamAssembler()
    done = False
    for line in body.splitlines():
        if not line.startswith(b"data:"):
            continue  # comments (heartbeats), event names, blank lines
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            break
        try:
            assembler.feed(orjson.loads(data))
        except orjson.JSONDecodeError:
            return Reading(status, "a stream event is not JSON", **cost)
    if assembler.error is not None:
        return Reading(status, error_text(assembler.error, b""), **cost)
    if not done:
        return Reading(status, "the stream ended without [DONE]", **cost)
    return _from_completion(status, assembler.completion(), cost)


def _from_completion(status: int, answer: Any, cost: dict[str, Any]) -> Reading:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        return Reading(status, "the answer is not a chat completion", **cost)
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        calls.append(Call(str(function.get("name") or ""),
                          arguments if isinstance(arguments, str)
                          else orjson.dumps(arguments).decode()))
    reasoning = next((message[key] for key in ("reasoning_content", "reasoning")
                      if isinstance(message.get(key), str)), "")
    content = message.get("content")
    finish = choice.get("finish_reason")
    return Reading(status, None, content if isinstance(content, str) else "", reasoning,
                   tuple(calls), finish if isinstance(finish, str) else None, **cost)


def error_text(answer: Any, body: bytes) -> str:
    """The message of an error answer (OpenAI's envelope, a flat one, or raw text)."""
    if isinstance(answer, dict):
        inner = answer.get("error")
        if isinstance(inner, str):
            return inner
        detail = inner if isinstance(inner, dict) else answer
        for key in ("message", "detail"):
            if isinstance(message := detail.get(key), str):
                return message
    return body[:200].decode("utf-8", "replace").strip() or "no message"
