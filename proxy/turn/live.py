"""A streamed turn as its upstream events come (the streamed mode): each event's chunk is
added to the completion the stream adds up to, and the reasoning and content that the hold-
back rule lets out are ready to send. At the end the assembled completion is the reply that
`core.decide` reads, exactly as a buffered one."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import orjson

from ..base.errors import ProxyError, from_upstream
from .assemble import CONTENT, REASONING, Piece, StreamAssembler
from .core import UpstreamReply
from .holdback import Held, hold_rule
from .plan import TurnPlan
from .rescue.upstream_error import as_completion, rescued
from .result import TurnResult
from .thinking import ThinkRouter

DONE = b"[DONE]"


def stream_cut(detail: str) -> ProxyError:
    """An upstream stream that did not come to its end: never a silently short answer."""
    return ProxyError(502, f"The upstream's stream {detail}.", type_="upstream_error",
                      code="upstream_stream_cut")


class LiveWriter(Protocol):
    """What live text needs of a front's StreamWriter."""

    def reasoning(self, text: str, choice: int = 0) -> bytes: ...

    def text(self, text: str, choice: int = 0) -> bytes: ...


def written(pieces: Iterable[Piece], writer: LiveWriter) -> bytes:
    """Live pieces in a front's wire format."""
    out = b""
    for piece in pieces:  # (most often one)
        out += (writer.reasoning(piece.text, piece.choice) if piece.kind == REASONING
                else writer.text(piece.text, piece.choice))
    return out


class LiveTurn:
    """One streamed turn's upstream events: `feed` them as they come, `release` what may be
    sent now, `reply` at the end; `said` and `holds`: what went out, and whether a frame of
    the answer did not (an unreadable frame may then be asked again before it goes out)."""

    def __init__(self, plan: TurnPlan) -> None:
        extraction = plan.extraction
        self._rule = (hold_rule(tuple(extraction.formats))
                      if extraction.tools and extraction.formats else None)
        self._reasoning = extraction.reasoning_shown
        self._tools = bool(extraction.tools)  # a tool turn: an error's model text is read
        # A leading think block in the content flows as reasoning, as normalize will have it.
        self._thinking: dict[int, ThinkRouter | None] | None = (
            {} if extraction.reasoning_from_content else None)
        self._rule_of_thinking = extraction.thinking
        self.assembler = StreamAssembler()
        self._held: dict[tuple[int, str], Held] = {}
        self._after_reasoning: set[int] = set()  # choices whose content has begun to go out
        self._waiting: set[int] = set()  # choices whose content waits for the end
        self._ready: list[Piece] = []
        self.done = False  # `[DONE]` came
        self._not_json: bytes | None = None
        self.first_text = False  # something visible has been released
        # what went out, by (choice, kind), in pieces (joined when read: a long answer's
        # pieces added to one string were copied whole each time)
        self._said: dict[tuple[int, str], list[str]] = {}

    def feed(self, events: Iterable[bytes]) -> bool:
        """Take the data of upstream events; whether there is now something to release."""
        for data in events:
            if self.done:
                continue  # nothing counts after the end
            if data == DONE or data.strip() == DONE:
                self.done = True
                continue
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                self._not_json = self._not_json or data[:200]
                continue
            pieces = self.assembler.feed(chunk)
            for piece in (pieces if self._thinking is None else self._routed(pieces)):
                if piece.kind == REASONING and not self._reasoning:
                    continue
                self._hold(piece)
        return bool(self._ready)

    def _routed(self, pieces: list[Piece]) -> Iterable[Piece]:
        """`pieces`, the content's leading think block turned into reasoning (a choice whose
        upstream sends reasoning of its own keeps its content as it is, as normalize does)."""
        routers = self._thinking
        assert routers is not None  # (a turn that routes)
        if len(pieces) == 1:  # the common token: content past its think block, as it is
            piece = pieces[0]
            router = routers.get(piece.choice)
            if (router is not None and piece.kind == CONTENT and piece.text
                    and router.passes_through):
                return pieces
        return self._routed_each(pieces, routers)

    def _routed_each(self, pieces: list[Piece], routers: dict[int, ThinkRouter | None],
                     ) -> Iterable[Piece]:
        """`_routed`, piece by piece."""
        for piece in pieces:
            if piece.kind != CONTENT:
                if piece.kind == REASONING:
                    routers.setdefault(piece.choice, None)
                yield piece
                continue
            if piece.choice not in routers:
                routers[piece.choice] = ThinkRouter(self._rule_of_thinking)
            router = routers[piece.choice]
            if router is None:
                yield piece
                continue
            if router.passes_through:  # past the think block: push would give it back
                if piece.text:
                    yield piece
                continue
            for kind, text in router.push(piece.text):
                yield Piece(piece.choice, kind, text)

    def _hold(self, piece: Piece) -> None:
        choice = piece.choice
        if choice in self._waiting or (piece.kind == REASONING
                                       and choice in self._after_reasoning):
            return  # what comes now goes out with the rest, at the end
        key = (choice, piece.kind)
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = Held(self._rule)
        text = held.push(piece.text)
        if not text:
            return
        if (piece.kind == CONTENT and choice not in self._after_reasoning
                and not self._reasoning_said(choice)):
            self._waiting.add(choice)
            return
        self._ready_add(piece if text == piece.text else Piece(choice, piece.kind, text))

    def _reasoning_said(self, choice: int) -> bool:
        """Before a choice's content first goes out: whether all of its reasoning has gone
        out, or can now (space the hold-back kept for a seam: the reasoning is over, and a
        visible answer means none of it is taken for a call). Else the content waits for the
        end: the reasoning comes first in every front, and Responses and Messages cannot add
        to it once their text has begun."""
        if choice in self._after_reasoning:
            return True
        held = self._held.get((choice, REASONING))
        unsaid = held.unsent_space() if held is not None else ""
        if unsaid is None:
            return False
        if unsaid:
            self._ready_add(Piece(choice, REASONING, unsaid))
        self._after_reasoning.add(choice)
        return True

    def _ready_add(self, piece: Piece) -> None:
        ready = self._ready
        if ready and (ready[-1].choice, ready[-1].kind) == (piece.choice, piece.kind):
            ready[-1] = Piece(piece.choice, piece.kind, ready[-1].text + piece.text)
        else:
            ready.append(piece)

    def release(self) -> list[Piece]:
        """The reasoning and content that may be sent now, in the order they came."""
        ready, self._ready = self._ready, []
        if ready:
            self.first_text = True
        said = self._said
        for piece in ready:
            key = (piece.choice, piece.kind)
            pieces = said.get(key)
            if pieces is None:
                said[key] = [piece.text]
            else:
                pieces.append(piece.text)
        return ready

    def said(self) -> dict[tuple[int, str], str]:
        """What went out live so far, by (choice, kind): the text a client has shown."""
        return {key: "".join(pieces) for key, pieces in self._said.items()}

    def holds(self, result: TurnResult) -> bool:
        """Whether a frame read in `result` (this turn's answer) has not gone out live: a
        call (calls go out whole at the end), or reasoning or content the hold-back kept,
        more than space (it keeps everything from the first place a frame could open, so a
        frame left as text stands in that part)."""
        said = self.said()
        return any(choice.calls or any(
            _after(text or "", said.get((choice.index, kind), "")).strip()
            for kind, text in ((CONTENT, choice.content), (REASONING, choice.reasoning)))
            for choice in result.choices)

    def reply(self, cut: bool = False) -> UpstreamReply | ProxyError:
        """The stream's answer once it has ended (`cut`: it broke off mid-event): the
        assembled completion, or the error that takes its place."""
        error = self.assembler.error
        if error is not None:
            inner = error.get("error") if isinstance(error.get("error"), dict) else error
            code = inner.get("code") if isinstance(inner, dict) else None
            status = code if isinstance(code, int) and 400 <= code < 600 else 502
            rescue = rescued(error) if self._tools else None
            if rescue is not None:  # the stream's answer so far, then the text it held
                completion = self.assembler.completion()
                choices = completion.get("choices") or [{}]
                sent = choices[0].get("message") if len(choices) == 1 else None
                parsed = as_completion(rescue, completion.get("model") or "", sent)
                return UpstreamReply(status, {}, _written(error), parsed=parsed,
                                     rescue=rescue)
            return from_upstream(status, _written(error), {})
        if self._not_json is not None:
            return ProxyError(502, "The upstream's stream holds an event that is not JSON: "
                              f"{self._not_json.decode('utf-8', 'replace')!r}.",
                              type_="upstream_error", code="upstream_invalid_json")
        if not self.done:
            return stream_cut("broke off in the middle of an event" if cut
                              else "ended without [DONE]")
        return UpstreamReply(200, {}, b"", parsed=self.assembler.completion())


def _after(text: str, sent: str) -> str:
    """What of `text` follows what went out (the fronts' `unsent` rule)."""
    return text[len(sent):] if text.startswith(sent) else ""


def as_said(result: TurnResult, said: Mapping[tuple[int, str], str]) -> TurnResult:
    """`result` (another generation's: a re-ask's) as the client of a streamed turn is to
    get it: each choice's reasoning and content exactly what went out live (`said`; None
    where nothing did), with the result's own calls. The other generation's prose is
    dropped: the client has shown the first one's, which cannot be taken back, and a second
    telling of it (near the same, never the same) would repeat or contradict it."""
    return dataclasses.replace(result, choices=tuple(
        dataclasses.replace(choice, reasoning=said.get((choice.index, REASONING)) or None,
                            content=said.get((choice.index, CONTENT)) or None)
        for choice in result.choices))


def _written(error: dict[str, Any]) -> bytes:
    """An upstream's error event written back for `from_upstream`; nothing (the status tells)
    when the event nests deeper than orjson writes."""
    try:
        return orjson.dumps(error)
    except TypeError:  # orjson.JSONEncodeError: nested past the 254 levels orjson writes
        return b""
