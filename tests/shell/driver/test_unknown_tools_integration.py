"""Issue 26, item 6, end to end on every front: a call the model plainly made to a name the
client did not offer keeps the agent loop alive. A name a little off one tool's (`Bash` for
`bash`) is that tool's; one that matches none is delivered as written (the agent answers "no
such tool"); `unknown_tool_calls: text` keeps the old rule; no turn is a 5xx because a call
was left out. The official SDKs read the answers (real HTTP to the proxy and the fake vLLM).
"""

from __future__ import annotations

import json

import anthropic
import pytest

from tests.fake_vllm import Answer, vllm_completion, vllm_tool_call

pytestmark = pytest.mark.integration

BASH = {"type": "object", "properties": {"command": {"type": "string"}},
        "required": ["command"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": BASH}}]
ASK = [{"role": "user", "content": "List the files."}]
HERMES = '<tool_call>\n{"name": "%s", "arguments": {"command": "ls"}}\n</tool_call>'
NATIVE = "native"


def _answer(fake, name: str, how: str) -> None:
    """The fake vLLM calls `name`: as a parsed call, or written as a Hermes frame."""
    if how == NATIVE:
        fake.answer(Answer(body=vllm_completion(None, tool_calls=[
            vllm_tool_call(name, '{"command": "ls"}')], finish_reason="tool_calls")))
    else:
        fake.answer(Answer(body=vllm_completion(HERMES % name)))


def _chat(proxy, stream: bool) -> tuple[list[tuple[str, dict]], str | None, str | None]:
    """(calls, content, finish_reason) as the OpenAI SDK reads the chat answer."""
    client = proxy.client()
    if not stream:
        choice = client.chat.completions.create(model="q", messages=ASK, tools=CHAT_TOOLS
                                                ).choices[0]
        calls = choice.message.tool_calls or []
        return ([(c.function.name, json.loads(c.function.arguments)) for c in calls],
                choice.message.content, choice.finish_reason)
    with client.beta.chat.completions.stream(model="q", messages=ASK,
                                             tools=CHAT_TOOLS) as events:
        for _ in events:
            pass
        final = events.get_final_completion().choices[0]
    calls = final.message.tool_calls or []
    return ([(c.function.name, json.loads(c.function.arguments)) for c in calls],
            final.message.content, final.finish_reason)


@pytest.mark.parametrize("how", [NATIVE, "hermes"])
@pytest.mark.parametrize("mode", ["buffer", "stream"])
@pytest.mark.parametrize(("written", "delivered"), [("Bash", "bash"), ("functions.bash", "bash"),
                                                    ("run_shell", "run_shell")])
def test_chat_delivers_the_call_under_the_matched_or_written_name(fake, start_proxy, how, mode,
                                                                  written, delivered):
    proxy = start_proxy(stream_mode=mode)
    _answer(fake, written, how)
    calls, content, finish = _chat(proxy, stream=True)
    assert calls == [(delivered, {"command": "ls"})]
    assert not content
    assert finish == "tool_calls"


@pytest.mark.parametrize("how", [NATIVE, "hermes"])
def test_the_strict_rule_keeps_an_unknown_name_out_and_the_turn_is_a_200(fake, start_proxy, how):
    proxy = start_proxy(unknown_tool_calls="text")
    _answer(fake, "run_shell", how)
    calls, content, finish = _chat(proxy, stream=False)
    assert calls == []
    assert content == (None if how == NATIVE else HERMES % "run_shell")
    assert finish == "stop"
    _answer(fake, "Bash", how)  # a name a little off is still repaired
    assert _chat(proxy, stream=False)[0] == [("bash", {"command": "ls"})]


@pytest.mark.parametrize("how", [NATIVE, "hermes"])
def test_the_responses_front_delivers_it(fake, start_proxy, how):
    proxy = start_proxy()
    for written, delivered in (("Bash", "bash"), ("run_shell", "run_shell")):
        _answer(fake, written, how)
        response = proxy.client().responses.create(
            model="q", input="List the files.",
            tools=[{"type": "function", "name": "bash", "parameters": BASH}])
        calls = [(item.name, json.loads(item.arguments)) for item in response.output
                 if item.type == "function_call"]
        assert calls == [(delivered, {"command": "ls"})]


@pytest.mark.parametrize("how", [NATIVE, "hermes"])
@pytest.mark.parametrize("stream", [False, True])
def test_the_messages_front_delivers_it(fake, start_proxy, how, stream):
    proxy = start_proxy()
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                                 timeout=20)
    tools = [{"name": "bash", "input_schema": BASH}]
    for written, delivered in (("Bash", "bash"), ("run_shell", "run_shell")):
        _answer(fake, written, how)
        if stream:
            with client.messages.stream(model="q", max_tokens=100, messages=ASK,
                                        tools=tools) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(model="q", max_tokens=100, messages=ASK,
                                             tools=tools)
        uses = [(block.name, block.input) for block in message.content
                if block.type == "tool_use"]
        assert uses == [(delivered, {"command": "ls"})]
        assert message.stop_reason == "tool_use"
