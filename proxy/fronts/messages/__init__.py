"""The Anthropic Messages front (`POST /v1/messages`): Claude Code and every Messages client.

Its request is translated to a chat completion (`request`) and answered by the same turn
as the chat front's; the turn's completion comes back as an Anthropic `message`, or as its
event stream: `message_start`, per content block `content_block_start` → `content_block_delta`
(`thinking_delta`, `text_delta`, `input_json_delta` holding the call's arguments JSON) →
`content_block_stop`, then `message_delta` (stop_reason, usage) and `message_stop`.
Heartbeats are `event: ping`; errors use Anthropic's envelope and error types.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import orjson

from ...config import Config
from ...errors import ProxyError
from ...ids import random_alnum
from ...sse import named_event
from ...turn.context_window import overflow_of, refuses_window
from ...turn.plan import TurnPlan, parse_body, plan_turn
from .. import (
    COUNT,
    Counter,
    CountRequest,
    ErrorResponse,
    Front,
    Incoming,
    Route,
    Sample,
    unsent,
)
from .request import estimate_tokens, tokenize_body, translate
from .sample import sample_calls, sample_request

NAME = "messages"
PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
PING = named_event("ping", {"type": "ping"})

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}
_OVERLOADED = (503, 529)  # an upstream (or a stopping proxy) that refuses for load
_STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}


@dataclass(frozen=True)
class MessagesPlan:
    """What rendering needs from the request (the turn's `front` data)."""

    model: str
    stop_sequences: tuple[str, ...] = ()


def parse(incoming: Incoming, config: Config) -> TurnPlan:
    """A Messages request as a turn: translated to a chat body, then planned as the chat
    front's turns are (every Messages request is a turn, with or without tools)."""
    body = parse_body(incoming.body)
    model = body.get("model")
    config = config.for_model(model if isinstance(model, str) else "")
    request = translate(body, config)
    plan = plan_turn(request.body, config, client_stream=request.stream, include_usage=False,
                     front=MessagesPlan(request.model, request.stop_sequences))
    return dataclasses.replace(
        plan, extraction=dataclasses.replace(plan.extraction, keep_stop_reason=True),
        rewrites=(*request.rewrites, *plan.rewrites))


def _tool_id(call_id: str) -> str:
    """A chat call id as an Anthropic tool_use id (`call_X` → `toolu_X`, else a fresh one)."""
    tail = call_id.removeprefix("call_")
    return "toolu_" + (tail if tail.isalnum() and tail != call_id else random_alnum(24))


def _reasoning(message: dict[str, Any]) -> str:
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return reasoning if isinstance(reasoning, str) else ""


def _tool_uses(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(id, name, arguments JSON) of each call, in order."""
    return [(_tool_id(call["id"]), call["function"]["name"], call["function"]["arguments"])
            for call in message.get("tool_calls") or ()]


def stop_of(choice: dict[str, Any], stop_sequences: tuple[str, ...]) -> tuple[str, str | None]:
    """Anthropic's `stop_reason` and `stop_sequence` for a finished choice: a plain stop is
    `stop_sequence` when vLLM's `stop_reason` names one of the request's stop strings."""
    finish = choice.get("finish_reason")
    if finish == "stop" and choice.get("stop_reason") in stop_sequences:
        return "stop_sequence", choice["stop_reason"]
    return _STOP_REASONS.get(finish, "end_turn"), None


def usage_of(usage: Any) -> dict[str, int]:
    """Chat usage as Anthropic's: input tokens not read from the prefix cache, those read,
    and output tokens (the three input counts add up to the prompt, as Anthropic's do)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt = usage.get("prompt_tokens", 0)
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
    cached = cached if isinstance(cached, int) else 0
    return {"input_tokens": max(prompt - cached, 0), "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
            "output_tokens": usage.get("completion_tokens", 0)}


def _message_shell(message_id: str, model: str) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None}


def message_of(plan: TurnPlan, completion: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic `message` for a finished completion (its first choice)."""
    front: MessagesPlan = plan.front
    choice = completion["choices"][0]
    message = choice["message"]
    out = _message_shell("msg_" + random_alnum(24), front.model)
    content = out["content"]
    if reasoning := _reasoning(message):
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    content.extend({"type": "tool_use", "id": tool_id, "name": name,
                    "input": orjson.Fragment(arguments)}  # the arguments, byte for byte
                   for tool_id, name, arguments in _tool_uses(message))
    out["stop_reason"], out["stop_sequence"] = stop_of(choice, front.stop_sequences)
    out["usage"] = usage_of(completion.get("usage"))
    return out


def render_json(plan: TurnPlan, completion: dict[str, Any]) -> bytes:
    """The body of a non-streaming answer."""
    return orjson.dumps(message_of(plan, completion))


_DELTAS = {"thinking": "thinking_delta", "text": "text_delta"}


class MessagesStream:
    """One Messages event stream: `message_start`, pings, live thinking and text deltas,
    then the rest of the message through `message_stop`."""

    content_type = "text/event-stream"

    def __init__(self, model: str, stop_sequences: tuple[str, ...] = ()) -> None:
        self.id = "msg_" + random_alnum(24)
        self.model = model
        self.stop_sequences = stop_sequences
        self._blocks = 0  # blocks started so far
        self._open: str | None = None  # the kind of the block still open
        self._sent = {"thinking": "", "text": ""}

    @classmethod
    def for_plan(cls, plan: TurnPlan) -> MessagesStream:
        """The stream for a planned turn, with a fresh message id."""
        return cls(plan.front.model, plan.front.stop_sequences)

    def head(self) -> bytes:
        """`message_start`: the message with no content yet (usage comes at its end)."""
        message = {**_message_shell(self.id, self.model),
                   "usage": {"input_tokens": 0, "output_tokens": 0}}
        return named_event("message_start", {"type": "message_start", "message": message})

    def heartbeat(self) -> bytes:
        """`event: ping` (Claude Code counts it as life on the stream)."""
        return PING

    def _start(self, block: dict[str, Any]) -> bytes:
        self._blocks += 1
        return named_event("content_block_start", {"type": "content_block_start",
                                                   "index": self._blocks - 1,
                                                   "content_block": block})

    def _block_delta(self, delta: dict[str, Any]) -> bytes:
        return named_event("content_block_delta", {"type": "content_block_delta",
                                                   "index": self._blocks - 1, "delta": delta})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return named_event("content_block_stop", {"type": "content_block_stop",
                                                  "index": self._blocks - 1})

    def _live(self, kind: str, text: str) -> bytes:
        if not text:
            return b""
        out = b""
        if self._open != kind:
            out = self._close() + self._start(
                {"type": "thinking", "thinking": "", "signature": ""} if kind == "thinking"
                else {"type": "text", "text": ""})
            self._open = kind
        self._sent[kind] += text
        return out + self._block_delta({"type": _DELTAS[kind], kind: text})

    def reasoning(self, text: str, choice: int = 0) -> bytes:
        """A thinking delta (in a thinking block, opened if need be)."""
        return self._live("thinking", text) if choice == 0 else b""

    def text(self, text: str, choice: int = 0) -> bytes:
        """A text delta (in a text block, opened if need be)."""
        return self._live("text", text) if choice == 0 else b""

    def answer(self, completion: dict[str, Any]) -> bytes:
        """The rest of the message: thinking and text not yet sent, each tool call as a
        tool_use block with its arguments in one `input_json_delta`, `message_delta`,
        `message_stop`."""
        choice = completion["choices"][0]
        message = choice["message"]
        out = [self._live("thinking", unsent(_reasoning(message), self._sent["thinking"])),
               self._live("text", unsent(message.get("content") or "", self._sent["text"])),
               self._close()]
        for tool_id, name, arguments in _tool_uses(message):
            out.append(self._start({"type": "tool_use", "id": tool_id, "name": name,
                                    "input": {}}))
            out.append(self._block_delta({"type": "input_json_delta",
                                          "partial_json": arguments}))
            self._open = "tool_use"
            out.append(self._close())
        stop_reason, stop_sequence = stop_of(choice, self.stop_sequences)
        out.append(named_event("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": usage_of(completion.get("usage"))}))
        out.append(named_event("message_stop", {"type": "message_stop"}))
        return b"".join(out)

    def error(self, error: ProxyError) -> bytes:
        """`event: error` with Anthropic's envelope; the stream ends after it."""
        return named_event("error", error_body(error)[1])


def error_body(error: ProxyError) -> tuple[int, dict[str, Any]]:
    """The HTTP status and Anthropic's envelope for an error: its status mapped to
    Anthropic's types (503 and 529, refusals for load, as 529 overloaded_error)."""
    status = error.status
    if status in _OVERLOADED:
        status, kind = 529, "overloaded_error"
    elif status in _ERROR_TYPES:
        kind = _ERROR_TYPES[status]
    elif 400 <= status < 500:
        kind = "invalid_request_error"
    else:
        status, kind = max(status, 500), "api_error"
    return status, {"type": "error", "error": {"type": kind, "message": _message(error)}}


def _message(error: ProxyError) -> str:
    """The error's message; a context window's refusal in Anthropic's words, which Claude
    Code acts on (it lowers `max_tokens`, or compacts the conversation, by the numbers)."""
    if not refuses_window(error.status, error.message):
        return error.message
    overflow = overflow_of(error.message)
    if overflow is None:  # said without counts: the upstream's words after Anthropic's
        return f"prompt is too long: {error.message}"
    if overflow.leaves_no_room:
        return f"prompt is too long: {overflow.prompt} tokens > {overflow.window} maximum"
    return (f"input length and `max_tokens` exceed context limit: {overflow.prompt} + "
            f"{overflow.asked} > {overflow.window}, decrease input length or `max_tokens` "
            "and try again")


def error_response(error: ProxyError) -> ErrorResponse:
    """The error before any stream started: Anthropic's envelope and status, with the
    error's headers (`retry-after`, `WWW-Authenticate`)."""
    status, body = error_body(error)
    return ErrorResponse(status, orjson.dumps(body), error.headers)


def count_request(incoming: Incoming, config: Config) -> CountRequest:
    """`POST /v1/messages/count_tokens`: the same translation as a turn's (so that the count
    is of the prompt the turn would send), as a /tokenize body and as an estimate."""
    body = parse_body(incoming.body)
    model = body.get("model")
    config = config.for_model(model if isinstance(model, str) else "")
    chat = translate(body, config, for_count=True).body
    return CountRequest(chat["model"], config, orjson.dumps(tokenize_body(chat)),
                        estimate_tokens(chat))


def count_of(status: int, body: bytes) -> int | None:
    """The prompt's token count in a /tokenize answer, or None when it holds none."""
    if status != 200:
        return None
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    count = answer.get("count") if isinstance(answer, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def count_response(count: int) -> bytes:
    """The count_tokens answer."""
    return orjson.dumps({"input_tokens": count})


FRONT = Front(NAME, (Route("POST", PATH), Route("POST", COUNT_TOKENS_PATH, COUNT)), parse,
              render_json, MessagesStream.for_plan, error_response,
              key_headers=("X-Api-Key", "Authorization"),
              counter=Counter(count_request, count_of, count_response),
              sample=Sample(sample_request, sample_calls))
