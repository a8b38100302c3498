"""The Responses API's event stream for one turn: `response.created` and
`response.in_progress` when it commits, a repeated `response.in_progress` as the heartbeat,
each output item from `response.output_item.added` to `.done` with its own events between,
then `response.completed` (`response.incomplete` when cut by the token limit) or
`response.failed`. Every event carries an increasing `sequence_number`; there is no `[DONE]`.

Reasoning and text may come live (`reasoning()`, `text()`, the streamed mode); `answer()`
then sends what they did not, so that the finished response is the same either way.
"""

from __future__ import annotations

from typing import Any

import orjson

from ...base.errors import ProxyError
from ...base.sse import named_event
from ...turn.plan import TurnPlan
from ...turn.result import TurnResult
from .. import unsent
from .output import (
    ResponsesData,
    failure_detail,
    final_response,
    message_item,
    output_items,
    reasoning_item,
    response_object,
    status_of,
    text_part,
)

COMMENT_HEARTBEAT = b": ping\n\n"


class _Live:
    """An item opened by live deltas: its place, id, kind and the text sent so far."""

    def __init__(self, kind: str, index: int, item_id: str) -> None:
        self.kind = kind
        self.index = index
        self.id = item_id
        self.sent = ""


class ResponsesStream:
    """One Responses event stream (a `StreamWriter`)."""

    content_type = "text/event-stream"

    def __init__(self, turn: ResponsesData, heartbeat_mode: str = "chunk") -> None:
        self.turn = turn
        self.heartbeat_mode = heartbeat_mode
        self._seq = 0
        self._done: list[dict[str, Any]] = []  # finished items, in output order
        self._live: _Live | None = None
        self._opened: list[_Live] = []  # every item live deltas opened, in order
        self._in_progress = orjson.dumps(response_object(turn, "in_progress", []))

    @classmethod
    def for_plan(cls, plan: TurnPlan[ResponsesData]) -> ResponsesStream:
        """The stream for a planned turn."""
        return cls(plan.front_data, plan.config.heartbeat_mode)

    def _event(self, kind: str, **fields: Any) -> bytes:
        self._seq += 1
        return named_event(kind, {"type": kind, "sequence_number": self._seq - 1, **fields})

    def _lifecycle(self, kind: str) -> bytes:
        """A `response.created`/`.in_progress` event around the one snapshot of the response
        in progress (serialised once: heartbeats repeat it)."""
        self._seq += 1
        return (b"event: " + kind.encode() + b'\ndata: {"type":"' + kind.encode()
                + b'","sequence_number":' + str(self._seq - 1).encode() + b',"response":'
                + self._in_progress + b"}\n\n")

    def head(self) -> bytes:
        """`response.created` then `response.in_progress`."""
        return self._lifecycle("response.created") + self._lifecycle("response.in_progress")

    def heartbeat(self) -> bytes:
        """A repeated `response.in_progress` (Codex resets its idle timer on any `data:`
        event, never on a comment) and/or an SSE comment (`heartbeat_mode`)."""
        frames = b""
        if self.heartbeat_mode in ("comment", "both"):
            frames += COMMENT_HEARTBEAT
        if self.heartbeat_mode in ("chunk", "both"):
            frames += self._lifecycle("response.in_progress")
        return frames

    # -- live deltas (the streamed mode) ------------------------------------------------------
    def _open(self, kind: str) -> bytes:
        out = self._close_live()
        index = len(self._done)
        live = _Live(kind, index, self.turn.item_id(kind, index))
        self._live = live
        self._opened.append(live)
        if kind == "reasoning":
            item = {"id": live.id, "type": "reasoning", "summary": [], "status": "in_progress"}
            part = {"type": "summary_text", "text": ""}
            return out + self._added(index, item) + self._event(
                "response.reasoning_summary_part.added", item_id=live.id, output_index=index,
                summary_index=0, part=part)
        item = message_item(self.turn, index, [], "in_progress")
        return out + self._added(index, item) + self._event(
            "response.content_part.added", item_id=live.id, output_index=index,
            content_index=0, part=text_part(""))

    def _delta(self, kind: str, text: str, event: str, **fields: Any) -> bytes:
        """A live delta of the item of `kind`, opened first unless it is the open one."""
        out = b"" if self._live and self._live.kind == kind else self._open(kind)
        live = self._live
        assert live is not None
        live.sent += text
        return out + self._event(event, item_id=live.id, output_index=live.index, delta=text,
                                 **fields)

    def reasoning(self, text: str, choice: int = 0) -> bytes:
        """Reasoning as it comes, as reasoning summary text."""
        if choice or not text:
            return b""
        return self._delta("reasoning", text, "response.reasoning_summary_text.delta",
                           summary_index=0)

    def text(self, text: str, choice: int = 0) -> bytes:
        """Visible text as it comes, as `output_text` deltas."""
        if choice or not text:
            return b""
        return self._delta("message", text, "response.output_text.delta", content_index=0,
                           logprobs=[])

    def _close_live(self, final: dict[str, Any] | None = None) -> bytes:
        """Finish the item live deltas opened, with the rest of its text from `final` (the
        answer's item of its kind), or with what was sent."""
        live, self._live = self._live, None
        if live is None:
            return b""
        if live.kind == "reasoning":
            text = final["summary"][0]["text"] if final else live.sent
            item = reasoning_item(self.turn, live.index, text)
        else:
            parts = final["content"] if final else [text_part(live.sent)]
            item = message_item(self.turn, live.index, parts,
                                final["status"] if final else "completed")
        return self._item_events(item, live.index, sent=live.sent, opened=True)

    # -- the finished answer ------------------------------------------------------------------
    def answer(self, result: TurnResult) -> bytes:
        """Every item not yet finished, then `response.completed` (or `.incomplete`)."""
        items = output_items(self.turn, result)
        out = []
        if self._live is not None:  # finished with the rest of the answer's item of its kind
            kind = self._live.kind
            out.append(self._close_live(next((i for i in items if i["type"] == kind), None)))
        sent_live = {live.kind for live in self._opened}
        for item in items:
            if item["type"] not in sent_live:
                index = len(self._done)
                item = {**item, "id": self.turn.item_id(item["type"], index)}
                out.append(self._item_events(item, index))
        status = status_of(result)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        response = final_response(self.turn, result, list(self._done))
        out.append(self._event(kind, response=response))
        return b"".join(out)

    def error(self, error: ProxyError) -> bytes:
        """`response.failed` with the error's code and message; the stream ends there."""
        out = self._close_live()
        response = response_object(self.turn, "failed", list(self._done),
                                   error=failure_detail(error))
        return out + self._event("response.failed", response=response)

    # -- one item's events --------------------------------------------------------------------
    def _added(self, index: int, item: dict[str, Any]) -> bytes:
        return self._event("response.output_item.added", output_index=index, item=item)

    def _item_events(self, item: dict[str, Any], index: int, *, sent: str = "",
                     opened: bool = False) -> bytes:
        """The events of one item from its `added` (unless `opened` already) to its `done`;
        `sent`: its text that live deltas sent already."""
        kind = item["type"]
        out = []
        if not opened:
            out.append(self._added(index, _skeleton(item)))
        body = {"reasoning": self._reasoning_events, "message": self._message_events,
                "function_call": self._call_events, "custom_tool_call": self._call_events}
        out.append(body[kind](item, index, sent, opened))
        out.append(self._event("response.output_item.done", output_index=index, item=item))
        self._done.append(item)
        return b"".join(out)

    def _reasoning_events(self, item: dict[str, Any], index: int, sent: str,
                          opened: bool) -> bytes:
        text = item["summary"][0]["text"]
        ids = {"item_id": item["id"], "output_index": index, "summary_index": 0}
        part = {"type": "summary_text", "text": text}
        out = [] if opened else [self._event("response.reasoning_summary_part.added", **ids,
                                             part={"type": "summary_text", "text": ""})]
        rest = unsent(text, sent)
        if rest:
            out.append(self._event("response.reasoning_summary_text.delta", **ids, delta=rest))
        out.append(self._event("response.reasoning_summary_text.done", **ids, text=text))
        out.append(self._event("response.reasoning_summary_part.done", **ids, part=part))
        return b"".join(out)

    def _message_events(self, item: dict[str, Any], index: int, sent: str,
                        opened: bool) -> bytes:
        out = []
        for position, part in enumerate(item["content"]):
            ids = {"item_id": item["id"], "output_index": index, "content_index": position}
            is_text = part["type"] == "output_text"
            if not (opened and position == 0):
                empty = text_part("") if is_text else {"type": "refusal", "refusal": ""}
                out.append(self._event("response.content_part.added", **ids, part=empty))
            if is_text:
                rest = unsent(part["text"], sent) if opened and position == 0 else part["text"]
                if rest:
                    out.append(self._event("response.output_text.delta", **ids, delta=rest,
                                           logprobs=[]))
                out.append(self._event("response.output_text.done", **ids, text=part["text"],
                                       logprobs=[]))
            else:
                out.append(self._event("response.refusal.delta", **ids, delta=part["refusal"]))
                out.append(self._event("response.refusal.done", **ids,
                                       refusal=part["refusal"]))
            out.append(self._event("response.content_part.done", **ids, part=part))
        return b"".join(out)

    def _call_events(self, item: dict[str, Any], index: int, sent: str, opened: bool) -> bytes:
        ids = {"item_id": item["id"], "output_index": index}
        if item["type"] == "custom_tool_call":
            return (self._event("response.custom_tool_call_input.delta", **ids,
                                delta=item["input"])
                    + self._event("response.custom_tool_call_input.done", **ids,
                                  input=item["input"]))
        return (self._event("response.function_call_arguments.delta", **ids,
                            delta=item["arguments"])
                + self._event("response.function_call_arguments.done", **ids,
                              name=item["name"], arguments=item["arguments"]))


def _skeleton(item: dict[str, Any]) -> dict[str, Any]:
    """An item as `response.output_item.added` announces it: in progress, nothing in it."""
    empties: dict[str, dict[str, Any]] = {
        "reasoning": {"summary": []}, "message": {"content": []},
        "function_call": {"arguments": ""}, "custom_tool_call": {"input": ""}}
    return {**item, **empties[item["type"]], "status": "in_progress"}
