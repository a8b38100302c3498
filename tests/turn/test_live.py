"""A streamed turn's live text (`LiveTurn`): a choice's content goes out only once all of its
reasoning has, since every front puts the reasoning first and the Responses and Messages
writers cannot add to it once their text has begun."""

from __future__ import annotations

import orjson
import pytest

from proxy.base.sse import SseDecoder
from proxy.turn.assemble import CONTENT, REASONING
from proxy.turn.live import LiveTurn, as_said
from proxy.turn.normalize import normalize
from proxy.turn.result import TurnResult
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


def _fed(completion: dict) -> LiveTurn:
    """A streamed turn fed `completion` in pieces, its live text released as it came."""
    _, streamed = plans(thinking_opened_by_template="false")
    live = LiveTurn(streamed)
    decoder = SseDecoder()
    for event in vllm_stream_of(completion, size=4):
        live.feed(decoder.feed(event))
        live.release()
    return live


def _answer(completion: dict) -> TurnResult:
    return normalize(completion, plans()[0].extraction)


def test_a_frame_of_a_call_is_still_held_at_the_end_and_what_flowed_is_said():
    botched = vllm_completion('Let me look.\n<tool_call>\n{"name": "read", "arguments": '
                              '{"path": }\n</tool_call>', reasoning="Think.")
    live = _fed(botched)
    assert live.holds(_answer(botched))
    assert live.said() == {(0, REASONING): "Think.", (0, CONTENT): "Let me look."}


@pytest.mark.parametrize("content", ["The answer is 4.", "The answer is 4.\n\n  "])
def test_a_text_that_all_went_out_holds_nothing(content):
    live = _fed(vllm_completion(content))
    assert not live.holds(_answer(vllm_completion(content)))
    assert live.said() == {(0, CONTENT): "The answer is 4."}


def test_another_generation_is_told_as_what_flowed_with_its_own_calls():
    """A re-ask's answer in the streamed mode: its own prose (and reasoning) dropped for what
    the client has shown, its calls kept; nothing shown is None, not an empty text."""
    reasked = _answer(vllm_completion(
        'Another telling.\n<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n'
        '</tool_call>', reasoning="Other thoughts."))
    said = as_said(reasked, {(0, CONTENT): "Let me look."})
    [choice] = said.choices
    assert (choice.content, choice.reasoning) == ("Let me look.", None)
    assert [(c.name, orjson.loads(c.arguments)) for c in choice.calls] == [("read", {"path": "/a"})]
    assert choice.calls == reasked.first.calls


def test_a_call_read_is_held_though_all_the_content_went_out():
    """A call off its schema is taken out of the content, which all went out: its frame
    did not (calls go out whole at the end)."""
    call = vllm_completion('Let me look.\n<tool_call>\n{"name": "read", "arguments": '
                           '{"path": 5}}\n</tool_call>')
    live = _fed(call)
    assert live.said() == {(0, CONTENT): "Let me look."}
    assert live.holds(_answer(call))


def test_a_frame_in_the_reasoning_is_held_as_in_the_content():
    """Nothing visible, a botched call drafted in the reasoning (the buffered mode reads
    calls there): the reasoning waits from the frame on, so the frame has not gone out."""
    drafted = vllm_completion("", reasoning='Search it.\n<tool_call>\n{"name": "read", '
                                            '"arguments": {"path": }\n</tool_call>')
    live = _fed(drafted)
    assert live.said() == {(0, REASONING): "Search it."}
    assert live.holds(_answer(drafted))
