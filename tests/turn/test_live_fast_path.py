"""A streamed turn's per-token fast paths (`LiveTurn`: a lone content piece past its think
block not routed piece by piece, the first ready piece kept as it came, what went out
noted without a new list a piece) let out, say and reply exactly what the way before them
does, for any stream: the way before (its hold and release copied here; its routing every
piece through `_routed_each`, without the one-piece shortcut), fed the same events side by
side."""

from __future__ import annotations

from collections.abc import Iterable

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.turn.assemble import CONTENT, REASONING, Piece
from proxy.turn.holdback import Held
from proxy.turn.live import DONE, LiveTurn
from tests.streamed_cases import plans


class BeforeLiveTurn(LiveTurn):
    """LiveTurn's feed, routing, hold and release as they were before the fast paths."""

    def feed(self, events: Iterable[bytes]) -> bool:
        for data in events:
            if self.done:
                continue
            if data == DONE or data.strip() == DONE:
                self.done = True
                continue
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                self._not_json = self._not_json or data[:200]
                continue
            for piece in self._before_routed(self.assembler.feed(chunk)):
                if piece.kind == REASONING and not self._reasoning:
                    continue
                self._hold(piece)
        return bool(self._ready)

    def _before_routed(self, pieces: list[Piece]) -> Iterable[Piece]:
        """The routing before its one-piece shortcut: every piece through `_routed_each`."""
        routers = self._thinking
        return pieces if routers is None else self._routed_each(pieces, routers)

    def _hold(self, piece: Piece) -> None:
        choice = piece.choice
        if choice in self._waiting or (piece.kind == REASONING
                                       and choice in self._after_reasoning):
            return
        key = (choice, piece.kind)
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = Held(self._rule)
        text = held.push(piece.text)
        if text and piece.kind == CONTENT and not self._reasoning_said(choice):
            self._waiting.add(choice)
            return
        if text:
            self._ready_add(Piece(choice, piece.kind, text))

    def release(self) -> list[Piece]:
        ready, self._ready = self._ready, []
        if ready:
            self.first_text = True
        for piece in ready:
            key = (piece.choice, piece.kind)
            self._said.setdefault(key, []).append(piece.text)
        return ready


_TEXTS = st.sampled_from([
    "", " ", "\n", "Hello", " world", ".\n\n", "<think>", "</think>", "<th", "ink>",
    "Let me see", "<tool_call>", "</tool_call>", '{"name": "get_weather", "arguments": {}}',
    '{"name"', "[TOOL_CALLS]", "```json\n", "```", "  \n", "ok", "<|python_tag|>"])


@st.composite
def _chunk(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["content", "content", "content", "reasoning_content",
                                 "reasoning", "role", "finish", "done", "garbage",
                                 "both", "call"]))
    choice = draw(st.sampled_from([0, 0, 0, 1]))
    text = draw(_TEXTS)
    if kind == "done":
        return DONE
    if kind == "garbage":
        return b"{not json"
    delta: dict = {}
    part: dict = {"index": choice, "delta": delta, "logprobs": None, "finish_reason": None}
    if kind in ("content", "reasoning_content", "reasoning"):
        delta[kind] = text
    elif kind == "role":
        delta.update(role="assistant", content="")
    elif kind == "both":
        delta.update(reasoning_content=text, content=draw(_TEXTS))
    elif kind == "call":
        delta["tool_calls"] = [{"index": 0, "id": "c1", "type": "function",
                                "function": {"name": "get_weather", "arguments": "{}"}}]
    else:
        part["finish_reason"] = "stop"
    return orjson.dumps({"id": "x", "object": "chat.completion.chunk", "created": 1,
                         "model": "m", "choices": [part]})


_SETTINGS = [{}, {"thinking_opened_by_template": "false"},
             {"thinking_opened_by_template": "true"}, {"reasoning_from_content": False}]
_PLANS = [plans(**s)[1] for s in _SETTINGS]


def test_the_plans_cover_both_ways_of_routing():
    routed = {LiveTurn(plan)._thinking is None for plan in _PLANS}
    assert routed == {True, False}


@pytest.mark.parametrize("plan", _PLANS, ids=[str(s) for s in _SETTINGS])
@settings(max_examples=300, deadline=None)
@given(batches=st.lists(st.lists(_chunk(), max_size=4), max_size=30))
def test_the_fast_paths_let_out_what_the_way_before_does(plan, batches):
    now, before = LiveTurn(plan), BeforeLiveTurn(plan)
    for batch in batches:
        assert now.feed(batch) == before.feed(batch)
        assert now.release() == before.release()
        assert now.first_text == before.first_text
    assert now.said() == before.said()
    assert repr(now.reply()) == repr(before.reply())
