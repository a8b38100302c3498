"""The Ollama front's NDJSON stream (`application/x-ndjson`, one JSON object a line): content
and thinking as they come, the calls whole in a line of their own, then the `done` line.

A heartbeat is what Ollama itself sends while its parser holds text back: a line with empty
`content` and `done: false`. Every Ollama client reads it as nothing (the official Python
and JavaScript clients parse each line as a `ChatResponse`; Home Assistant adds its empty
content to the message), where a blank line or a comment would break their line parsers.
An error once the stream has started is Ollama's `{"error": "…"}` line, which the clients
raise; the stream ends after it."""

from __future__ import annotations

import orjson

from ...base.errors import ProxyError
from ...turn.plan import TurnPlan
from ...turn.result import TurnResult
from .. import unsent
from .errors import message_of
from .output import OllamaData, finished, piece


def _line(value: object) -> bytes:
    return orjson.dumps(value) + b"\n"


class OllamaStream:
    """One NDJSON answer stream (a `StreamWriter`)."""

    content_type = "application/x-ndjson"

    def __init__(self, data: OllamaData) -> None:
        self.data = data
        self._sent = {"thinking": "", "content": ""}

    @classmethod
    def for_plan(cls, plan: TurnPlan[OllamaData]) -> OllamaStream:
        """The stream for a planned turn."""
        return cls(plan.front_data)

    def head(self) -> bytes:
        """An empty line of the answer (the stream's headers go out with it)."""
        return self.heartbeat()

    def heartbeat(self) -> bytes:
        """A line with empty content, `done: false`: nothing to the answer."""
        return _line(piece(self.data))

    def reasoning(self, text: str, choice: int = 0) -> bytes:
        """A line of thinking."""
        if not text or choice:
            return b""
        self._sent["thinking"] += text
        return _line(piece(self.data, thinking=text))

    def text(self, text: str, choice: int = 0) -> bytes:
        """A line of content."""
        if not text or choice:
            return b""
        self._sent["content"] += text
        return _line(piece(self.data, text))

    def answer(self, result: TurnResult) -> bytes:
        """What of the answer did not go out live: thinking, content, a line with the calls,
        then the `done` line with its reason, durations and counts."""
        choice = result.first
        out = [self.reasoning(unsent(choice.reasoning or "", self._sent["thinking"])),
               self.text(unsent(choice.content or "", self._sent["content"]))]
        if choice.calls:
            out.append(_line(piece(self.data, calls=choice.calls)))
        out.append(_line(finished(self.data, result, piece(self.data))))
        return b"".join(out)

    def error(self, error: ProxyError) -> bytes:
        """Ollama's error line; the stream ends after it."""
        return _line({"error": message_of(error)})
