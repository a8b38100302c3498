"""Upstream stream chunks → the chat completion they add up to (the streamed mode).

Pure: each `chat.completion.chunk` is fed in as it came; `completion()` is the answer the
upstream would have sent with `stream: false`, which then goes through the same decisions as
a buffered one (`core.decide`). The upstream's own streamed tool calls are accumulated here,
never passed on piecemeal: argument chunks that are deltas are joined, chunks that are
cumulative snapshots (llama.cpp) are told apart and the last one kept, and an `index` or `id`
that is missing or reused is repaired.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, NamedTuple

import orjson

from ..base.ids import random_alnum

# What a choice's delta says that the client may see as it comes.
REASONING = "reasoning"
CONTENT = "content"


class Piece(NamedTuple):
    """New text of one choice: its reasoning or its content (a tuple: a few made a token)."""

    choice: int
    kind: str  # REASONING or CONTENT
    text: str


@dataclass
class _Call:
    """One tool call as its chunks came: the upstream's index and id, its name, and every
    `arguments` piece (deltas or snapshots, decided at the end)."""

    index: int | None
    id: str | None = None
    name: str = ""
    pieces: list[Any] = field(default_factory=list)


def arguments_of(pieces: list[Any]) -> Any:
    """A call's arguments from its streamed pieces. Deltas are joined; cumulative snapshots
    (llama.cpp: each piece the whole arguments so far, so each one starts with the one
    before) give the last. Pieces that could be either are read as deltas when that gives a
    JSON object, else as snapshots."""
    objects = [piece for piece in pieces if isinstance(piece, dict)]
    if objects:  # a server that sends the arguments as an object: the last one
        return objects[-1]
    texts = [piece for piece in pieces if isinstance(piece, str) and piece]
    if len(texts) < 2:
        return texts[0] if texts else ""
    joined = "".join(texts)
    chained = all(later.startswith(earlier)
                  for earlier, later in pairwise(texts))
    return texts[-1] if chained and not _json_object(joined) else joined


def _json_object(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


@dataclass
class _Choice:
    """Everything one choice's deltas said."""

    index: int
    content: list[str] = field(default_factory=list)
    reasoning: dict[str, list[str]] = field(default_factory=dict)  # by the upstream's key
    refusal: list[str] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    by_index: dict[int, _Call] = field(default_factory=dict)
    by_id: dict[str, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    logprobs: dict[str, list[Any]] | None = None

    def call_for(self, piece: dict[str, Any]) -> _Call:
        """The call a tool-call delta continues, or a new one. A delta with an id seen
        before continues that call; an id new at a known index starts a new call there
        (servers that give every call index 0), unless that call had no id yet; without an
        id, the call at the delta's index continues, and without either the last call does,
        unless the delta names another function."""
        index = piece.get("index")
        index = index if isinstance(index, int) else None
        call_id = piece.get("id") if isinstance(piece.get("id"), str) and piece["id"] else None
        current = self.by_index.get(index) if index is not None else (
            self.calls[-1] if self.calls else None)
        function = piece.get("function")
        function = function if isinstance(function, dict) else {}
        name = function.get("name")
        if (index is None and call_id is None and current is not None and current.name
                and isinstance(name, str) and name and not current.name.startswith(name)
                and not name.startswith(current.name)):
            current = None  # neither id nor index: another function named starts a call
        if call_id is not None:
            if call_id in self.by_id:
                return self.by_id[call_id]
            if current is not None and current.id is None:
                current.id = call_id
                self.by_id[call_id] = current
                return current
            current = None
        if current is None:
            current = _Call(index, call_id)
            self.calls.append(current)
            if call_id is not None:
                self.by_id[call_id] = current
        if index is not None:
            self.by_index[index] = current
        return current

    def message(self) -> dict[str, Any]:
        """The choice's message as a non-streaming answer holds it."""
        content = "".join(self.content)
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        for key, parts in self.reasoning.items():
            message[key] = "".join(parts)
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        calls = []
        for call in self.calls:
            calls.append({"id": call.id, "type": "function",
                          "function": {"name": call.name or None,
                                       "arguments": arguments_of(call.pieces)}})
        if calls:
            message["tool_calls"] = calls
        return message


class StreamAssembler:
    """Adds up the chunks of one upstream stream."""

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}
        self._choices: dict[int, _Choice] = {}
        self.usage: Any = None
        self.error: dict[str, Any] | None = None  # an error event the upstream sent instead

    def feed(self, chunk: Any) -> list[Piece]:
        """Take one decoded chunk; the reasoning and content text it adds, in order."""
        if not isinstance(chunk, dict):
            return []
        if "error" in chunk or chunk.get("object") == "error":
            self.error = self.error or chunk
            return []
        if not self._head:
            self._head = {key: chunk[key] for key in ("id", "created", "model",
                                                      "system_fingerprint") if key in chunk}
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        pieces: list[Piece] = []
        for part in chunk.get("choices") or ():
            if isinstance(part, dict):
                self._take(part, pieces)
        return pieces

    def _take(self, part: dict[str, Any], pieces: list[Piece]) -> None:
        index = part.get("index")
        index = index if isinstance(index, int) else 0
        choice = self._choices.get(index)
        if choice is None:
            choice = self._choices[index] = _Choice(index)
        delta = part.get("delta")
        if (type(delta) is dict and len(delta) == 1 and type(content := delta.get("content"))
                is str and part.get("finish_reason") is None and part.get("logprobs") is None):
            # the common token: a delta holding only content (what the general path does)
            if content:
                choice.content.append(content)
                pieces.append(Piece(index, CONTENT, content))
            return
        delta = delta if isinstance(delta, dict) else {}
        reasoning_key = ("reasoning_content" if isinstance(delta.get("reasoning_content"), str)
                         else "reasoning")
        reasoning = delta.get(reasoning_key)
        if isinstance(reasoning, str) and reasoning:
            choice.reasoning.setdefault(reasoning_key, []).append(reasoning)
            if reasoning_key == "reasoning_content" or "reasoning_content" not in choice.reasoning:
                pieces.append(Piece(index, REASONING, reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            choice.content.append(content)
            pieces.append(Piece(index, CONTENT, content))
        if isinstance(delta.get("refusal"), str):
            choice.refusal.append(delta["refusal"])
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._call_delta(choice, call)
        if isinstance(part.get("finish_reason"), str):
            choice.finish_reason = part["finish_reason"]
        logprobs = part.get("logprobs")
        if isinstance(logprobs, dict):
            kept = choice.logprobs = choice.logprobs or {"content": [], "refusal": []}
            for key in ("content", "refusal"):
                if isinstance(logprobs.get(key), list):
                    kept[key].extend(logprobs[key])

    @staticmethod
    def _call_delta(choice: _Choice, piece: dict[str, Any]) -> None:
        call = choice.call_for(piece)
        function = piece.get("function")
        function = function if isinstance(function, dict) else {}
        name = function.get("name")
        if isinstance(name, str) and name and not call.name.endswith(name):
            # Names come whole (OpenAI, vLLM) or again in every snapshot (llama.cpp).
            call.name = name if name.startswith(call.name) else call.name + name
        arguments = function.get("arguments")
        if isinstance(arguments, (str, dict)):
            call.pieces.append(arguments)

    def completion(self) -> dict[str, Any]:
        """The chat completion the chunks so far add up to, in the shape of a non-streaming
        answer (what `core.decide` reads)."""
        head = self._head
        completion: dict[str, Any] = {
            "id": head.get("id") if isinstance(head.get("id"), str) else (
                "chatcmpl-" + random_alnum(24)),
            "object": "chat.completion",
            "created": head.get("created") if isinstance(head.get("created"), int) else int(
                time.time()),
            "model": head.get("model") if isinstance(head.get("model"), str) else "",
            "choices": [{"index": choice.index, "message": choice.message(),
                         "logprobs": choice.logprobs, "finish_reason": choice.finish_reason}
                        for _, choice in sorted(self._choices.items())],
        }
        if isinstance(head.get("system_fingerprint"), str):
            completion["system_fingerprint"] = head["system_fingerprint"]
        if self.usage is not None:
            completion["usage"] = self.usage
        return completion
