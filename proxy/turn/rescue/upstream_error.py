"""An upstream's parse failure read for the model's text it holds: llama.cpp's server answers a
tool turn whose output its own chat parser cannot read with an error carrying that output, and
the turn goes on as if the upstream had answered it (`rescued`, data to data).

What each server writes, read in its source:

- llama.cpp, builds of its PEG chat parser (b8475 to b9768, 2026): `common/chat.cpp`
  `common_chat_peg_parse` throws `std::runtime_error("Failed to parse input at pos " +
  std::to_string(result.end) + ": " + effective_input.substr(result.end))`, where
  `effective_input` is the template's generation prompt followed by the model's output. The
  server's `format_error_response` wraps any such exception as `{"code": 500, "message": …,
  "type": "server_error"}`: the body `{"error": {…}}` with HTTP 500 when the answer is not
  streamed or fails on its first result (`handle_completions_impl`: "the first error must be
  treated as non-stream response"), else an event `data: {"error": {…}}` that ends the stream
  without `[DONE]`. The message holds the text from the position the parse stopped at, not
  what came before it (already parsed: the content before a call, which a stream has sent).
  Builds from b9769 throw "The model produced output that does not match the expected <format>
  format" and keep the text in the server's log only: nothing to read.
- Ollama (`server/routes.go`, `model/parsers/*.go`): a builtin parser's error (`incomplete GLM
  tool call: …`, an XML syntax error, `invalid format`) ends the turn with `{"error": "…"}`,
  HTTP 500 unstreamed or the last NDJSON line streamed; the message never holds the model's
  output: nothing to read.

A rescue is taken only where what it recovers is an answer: the error held the whole output
(the parse stopped at its first byte), or the part it holds is read as a call. A fragment
that holds no call is not the model's answer, and the error stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

LLAMA_CPP = "llama.cpp"
NOTE = "upstream_error_rescued"  # the log line's note, `upstream_error_rescued:<server>`

# `common_chat_peg_parse`'s message: the position (bytes into the generation prompt and the
# output) and the text from there to the end.
_LLAMA_CPP_PARSE = re.compile(r"Failed to parse input at pos (\d+): (.*)\Z", re.DOTALL)


@dataclass(frozen=True)
class Rescued:
    """The model's text an upstream's error held: from which server, the text, and whether
    it is the whole output (`whole`: the parse stopped at its first byte) or only its end."""

    server: str
    text: str
    whole: bool

    @property
    def note(self) -> str:
        """The log line's note for it."""
        return f"{NOTE}:{self.server}"


def rescued(error: Any) -> Rescued | None:
    """The model's text the upstream's error body (decoded JSON: `{"error": {"message"}}`, an
    in-stream error event, or a bare message) holds, or None where it holds none."""
    message = _message(error)
    if message is None:
        return None
    found = _LLAMA_CPP_PARSE.match(message)
    if found is None or not found.group(2).strip():
        return None
    return Rescued(LLAMA_CPP, found.group(2), whole=int(found.group(1)) == 0)


def _message(error: Any) -> str | None:
    """The error's message: `error.message`, a string `error`, or the body itself."""
    if isinstance(error, str):
        return error
    if not isinstance(error, dict):
        return None
    inner = error.get("error", error)
    if isinstance(inner, str):
        return inner
    if isinstance(inner, dict) and isinstance(message := inner.get("message"), str):
        return message
    return None


def as_completion(rescue: Rescued, model: str = "",
                  sent: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chat completion the upstream would have answered with the rescued text: the
    message a stream already `sent` of the answer (its reasoning kept, its content followed
    by the text the error held; its partial calls dropped, read from the same text), or the
    text alone."""
    message = {key: value for key, value in (sent or {}).items() if key != "tool_calls"}
    message["role"] = "assistant"
    message["content"] = (message.get("content") or "") + rescue.text
    return {"id": "chatcmpl-rescued", "object": "chat.completion", "created": 0,
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "stop"}]}
