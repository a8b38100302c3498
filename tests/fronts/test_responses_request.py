"""The Responses front's first half, pure: a Responses request → the chat body the turn runs
(and the 400s, in OpenAI's envelope, naming the parameter at fault)."""

from __future__ import annotations

import json

import orjson
import pytest

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.fronts import Incoming, Recall
from proxy.fronts.responses import PATH
from proxy.fronts.responses import parse as parse_incoming
from proxy.fronts.responses.request import translate
from proxy.turn.plan import PassthroughPlan, TurnPlan

FUNCTION = {"type": "function", "name": "read", "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            "strict": False}
NAMESPACE = {"type": "namespace", "name": "multi_agent.v1", "description": "Sub-agents",
             "tools": [{"type": "function", "name": "spawn_agent",
                        "parameters": {"type": "object",
                                       "properties": {"task": {"type": "string"}}}}]}
CUSTOM = {"type": "custom", "name": "apply_patch", "description": "Patch files",
          "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}


def parse_with_store(raw: bytes, config: Config, recall: Recall) -> TurnPlan | PassthroughPlan:
    """The front's plan for a POST of `raw`, the store's recall being `recall`."""
    return parse_incoming(Incoming.post(PATH, raw, recall), config)


def parse(raw: bytes, config: Config) -> TurnPlan | PassthroughPlan:
    """The front's plan for a POST of `raw` without a store."""
    return parse_incoming(Incoming.post(PATH, raw), config)


def chat(body: dict, history: list | None = None) -> dict:
    return translate(body, history or []).body


def plan(body: dict, **settings) -> TurnPlan:
    result = parse(orjson.dumps(body), Config(**settings))
    assert isinstance(result, TurnPlan)
    return result


def refused(body: dict) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        parse(orjson.dumps(body), Config())
    assert caught.value.status == 400
    return caught.value


def test_a_string_input_is_one_user_message():
    assert chat({"model": "m", "input": "Hi"}) == {
        "model": "m", "messages": [{"role": "user", "content": "Hi"}]}


def test_instructions_and_leading_developer_messages_become_one_system_message():
    body = chat({"instructions": "Be brief.", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text",
                                                              "text": "Rules."}]},
        {"role": "system", "content": "More rules."},
        {"role": "user", "content": [{"type": "input_text", "text": "a"},
                                     {"type": "input_text", "text": "b"}]},
        {"role": "developer", "content": "Later note."}]})
    assert body["messages"] == [
        {"role": "system", "content": "Be brief.\n\nRules.\n\nMore rules."},
        {"role": "user", "content": "a\nb"},
        {"role": "system", "content": "Later note."}]  # developer is always system


def test_images_become_image_parts_and_item_ids_are_not_sent_on():
    body = chat({"input": [{"id": "msg_1", "type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}]}]})
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA",
                                            "detail": "low"}}]}]


def test_calls_and_their_outputs_become_assistant_tool_calls_and_tool_messages():
    body = chat({"tools": [FUNCTION, NAMESPACE, CUSTOM], "input": [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text",
                                                         "text": "secret thoughts"}]},
        {"type": "message", "role": "assistant", "id": "msg_2",
         "content": [{"type": "output_text", "text": "On it."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "read",
         "arguments": '{"path": "a"}'},
        {"type": "function_call", "call_id": "c2", "name": "spawn_agent",
         "namespace": "multi_agent.v1", "arguments": '{"task": "t"}'},
        {"type": "custom_tool_call", "call_id": "c3", "name": "apply_patch",
         "input": "*** Begin Patch"},
        {"type": "function_call_output", "call_id": "c1", "output": "file a"},
        {"type": "function_call_output", "call_id": "c2",
         "output": [{"type": "input_text", "text": "spawned"}]},
        {"type": "custom_tool_call_output", "call_id": "c3", "output": "Done!"}]})
    messages = body["messages"]
    assert "secret thoughts" not in json.dumps(messages)
    assert messages[1] == {"role": "assistant", "content": "On it.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read",
                                                      "arguments": '{"path": "a"}'}},
        {"id": "c2", "type": "function", "function": {"name": "multi_agent_v1__spawn_agent",
                                                      "arguments": '{"task": "t"}'}},
        {"id": "c3", "type": "function", "function": {
            "name": "apply_patch", "arguments": '{"input":"*** Begin Patch"}'}}]}
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "file a"},
        {"role": "tool", "tool_call_id": "c2", "content": "spawned"},
        {"role": "tool", "tool_call_id": "c3", "content": "Done!"}]


def test_tools_function_namespace_custom_and_hosted():
    translation = translate({"input": "x", "tools": [FUNCTION, NAMESPACE, CUSTOM,
                                                     {"type": "web_search"},
                                                     {"type": "file_search"}]}, [])
    functions = {t["function"]["name"]: t["function"] for t in translation.body["tools"]}
    assert list(functions) == ["read", "multi_agent_v1__spawn_agent", "apply_patch"]
    assert all("." not in name for name in functions)
    assert functions["read"] == {"name": "read", "description": "Read a file",
                                 "parameters": FUNCTION["parameters"]}
    patch = functions["apply_patch"]["parameters"]
    assert patch["required"] == ["input"]
    assert patch["properties"]["input"]["type"] == "string"
    assert "start: /.+/" in patch["properties"]["input"]["description"]
    ref = translation.toolset.refs["multi_agent_v1__spawn_agent"]
    assert (ref.name, ref.namespace, ref.custom) == ("spawn_agent", "multi_agent.v1", False)
    assert translation.toolset.refs["apply_patch"].custom
    assert translation.notes == ["hosted_tools_left_out:web_search,file_search"]


def test_options_under_their_chat_names_and_unknown_fields_ignored():
    body = chat({"input": "x", "tools": [FUNCTION], "tool_choice": "required",
                 "parallel_tool_calls": False, "max_output_tokens": 50, "temperature": 0.2,
                 "top_p": 0.9, "reasoning": {"effort": "high", "summary": "auto"},
                 "text": {"format": {"type": "json_schema", "name": "out", "strict": True,
                                     "schema": {"type": "object"}}, "verbosity": "low"},
                 "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k",
                 "store": False, "client_metadata": {"a": 1}, "something_new": [1]})
    assert body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is False
    assert body["max_tokens"] == 50
    assert (body["temperature"], body["top_p"]) == (0.2, 0.9)
    assert body["reasoning_effort"] == "high"
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "out", "schema": {"type": "object"}, "strict": True}}
    assert not {"include", "prompt_cache_key", "store", "client_metadata",
                "something_new", "text", "reasoning"} & set(body)


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "function", "name": "read"}, {"type": "function", "function": {"name": "read"}}),
    ({"type": "custom", "name": "apply_patch"},
     {"type": "function", "function": {"name": "apply_patch"}}),
    ({"type": "function", "name": "spawn_agent", "namespace": "multi_agent.v1"},
     {"type": "function", "function": {"name": "multi_agent_v1__spawn_agent"}}),
    ("none", "none"),
])
def test_tool_choice(choice, expected):
    assert chat({"input": "x", "tools": [FUNCTION, NAMESPACE, CUSTOM],
                 "tool_choice": choice})["tool_choice"] == expected


def test_allowed_tools_offers_only_those_named():
    body = chat({"input": "x", "tools": [FUNCTION, CUSTOM], "tool_choice": {
        "type": "allowed_tools", "mode": "required", "tools": [{"type": "custom",
                                                                 "name": "apply_patch"}]}})
    assert [t["function"]["name"] for t in body["tools"]] == ["apply_patch"]
    assert body["tool_choice"] == "required"


def test_json_object_format_and_plain_text_format():
    assert chat({"input": "x", "text": {"format": {"type": "json_object"}}})[
        "response_format"] == {"type": "json_object"}
    assert "response_format" not in chat({"input": "x", "text": {"format": {"type": "text"}}})


def test_the_plan_runs_the_chat_turn_and_keeps_the_reasoning_whatever_chat_drops():
    turn = plan({"model": "m", "input": "x", "tools": [FUNCTION], "stream": True},
                reasoning_field="drop")
    sent = orjson.loads(turn.upstream_body)
    assert sent["stream"] is False
    assert sent["model"] == "m"
    assert turn.client_stream is True
    assert turn.extraction.reasoning_shown is True
    assert set(turn.extraction.tools) == {"read"}
    assert turn.front_data.id.startswith("resp_")
    assert turn.front_data.store is True


def test_a_turn_without_tools_is_still_a_turn():
    turn = plan({"input": "hello"})
    assert turn.extraction.tools == {}
    assert "tools" not in orjson.loads(turn.upstream_body)


def test_relay_mode_passes_the_request_on_unchanged():
    raw = orjson.dumps({"model": "m", "input": "x", "stream": True})
    relayed = parse(raw, Config(responses_mode="relay"))
    assert isinstance(relayed, PassthroughPlan)
    assert relayed.upstream_body == raw
    assert relayed.client_stream is True


def test_previous_response_id_continues_the_kept_conversation():
    history = [{"type": "message", "role": "user", "content": "first"},
               {"type": "message", "role": "assistant", "id": "msg_x",
                "content": [{"type": "output_text", "text": "answer"}]}]
    asked = []

    def recall(key):
        asked.append(key)
        return history if key == "resp_1" else None

    result = parse_with_store(orjson.dumps({"input": "second", "previous_response_id": "resp_1",
                                      "instructions": "New rules."}), Config(), recall)
    assert asked == ["resp_1"]
    assert orjson.loads(result.upstream_body)["messages"] == [
        {"role": "system", "content": "New rules."},
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "second"}]
    assert result.front_data.items == ({"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": "second"}]},)
    with pytest.raises(ProxyError) as caught:
        parse_with_store(orjson.dumps({"input": "x", "previous_response_id": "resp_gone"}),
                   Config(), recall)
    assert caught.value.status == 404
    assert caught.value.param == "previous_response_id"
    assert "resp_gone" in caught.value.message


@pytest.mark.parametrize(("body", "param"), [
    ({"input": 5}, "input"),
    ({}, "input"),
    ({"input": ["hi"]}, "input[0]"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": 3}]}, "input[0].content"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": 3}]}]},
     "input[0].content[0].text"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
     "input[0].content[0].image_url"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input[0].content[0].type"),
    ({"input": [{"role": "system", "content": [
        {"type": "input_image", "image_url": "http://x/y.png"}]}]}, "input[0].content"),
    ({"input": [{"type": "function_call", "name": "read", "arguments": "{}"}]},
     "input[0].call_id"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "read", "arguments": 3}]},
     "input[0].arguments"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": 3}]},
     "input[0].output"),
    ({"input": [{"type": "custom_tool_call", "call_id": "c", "name": "p"}]}, "input[0].input"),
    ({"input": "x", "tools": {"type": "function"}}, "tools"),
    ({"input": "x", "tools": [{"name": "f"}]}, "tools[0].type"),
    ({"input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
    ({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": []}]},
     "tools[0].parameters"),
    ({"input": "x", "tools": [{"type": "namespace", "name": "n"}]}, "tools[0].tools"),
    ({"input": "x", "tools": [{"type": "namespace", "name": "n", "tools": [
        {"type": "web_search", "name": "w"}]}]}, "tools[0].tools[0].type"),
    ({"input": "x", "tools": [FUNCTION, FUNCTION]}, "tools[1].name"),
    ({"input": "x", "tools": [FUNCTION], "tool_choice": {"type": "function", "name": "nope"}},
     "tool_choice.name"),
    ({"input": "x", "tools": [FUNCTION], "tool_choice": {"type": "web_search"}}, "tool_choice"),
    ({"input": "x", "tools": [FUNCTION], "tool_choice": 3}, "tool_choice"),
    ({"input": "x", "max_output_tokens": "50"}, "max_output_tokens"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "max_output_tokens": True}, "max_output_tokens"),
    ({"input": "x", "temperature": "hot"}, "temperature"),
    ({"input": "x", "top_p": [1]}, "top_p"),
    ({"input": "x", "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"input": "x", "reasoning": "high"}, "reasoning"),
    ({"input": "x", "reasoning": {"effort": 3}}, "reasoning.effort"),
    ({"input": "x", "text": {"format": {"type": "xml"}}}, "text.format"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}},
     "text.format.schema"),
    ({"input": "x", "instructions": ["a"]}, "instructions"),
    ({"input": "x", "model": 7}, "model"),
    ({"input": "x", "stream": "true"}, "stream"),
    ({"input": "x", "store": 1}, "store"),
    ({"input": "x", "previous_response_id": 12}, "previous_response_id"),
    ({"input": "x", "conversation": "conv_1"}, "conversation"),
])
def test_bad_shapes_are_a_400_naming_the_param(body, param):
    error = refused(body)
    assert error.param == param
    assert error.body()["error"]["type"] == "invalid_request_error"


def test_items_of_other_apis_are_left_out_and_named():
    translation = translate({"input": [{"type": "web_search_call", "id": "ws_1"},
                                       {"role": "user", "content": "x"}]}, [])
    assert translation.body["messages"] == [{"role": "user", "content": "x"}]
    assert translation.notes == ["input_items_left_out:web_search_call"]


def test_the_loop_guard_counts_calls_in_the_items():
    calls = [{"type": "function_call", "call_id": f"c{i}", "name": "read", "arguments": "{}"}
             for i in range(4)]
    with pytest.raises(ProxyError) as caught:
        parse(orjson.dumps({"input": calls, "tools": [FUNCTION]}),
              Config(loop_guard_max_tool_calls=3))
    assert caught.value.code == "tool_call_loop_guard"
