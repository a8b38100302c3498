"""A client that asks more completion tokens than the model's context window leaves (Claude
Code asks 32,000 whatever the model), end to end: the official SDKs → the proxy (real HTTP)
→ the fake vLLM (real HTTP), which checks `--max-model-len` as vLLM does and in its words."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.conftest import TOOLS
from tests.fake_vllm import fake_token_count, vllm_answer, vllm_completion, vllm_context_window

pytestmark = pytest.mark.integration

HERMES = '<tool_call>{"name": "read", "arguments": {"path": "/etc/hosts"}}</tool_call>'
USER = [{"role": "user", "content": "Read /etc/hosts"}]
READ = {"name": "read", "input_schema": {"type": "object",
                                         "properties": {"path": {"type": "string"}}}}


def _window(fake, size: int = 4096, wording: str = "current") -> None:
    fake.answer(vllm_context_window(size, vllm_answer(vllm_completion(HERMES)),
                                    wording=wording))


@pytest.mark.parametrize("mode", ["buffer", "stream"])
@pytest.mark.parametrize("wording", ["current", "earlier"])
def test_a_chat_turn_asking_too_much_is_asked_again_for_what_fits(
        fake, start_proxy, mode, wording, log_lines):
    proxy = start_proxy(stream_mode=mode, log_level="info")
    _window(fake, wording=wording)
    stream = proxy.client().chat.completions.create(
        model="qwen", messages=USER, tools=TOOLS, max_completion_tokens=32000, stream=True)
    chunks = list(stream)
    calls = [c for chunk in chunks for c in (chunk.choices[0].delta.tool_calls or [])
             if chunk.choices]
    assert calls[0].function.name == "read"
    first, fitted = (r.json for r in fake.chat_requests())
    assert first["max_tokens"] == 32000
    # vLLM today counts the prompt only to a floor: asked for no length, it fills its window.
    room = 4096 - fake_token_count(fitted) - 1
    expected = None if wording == "current" else room
    assert fitted.get("max_tokens") == expected
    assert {k: v for k, v in fitted.items() if k != "max_tokens"} == {
        k: v for k, v in first.items() if k != "max_tokens"}
    line = next(line for line in log_lines(1) if line["path"] == "/v1/chat/completions")
    assert f"max_tokens_fitted:{expected or 'window'}" in line["notes"]
    assert line["status"] == 200


def test_fitting_can_be_turned_off(fake, start_proxy):
    proxy = start_proxy(fit_max_tokens=False)
    _window(fake)
    with pytest.raises(openai.BadRequestError) as raised:
        proxy.client().chat.completions.create(model="qwen", messages=USER, tools=TOOLS,
                                               max_tokens=32000)
    assert "you requested 32000 output tokens" in raised.value.message
    assert len(fake.chat_requests()) == 1


@pytest.mark.parametrize("wording", ["current", "earlier"])
def test_a_prompt_the_window_cannot_hold_is_refused(fake, proxy, wording):
    """Counted whole, the prompt is seen not to fit at once; counted to a floor (vLLM
    today), it is known only when asking for no length is refused too."""
    _window(fake, size=10, wording=wording)
    with pytest.raises(openai.BadRequestError) as raised:
        proxy.client().chat.completions.create(model="qwen", messages=USER, tools=TOOLS,
                                               max_tokens=100)
    assert "maximum context length is 10 tokens" in raised.value.message
    asked = [r.json.get("max_tokens") for r in fake.chat_requests()]
    assert asked == ([100, None] if wording == "current" else [100])


@pytest.mark.parametrize("mode", ["buffer", "stream"])
def test_claude_code_s_32000_tokens_are_fitted_to_a_small_window(fake, start_proxy, mode):
    proxy = start_proxy(stream_mode=mode)
    _window(fake, size=8192)
    claude = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                                 timeout=20)
    with claude.messages.stream(model="qwen", max_tokens=32000, messages=USER,
                                tools=[READ]) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    first, fitted = fake.chat_requests()
    assert first.json["max_tokens"] == 32000
    assert "max_tokens" not in fitted.json


def test_claude_code_is_told_its_prompt_is_too_long_in_anthropic_s_words(fake, proxy):
    """Claude Code reads `prompt is too long: N tokens > M maximum` to compact the
    conversation by the right amount."""
    _window(fake, size=10)
    claude = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                                 timeout=20)
    with pytest.raises(anthropic.BadRequestError) as raised:
        claude.messages.create(model="qwen", max_tokens=32000, messages=USER, tools=[READ])
    error = raised.value.body["error"]
    # vLLM counts the prompt to where it overflows: one past the window with nothing asked.
    assert error == {"type": "invalid_request_error",
                     "message": "prompt is too long: 11 tokens > 10 maximum"}
    assert [r.json.get("max_tokens") for r in fake.chat_requests()] == [32000, None]


def test_codex_s_responses_turn_is_fitted_too(fake, proxy):
    _window(fake)
    client = proxy.client()
    response = client.responses.create(
        model="qwen", input="Read /etc/hosts", max_output_tokens=32000,
        tools=[{"type": "function", "name": "read", "parameters": {
            "type": "object", "properties": {"path": {"type": "string"}}}}])
    assert [item.type for item in response.output][-1] == "function_call"
    assert len(fake.chat_requests()) == 2
