"""The first streamed turn of a model streams like the hundredth: with
`thinking_opened_by_template: auto`, what the upstream's profile says of the generation
prompt (rendered by vLLM's /tokenize, no generation) is known before any answer was seen."""

from __future__ import annotations

import threading

import orjson
import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, FakeVLLM, Received, vllm_completion, vllm_stream_of

PROSE = "Let me look that up for you, it takes a moment. And more after the pause."


class RenderingVLLM(FakeVLLM):
    """A fake vLLM whose /tokenize renders the chat with a ChatML template and, asked
    `return_token_strs`, answers the tokens' text, as vLLM does (a narrowly scoped double
    until tests/fakes/ render templates)."""

    def __init__(self, opens_thinking: bool) -> None:
        super().__init__()
        self.opens_thinking = opens_thinking

    def _tokenized(self, received: Received) -> Answer:
        body = received.json
        strs = [piece for message in body["messages"] for piece in (
            "<|im_start|>", f"{message['role']}\n{message['content']}", "<|im_end|>", "\n")]
        strs += ["<|im_start|>", "assistant\n"] + (["<think>", "\n"] if self.opens_thinking
                                                   else [])
        return Answer(body={"count": len(strs), "max_model_len": 32768,
                            "tokens": list(range(len(strs))),
                            "token_strs": strs if body.get("return_token_strs") else None})


class Gate(threading.Event):
    """The fake's pause: opened by the test when the first content arrives; `timed_out`
    when the fake gave up waiting (the content was held until the answer's end)."""

    timed_out = False

    def wait(self, timeout: float | None = None) -> bool:
        opened = super().wait(timeout)
        self.timed_out = self.timed_out or not opened
        return opened


@pytest.fixture
def rendering():
    fake = RenderingVLLM(opens_thinking=False)
    yield fake
    fake.close()


def _first_content_while_paused(url: str, resume: Gate) -> tuple[str, bool]:
    """The first content delta of a streamed tool turn, and whether upstream was still
    paused when it came (the pause opened by it, not by the fake's own limit)."""
    body = {"model": "qwen", "messages": [{"role": "user", "content": "Weather?"}],
            "tools": TOOLS, "stream": True}
    with requests.post(url + "/v1/chat/completions", json=body, stream=True,
                       timeout=20) as response:
        for line in response.iter_lines():
            if not line.startswith(b"data: {"):
                continue
            chunk = orjson.loads(line.removeprefix(b"data: "))
            delta = chunk["choices"][0]["delta"] if chunk["choices"] else {}
            if delta.get("content"):
                resume.set()
                return delta["content"], not resume.timed_out
    raise AssertionError("no content came")


def test_the_first_streamed_turn_flows_when_the_template_opens_no_thinking(start_proxy,
                                                                            rendering):
    proxy = start_proxy(upstream=rendering.url, stream_mode="stream")
    for turn in range(2):
        resume = Gate()
        events = vllm_stream_of(vllm_completion(PROSE), size=6)
        rendering.answer(Answer(chunks=events, pauses={4: resume}))
        try:
            text, paused = _first_content_while_paused(proxy.url, resume)
        finally:
            resume.set()
        assert PROSE.startswith(text)
        assert paused, f"turn {turn}: the text waited for the end of the answer"
    # the profile was learned once, without a generation
    rendered = [r for r in rendering.received if r.path == "/tokenize"]
    assert len(rendered) == 1
    assert rendered[0].json["add_generation_prompt"] is True
    assert len(rendering.chat_requests()) == 2


@pytest.mark.parametrize("opens", [True, False])
def test_a_first_buffered_turn_cut_by_length_is_thinking_when_the_profile_says_so(
        start_proxy, opens):
    """Known from the upstream's profile, not from markers: the first answer of a model whose
    template opens thinking, cut by `length` before any closer, is all reasoning."""
    fake = RenderingVLLM(opens_thinking=opens)
    try:
        proxy = start_proxy(upstream=fake.url)
        thought = "The user wants the weather, so I should look it up and then"
        fake.answer(Answer(body=vllm_completion(thought, finish_reason="length")))
        body = {"model": "qwen", "messages": [{"role": "user", "content": "Weather?"}],
                "tools": TOOLS}
        answer = requests.post(proxy.url + "/v1/chat/completions", json=body,
                               timeout=20).json()
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "length"
        message = choice["message"]
        if opens:
            assert not message.get("content")
            assert thought in (message.get("reasoning_content") or message.get("reasoning"))
        else:
            assert message["content"] == thought
    finally:
        fake.close()
