"""The Messages front's two pure halves: a Messages request → a chat body (and its plan), and
a finished completion → an Anthropic message or event stream. No server."""

from __future__ import annotations

import dataclasses
import json

import orjson
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.fronts import Incoming, messages
from proxy.fronts.messages.request import estimate_tokens, tokenize_body, translate
from proxy.turn.normalize import ExtractionSettings, normalize
from proxy.turn.result import Call, Choice, TurnResult, Usage
from tests.fake_vllm import vllm_completion

CONFIG = Config()
SCHEMA = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
          "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}
BASH = {"name": "Bash", "description": "Run a command", "input_schema": SCHEMA}
BILLING = "x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=cli; cch=3f2a9;"


def _request(**fields):
    return {"model": "qwen", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}], **fields}


def _chat(config: Config = CONFIG, **fields):
    return translate(_request(**fields), config).body


# --- requests in -------------------------------------------------------------------------


def test_system_as_string_or_blocks_with_cache_marks_ignored():
    assert _chat(system="Be brief.")["messages"][0] == {"role": "system",
                                                        "content": "Be brief."}
    blocks = [{"type": "text", "text": "You are a CLI.", "cache_control": {"type": "ephemeral"}},
              {"type": "text", "text": "Be brief."}]
    assert _chat(system=blocks)["messages"][0] == {
        "role": "system", "content": "You are a CLI.\n\nBe brief."}


def test_the_billing_header_line_is_dropped_unless_kept():
    request = _request(system=[{"type": "text", "text": BILLING},
                               {"type": "text", "text": "You are Claude Code."}])
    dropped = translate(request, CONFIG)
    assert dropped.body["messages"][0]["content"] == "You are Claude Code."
    assert "drop_billing_header" in dropped.rewrites
    inline = translate(_request(system=f"{BILLING}\nYou are Claude Code.\n"), CONFIG).body
    assert inline["messages"][0]["content"] == "You are Claude Code.\n"
    kept = translate(request, dataclasses.replace(CONFIG, messages_keep_billing_header=True))
    assert kept.body["messages"][0]["content"] == f"{BILLING}\n\nYou are Claude Code."
    assert kept.rewrites == []
    mention = "Explain what x-anthropic-billing-header: means."
    assert _chat(system=mention)["messages"][0]["content"] == mention  # not at a line start


def test_a_system_role_message_is_folded_into_the_system_prompt():
    body = _chat(system="First.", messages=[
        {"role": "system", "content": [{"type": "text", "text": "Second."}]},
        {"role": "user", "content": "hi"}])
    assert body["messages"] == [{"role": "system", "content": "First.\n\nSecond."},
                                {"role": "user", "content": "hi"}]


def test_user_blocks_text_images_and_documents():
    body = _chat(messages=[{"role": "user", "content": [
        {"type": "text", "text": "Look:", "cache_control": {"type": "ephemeral"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
        {"type": "document", "title": "notes.txt",
         "source": {"type": "text", "media_type": "text/plain", "data": "a note"}}]}])
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
        {"type": "text", "text": "notes.txt\n\na note"}]}]


def test_tool_use_and_tool_results_in_order():
    body = _chat(tools=[BASH], messages=[
        {"role": "user", "content": "list and count"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Two commands.", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Running both."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"cmd": "ls"}},
            {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"cmd": "wc"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a\nb"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "content": [{"type": "text", "text": "wc: missing operand"}]},
            {"type": "text", "text": "<system-reminder>go on</system-reminder>"}]}])
    assert body["messages"][1:] == [
        {"role": "assistant", "content": "Running both.", "reasoning": "Two commands.",
         "tool_calls": [
             {"id": "toolu_1", "type": "function",
              "function": {"name": "Bash", "arguments": '{"cmd":"ls"}'}},
             {"id": "toolu_2", "type": "function",
              "function": {"name": "Bash", "arguments": '{"cmd":"wc"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a\nb"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: wc: missing operand"},
        {"role": "user", "content": "<system-reminder>go on</system-reminder>"}]


def test_tool_result_images_follow_the_tool_messages():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "AAAA"}}
    body = _chat(messages=[{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1",
         "content": [{"type": "text", "text": "the screenshot"}, image]}]}])
    assert body["messages"] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "the screenshot"},
        {"role": "user", "content": [{"type": "image_url",
                                      "image_url": {"url": "data:image/png;base64,AAAA"}}]}]


def test_an_assistant_of_only_tool_calls_has_null_content():
    body = _chat(messages=[
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                           "input": {"cmd": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]}])
    assert body["messages"][1]["content"] is None
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "toolu_1", "content": ""}


def test_tools_deferred_server_and_empty():
    deferred = {**BASH, "name": "Later", "defer_loading": True}
    server = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
    request = translate(_request(tools=[BASH, deferred, server]), CONFIG)
    assert request.body["tools"] == [{"type": "function", "function": {
        "name": "Bash", "parameters": SCHEMA, "description": "Run a command"}}]
    assert "server_tool_left_out" in request.rewrites
    assert "tools" not in _chat(tools=[])
    assert "tool_choice" not in _chat(tools=[], tool_choice={"type": "any"})


@pytest.mark.parametrize(("choice", "expected", "parallel"), [
    ({"type": "auto"}, "auto", None),
    ({"type": "any"}, "required", None),
    ({"type": "none"}, "none", None),
    ({"type": "tool", "name": "Bash"}, {"type": "function", "function": {"name": "Bash"}}, None),
    ({"type": "auto", "disable_parallel_tool_use": True}, "auto", False),
])
def test_tool_choice(choice, expected, parallel):
    body = _chat(tools=[BASH], tool_choice=choice)
    assert body["tool_choice"] == expected
    assert body.get("parallel_tool_calls") is parallel


def test_sampling_stop_sequences_and_ignored_fields():
    body = _chat(temperature=0.2, top_p=0.9, top_k=20, stop_sequences=["END"],
                 metadata={"user_id": "u"}, service_tier="auto")
    assert {k: body[k] for k in ("temperature", "top_p", "top_k", "stop", "max_tokens")} == {
        "temperature": 0.2, "top_p": 0.9, "top_k": 20, "stop": ["END"], "max_tokens": 100}
    assert "metadata" not in body
    assert "service_tier" not in body


@pytest.mark.parametrize(("thinking", "switch"), [
    ({"type": "enabled", "budget_tokens": 2048}, True),
    ({"type": "adaptive"}, True),
    ({"type": "disabled"}, False),
])
def test_thinking_sets_the_upstream_switch(thinking, switch):
    assert _chat(thinking=thinking)["chat_template_kwargs"] == {"enable_thinking": switch}
    deepseek = dataclasses.replace(CONFIG, messages_thinking_switch="thinking")
    assert _chat(deepseek, thinking=thinking)["chat_template_kwargs"] == {"thinking": switch}
    off = dataclasses.replace(CONFIG, messages_thinking_switch="")
    assert "chat_template_kwargs" not in _chat(off, thinking=thinking)
    assert "chat_template_kwargs" not in _chat()  # no thinking field: the model's default


def test_a_final_assistant_message_is_a_prefill():
    request = translate(_request(messages=[{"role": "user", "content": "Name a colour."},
                                           {"role": "assistant", "content": "The colour is"}]),
                        CONFIG)
    assert request.body["continue_final_message"] is True
    assert request.body["add_generation_prompt"] is False
    assert "assistant_prefill" in request.rewrites


@pytest.mark.parametrize(("fields", "where"), [
    ({"model": ""}, "model"),
    ({"max_tokens": None}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "user"}]}, "messages.0.content"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
    ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": [{"type": "audio"}]}]}, "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "file", "file_id": "f"}}]}]},
     "messages.0.content.0.source"),
    ({"messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "data": "JVBERi0="}}]}]},
     "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
     "messages.0.content.0.tool_use_id"),
    ({"messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "Bash", "input": "ls"}]}]},
     "messages.0.content.0.input"),
    ({"system": [{"type": "image"}]}, "system.0"),
    ({"tools": {"name": "Bash"}}, "tools"),
    ({"tools": [{"input_schema": SCHEMA}]}, "tools.0.name"),
    ({"tools": [{"name": "Bash", "input_schema": "object"}]}, "tools.0.input_schema"),
    ({"tools": [BASH], "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"tools": [BASH], "tool_choice": {"type": "tool"}}, "tool_choice.name"),
    ({"temperature": "hot"}, "temperature"),
    ({"stop_sequences": "END"}, "stop_sequences"),
    ({"thinking": {"type": "maybe"}}, "thinking.type"),
    ({"stream": "yes"}, "stream"),
])
def test_wrong_shapes_are_refused_with_the_field(fields, where):
    with pytest.raises(ProxyError) as caught:
        translate({k: v for k, v in _request(**fields).items() if v is not None}, CONFIG)
    assert caught.value.status == 400
    assert caught.value.message.startswith(where + ":")
    status, body = messages.error_body(caught.value)
    assert (status, body["error"]["type"]) == (400, "invalid_request_error")


def test_count_tokens_needs_no_max_tokens_and_tokenizes_the_same_chat():
    request = {"model": "qwen", "system": "Be brief.", "tools": [BASH],
               "thinking": {"type": "enabled", "budget_tokens": 1024},
               "messages": [{"role": "user", "content": "hi"}]}
    chat = translate(request, CONFIG, for_count=True).body
    assert "max_tokens" not in chat
    assert tokenize_body(chat) == {"model": "qwen", "messages": chat["messages"],
                                   "tools": chat["tools"],
                                   "chat_template_kwargs": {"enable_thinking": True}}
    counted = messages.count_request(
        Incoming.post(messages.COUNT_TOKENS_PATH, orjson.dumps(request)), CONFIG)
    assert orjson.loads(counted.tokenize) == tokenize_body(chat)
    assert counted.estimate == estimate_tokens(chat)


def test_the_estimate_counts_text_calls_tools_and_images():
    base = {"messages": [{"role": "user", "content": "x" * 40}]}
    assert estimate_tokens(base) == (16 + 40) // 4
    image = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:,"}}]}]}
    assert estimate_tokens(image) == 4 + 1600
    call = {"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"function": {"name": "Bash", "arguments": '{"cmd":"ls"}'}}]}]}
    assert estimate_tokens(call) == -(-(16 + 4 + 12) // 4)
    tools = {"messages": [], "tools": [{"type": "function", "function": {"name": "a"}}]}
    assert estimate_tokens(tools) == -(-len(orjson.dumps(tools["tools"][0])) // 4)


@pytest.mark.parametrize(("status", "body", "count"), [
    (200, b'{"count": 42, "max_model_len": 32768, "tokens": []}', 42),
    (404, b'{"detail": "Not Found"}', None),
    (200, b"not json", None),
    (200, b'{"count": "42"}', None),
    (200, b'{"count": true}', None),
])
def test_count_of_a_tokenize_answer(status, body, count):
    assert messages.count_of(status, body) == count


def test_parse_plans_a_turn_that_keeps_the_stop_reason():
    raw = orjson.dumps(_request(stream=True, tools=[BASH], stop_sequences=["END"],
                                system=[{"type": "text", "text": BILLING}]))
    plan = messages.parse(Incoming.post(messages.PATH, raw), CONFIG)
    upstream = orjson.loads(plan.upstream_body)
    assert upstream["stream"] is False
    assert "stream_options" not in upstream
    assert plan.client_stream is True
    assert set(plan.extraction.tools) == {"Bash"}
    assert plan.front_data == messages.MessagesData("qwen", ("END",))
    assert "drop_billing_header" in plan.rewrites


def test_parse_applies_the_models_settings():
    config = dataclasses.replace(CONFIG, models=(("qwen*", {"messages_thinking_switch": "x"}),))
    plan = messages.parse(Incoming.post(messages.PATH, orjson.dumps(_request(
        thinking={"type": "adaptive"}))), config)
    assert orjson.loads(plan.upstream_body)["chat_template_kwargs"] == {"x": True}


# --- messages out ------------------------------------------------------------------------


def _completion(content=None, *, reasoning=None, calls=(), finish="stop", stop_reason=None,
                usage=None):
    """A turn's result, as the core hands it to the front."""
    choice = Choice(0, content, reasoning, tuple(Call(*call) for call in calls), finish,
                    stop_reason)
    return TurnResult("chatcmpl-1", 1, "m", (choice,),
                      usage or Usage(prompt_tokens=100, completion_tokens=7, total_tokens=107))


def _plan(stops=()):
    raw = orjson.dumps(_request(stop_sequences=list(stops)) if stops else _request())
    return messages.parse(Incoming.post(messages.PATH, raw), CONFIG)


CALLS = (("call_" + "a" * 24, "Bash", '{"cmd": "ls", "big": 123456789012345678901234567890}'),
         ("call_" + "b" * 24, "Bash", '{"cmd":"wc"}'))
FULL = _completion("Running.", reasoning="Let me think.", calls=CALLS, finish="tool_calls")


def test_message_of_a_full_completion():
    message = json.loads(messages.render_json(_plan(), FULL))  # exact big integers
    assert message["id"].startswith("msg_")
    assert len(message["id"]) == 28
    assert {k: v for k, v in message.items() if k != "id"} == {
        "type": "message", "role": "assistant", "model": "qwen",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": ""},
            {"type": "text", "text": "Running."},
            {"type": "tool_use", "id": "toolu_" + "a" * 24, "name": "Bash",
             "input": {"cmd": "ls", "big": 123456789012345678901234567890}},
            {"type": "tool_use", "id": "toolu_" + "b" * 24, "name": "Bash",
             "input": {"cmd": "wc"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 100, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 7}}
    Message.model_validate(message)  # the SDK's own type, strictly


def test_a_native_call_id_gets_a_fresh_tool_use_id():
    completion = _completion(calls=[("chatcmpl-tool-9f8e", "Bash", "{}")], finish="tool_calls")
    block = messages.message_of(_plan(), completion)["content"][0]
    assert block["id"].startswith("toolu_")
    assert len(block["id"]) == 30


@pytest.mark.parametrize(("finish", "stop_reason", "expected"), [
    ("stop", None, ("end_turn", None)),
    ("stop", "END", ("stop_sequence", "END")),
    ("stop", "OTHER", ("end_turn", None)),  # a stop string the request did not send
    ("length", None, ("max_tokens", None)),
    ("tool_calls", None, ("tool_use", None)),
    ("content_filter", None, ("refusal", None)),
])
def test_stop_reasons(finish, stop_reason, expected):
    choice = Choice(0, "x", finish=finish, stop_sequence=stop_reason)
    assert messages.stop_of(choice, ("END", "\n\n")) == expected
    # (a stop token id is no stop string: the core keeps none, see the test below)


def test_usage_splits_cached_prompt_tokens():
    usage = Usage(prompt_tokens=1000, completion_tokens=12, prompt_details={"cached_tokens": 960})
    assert messages.usage_of(usage) == {"input_tokens": 40, "cache_creation_input_tokens": 0,
                                        "cache_read_input_tokens": 960, "output_tokens": 12}
    assert messages.usage_of(None)["input_tokens"] == 0


def _events(raw: bytes) -> list[dict]:
    events = []
    for block in raw.decode().split("\n\n"):
        if block:
            name, data = block.split("\n")
            event = orjson.loads(data.removeprefix("data: "))
            assert name == "event: " + event["type"]
            events.append(event)
    return events


STREAM_EVENT = TypeAdapter(RawMessageStreamEvent)


def _assembled(raw: bytes) -> Message:
    """The message the SDK assembles from a stream's events (each parsed by its types)."""
    snapshot, buffers = None, {}
    for event in _events(raw):
        if event["type"] == "ping":
            continue
        typed = STREAM_EVENT.validate_python(event)  # strictly, by the SDK's own types
        snapshot = accumulate_event(event=typed, current_snapshot=snapshot, json_bufs=buffers)
    return snapshot


def _without_id(message) -> dict:
    data = message.model_dump() if not isinstance(message, dict) else dict(message)
    data.pop("id")
    return data


def test_stream_of_answer_alone_assembles_the_json_message():
    plan = _plan()
    writer = messages.MessagesStream.for_plan(plan)
    raw = writer.head() + writer.heartbeat() + writer.answer(FULL)
    streamed = _assembled(raw)
    whole = Message.model_validate(json.loads(messages.render_json(plan, FULL)))
    assert _without_id(streamed) == _without_id(whole)
    assert streamed.id == writer.id


@pytest.mark.parametrize("pieces", [
    [("reasoning", "Let "), ("reasoning", "me think."), ("text", "Run"), ("text", "ning.")],
    [("reasoning", "Let me")],
    [("reasoning", "Let me think."), ("text", "Running.")],
    [("text", "")],
])
def test_live_deltas_then_answer_give_the_same_message(pieces):
    plan = _plan()
    live = messages.MessagesStream.for_plan(plan)
    raw = live.head() + live.heartbeat()
    for kind, text in pieces:
        raw += getattr(live, kind)(text) + live.heartbeat()
    raw += live.answer(FULL)
    alone = messages.MessagesStream.for_plan(plan)
    expected = _assembled(alone.head() + alone.answer(FULL))
    assert _without_id(_assembled(raw)) == _without_id(expected)
    indexes = [e["index"] for e in _events(raw) if e["type"] == "content_block_start"]
    assert indexes == [0, 1, 2, 3]


def test_live_text_not_a_prefix_of_the_final_text_is_not_lost():
    live = messages.MessagesStream("qwen")
    raw = live.head() + live.text("Running.\n") + live.answer(_completion("Running."))
    assert _assembled(raw).content[0].text == "Running.\n"  # what went out stays out


def test_stream_stop_sequence_and_usage_in_message_delta():
    plan = _plan(stops=["END"])
    writer = messages.MessagesStream.for_plan(plan)
    completion = _completion("Done", stop_reason="END", usage=Usage(
        prompt_tokens=50, completion_tokens=3, prompt_details={"cached_tokens": 20}))
    events = _events(writer.head() + writer.answer(completion))
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    assert delta["usage"] == {"input_tokens": 30, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 20, "output_tokens": 3}
    assembled = _assembled(writer.head() + writer.answer(completion))
    assert assembled.usage.input_tokens == 30


def test_ping_and_error_events():
    writer = messages.MessagesStream("qwen")
    assert writer.heartbeat() == b'event: ping\ndata: {"type":"ping"}\n\n'
    error = ProxyError(504, "The upstream did not answer within 600 s.", code="upstream_timeout")
    assert writer.error(error) == (b'event: error\ndata: {"type":"error","error":{"type":'
                                   b'"api_error","message":"The upstream did not answer '
                                   b'within 600 s."}}\n\n')


@pytest.mark.parametrize(("status", "expected_status", "kind"), [
    (400, 400, "invalid_request_error"),
    (401, 401, "authentication_error"),
    (403, 403, "permission_error"),
    (404, 404, "not_found_error"),
    (413, 413, "request_too_large"),
    (422, 422, "invalid_request_error"),
    (429, 429, "rate_limit_error"),
    (500, 500, "api_error"),
    (502, 502, "api_error"),
    (503, 529, "overloaded_error"),
    (504, 504, "api_error"),
    (529, 529, "overloaded_error"),
])
def test_error_statuses_and_types(status, expected_status, kind):
    error = ProxyError(status, "no", headers={"retry-after": "3"})
    rendered = messages.error_response(error)
    assert rendered.status == expected_status
    assert orjson.loads(rendered.body) == {"type": "error",
                                           "error": {"type": kind, "message": "no"}}
    assert rendered.headers == {"retry-after": "3"}


def test_the_stop_string_is_the_turns_and_only_the_messages_front_renders_it():
    from proxy.fronts import chat

    upstream = vllm_completion("Step one")
    upstream["choices"][0]["stop_reason"] = "END"
    kept = normalize(upstream, ExtractionSettings(tools={}))
    assert kept.first.stop_sequence == "END"
    chat_plan = chat.parse(Incoming.post(chat.PATH, orjson.dumps({
        "model": "m", "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f"}}]})), CONFIG)
    chat_choice = orjson.loads(chat.render_json(chat_plan, kept))["choices"][0]
    assert "stop_reason" not in chat_choice  # the chat front's schema is OpenAI's
    assert list(chat_choice) == ["index", "message", "logprobs", "finish_reason"]
    plan = messages.parse(Incoming.post(messages.PATH, orjson.dumps(
        _request(stop_sequences=["END"]))), CONFIG)
    answer = orjson.loads(messages.render_json(plan, kept))
    assert (answer["stop_reason"], answer["stop_sequence"]) == ("stop_sequence", "END")
    upstream["choices"][0]["stop_reason"] = 151645  # a stop token id: not a stop sequence
    token = normalize(upstream, ExtractionSettings(tools={}))
    assert token.first.stop_sequence is None
