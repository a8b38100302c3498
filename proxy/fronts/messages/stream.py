"""The Messages front's event stream: `message_start`, pings, live thinking and text deltas,
then the rest of the message's content blocks through `message_stop`."""

from __future__ import annotations

from typing import Any

from ...base.errors import ProxyError
from ...base.ids import random_alnum
from ...base.sse import named_event
from ...turn.plan import TurnPlan
from ...turn.result import TurnResult
from .. import unsent
from .errors import error_body
from .output import MessagesData, content_blocks, message_shell, stop_of, usage_of

PING = named_event("ping", {"type": "ping"})
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
    def for_plan(cls, plan: TurnPlan[MessagesData]) -> MessagesStream:
        """The stream for a planned turn, with a fresh message id."""
        return cls(plan.front_data.model, plan.front_data.stop_sequences)

    def head(self) -> bytes:
        """`message_start`: the message with no content yet (usage comes at its end)."""
        message = {**message_shell(self.id, self.model),
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

    def answer(self, result: TurnResult) -> bytes:
        """The rest of the message: its content blocks (`content_blocks`, as the JSON
        message holds them), thinking and text less what went out live, each tool call as a
        tool_use block with its arguments in one `input_json_delta`; then `message_delta`,
        `message_stop`."""
        choice = result.first
        out = []
        for block in content_blocks(choice):
            kind = block["type"]
            if kind in _DELTAS:
                out.append(self._live(kind, unsent(block[kind], self._sent[kind])))
                continue
            out.append(self._close())
            out.append(self._start({**block, "input": {}}))
            out.append(self._block_delta({"type": "input_json_delta",
                                          "partial_json": block["input"]}))
            self._open = kind
        out.append(self._close())
        stop_reason, stop_sequence = stop_of(choice, self.stop_sequences)
        out.append(named_event("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": usage_of(result.usage)}))
        out.append(named_event("message_stop", {"type": "message_stop"}))
        return b"".join(out)

    def error(self, error: ProxyError) -> bytes:
        """`event: error` with Anthropic's envelope; the stream ends after it."""
        return named_event("error", error_body(error)[1])


