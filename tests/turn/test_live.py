"""A streamed turn's live text (`LiveTurn`): a choice's content goes out only once all of its
reasoning has, since every front puts the reasoning first and the Responses and Messages
writers cannot add to it once their text has begun."""

from __future__ import annotations

import pytest

from proxy.base.sse import SseDecoder
from proxy.turn.assemble import CONTENT, REASONING
from proxy.turn.live import LiveTurn
from tests.fake_vllm import vllm_completion, vllm_stream_of
from tests.streamed_cases import assembled, plans, streamed_stream


def _live(completion: dict, size: int = 4) -> tuple[list[tuple[str, str]], dict]:
    """What went out live ((kind, text), joined while the kind stays the same) and the
    finished message (as the OpenAI SDK assembles the chat stream), for an answer streamed in
    pieces of `size`."""
    _, streamed = plans()
    events = vllm_stream_of(completion, size=size)
    live = LiveTurn(streamed)
    decoder = SseDecoder()
    out: list[tuple[str, str]] = []
    for event in events:
        live.feed(decoder.feed(event))
        for piece in live.release():
            if out and out[-1][0] == piece.kind:
                out[-1] = (piece.kind, out[-1][1] + piece.text)
            else:
                out.append((piece.kind, piece.text))
    raw, _ = streamed_stream(streamed, events)
    return out, assembled(raw)["choices"][0]["message"]


@pytest.mark.parametrize("reasoning", ["Let me think.\n\n", "Let me think.\n", "Hm.  \n \n"])
def test_the_space_ending_the_reasoning_goes_out_before_the_content(reasoning):
    """vLLM's reasoning parsers end the reasoning with the newline before `</think>`: the
    hold-back keeps it (a seam might trim it) until the content begins, then sends it."""
    flowed, message = _live(vllm_completion("The answer is 4.", reasoning=reasoning))
    assert message["reasoning_content"] == reasoning
    assert flowed == [(REASONING, reasoning), (CONTENT, "The answer is 4.")]


@pytest.mark.parametrize("reasoning", ["Okay", 'Plan:\n{"name": "read", "arguments": {}}'])
def test_the_content_waits_for_the_end_while_reasoning_is_held(reasoning):
    """Reasoning that may hold a call waits for the end: so does the content after it,
    which would otherwise go out before it."""
    flowed, message = _live(vllm_completion("The answer is 4.", reasoning=reasoning))
    assert message["reasoning_content"] == reasoning
    assert message["content"] == "The answer is 4."
    assert CONTENT not in [kind for kind, _ in flowed]
    assert "".join(text for kind, text in flowed if kind == REASONING) != reasoning


def test_reasoning_all_sent_lets_the_content_flow():
    flowed, _ = _live(vllm_completion("The answer is 4.", reasoning="Let me think."))
    assert flowed == [(REASONING, "Let me think."), (CONTENT, "The answer is 4.")]


def test_a_think_block_in_the_content_flows_as_reasoning_then_content():
    flowed, message = _live(vllm_completion("<think>Let me see.</think>\n\nThe answer."))
    assert (message["reasoning_content"], message["content"]) == ("Let me see.", "The answer.")
    assert flowed == [(REASONING, "Let me see."), (CONTENT, "The answer.")]
