"""The stream assembler (`turn.assemble`), pure: upstream chunks in, the completion they add up
to out, the upstream's own tool calls accumulated whole whatever the server's streaming shape."""

from __future__ import annotations

import orjson
import pytest

from proxy.turn.assemble import CONTENT, REASONING, Piece, StreamAssembler, arguments_of
from tests.fake_vllm import vllm_completion, vllm_stream_of

ARGS = '{"city": "Paris", "nested": {"days": [1, 2], "q": "a \\"b\\""}}'


def chunk(delta=None, finish=None, index=0, **top):
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m",
            "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}], **top}


def call_delta(**fields):
    return chunk({"tool_calls": [fields]})


def assemble(chunks):
    assembler = StreamAssembler()
    pieces = [piece for c in chunks for piece in assembler.feed(c)]
    return assembler.completion(), pieces


def message_of(chunks):
    return assemble(chunks)[0]["choices"][0]["message"]


def test_content_and_reasoning_deltas_add_up_and_are_reported_in_order():
    completion, pieces = assemble([
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning": "Think"}), chunk({"reasoning": "ing."}),
        chunk({"content": "Hel"}), chunk({"content": "lo"}), chunk({}, "stop"),
        {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 3}},
    ])
    assert pieces == [Piece(0, REASONING, "Think"), Piece(0, REASONING, "ing."),
                      Piece(0, CONTENT, "Hel"), Piece(0, CONTENT, "lo")]
    assert completion["choices"] == [{
        "index": 0, "message": {"role": "assistant", "content": "Hello", "reasoning": "Thinking."},
        "logprobs": None, "finish_reason": "stop"}]
    assert (completion["id"], completion["created"], completion["model"]) == ("chatcmpl-1", 7, "m")
    assert completion["usage"] == {"prompt_tokens": 3}


def test_argument_deltas_are_joined():
    head = call_delta(index=0, id="call_a", type="function",
                      function={"name": "get_weather", "arguments": ""})
    parts = [ARGS[i:i + 5] for i in range(0, len(ARGS), 5)]
    message = message_of([head, *(call_delta(index=0, function={"arguments": p}) for p in parts)])
    assert message["tool_calls"] == [{"id": "call_a", "type": "function",
                                      "function": {"name": "get_weather", "arguments": ARGS}}]


def test_cumulative_snapshots_are_told_apart_and_the_last_one_kept():
    """llama.cpp: every chunk holds the whole arguments so far (and the name again)."""
    snapshots = [ARGS[:end] for end in range(4, len(ARGS) + 4, 4)]
    message = message_of([call_delta(index=0, id="call_a", function={
        "name": "get_weather", "arguments": snap}) for snap in snapshots])
    call = message["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": ARGS}
    assert orjson.loads(call["function"]["arguments"])["nested"]["days"] == [1, 2]


@pytest.mark.parametrize(("pieces", "expected"), [
    (['{"a": ', '1}'], '{"a": 1}'),  # deltas
    (['{"a"', '{"a": 1', '{"a": 1}'], '{"a": 1}'),  # snapshots
    (['{"a": 1}'], '{"a": 1}'),  # one piece: either reading
    (["", '{"a": 1}', ""], '{"a": 1}'),  # empty pieces count for nothing
    (['{"', '{": 1}'], '{"{": 1}'),  # each extends the last, but only the deltas are JSON
    ([{"a": 1}], {"a": 1}),  # a server that sends an object
    ([], ""),
])
def test_arguments_of(pieces, expected):
    assert arguments_of(pieces) == expected


def test_interleaved_indices_each_keep_their_own_arguments():
    message = message_of([
        call_delta(index=0, id="call_a", function={"name": "read", "arguments": ""}),
        call_delta(index=1, id="call_b", function={"name": "get_weather", "arguments": ""}),
        call_delta(index=1, function={"arguments": '{"city": '}),
        call_delta(index=0, function={"arguments": '{"path": '}),
        call_delta(index=0, function={"arguments": '"/a"}'}),
        call_delta(index=1, function={"arguments": '"Oslo"}'}),
    ])
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message["tool_calls"]] == [
        ("call_a", "read", '{"path": "/a"}'), ("call_b", "get_weather", '{"city": "Oslo"}')]


def test_calls_without_ids_or_indices_are_told_apart_by_their_order():
    message = message_of([
        call_delta(function={"name": "read", "arguments": '{"path": '}),
        call_delta(function={"arguments": '"/a"}'}),
    ])
    assert message["tool_calls"] == [{"id": None, "type": "function",
                                      "function": {"name": "read", "arguments": '{"path": "/a"}'}}]


def test_without_ids_or_indices_another_function_named_starts_a_call():
    message = message_of([
        call_delta(function={"name": "read", "arguments": '{"path": "/a"}'}),
        call_delta(function={"name": "get_weather", "arguments": '{"city": '}),
        call_delta(function={"arguments": '"Oslo"}'}),
    ])
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]
            ] == [("read", '{"path": "/a"}'), ("get_weather", '{"city": "Oslo"}')]


def test_a_new_id_at_a_reused_index_is_a_new_call():
    """Some servers give every call index 0; the id tells them apart."""
    message = message_of([
        call_delta(index=0, id="call_a", function={"name": "read", "arguments": '{"path": "/a"}'}),
        call_delta(index=0, id="call_b", function={"name": "read", "arguments": '{"path": '}),
        call_delta(index=0, function={"arguments": '"/b"}'}),
    ])
    assert [(c["id"], c["function"]["arguments"]) for c in message["tool_calls"]] == [
        ("call_a", '{"path": "/a"}'), ("call_b", '{"path": "/b"}')]


def test_an_id_that_comes_after_the_first_delta_joins_its_call():
    message = message_of([
        call_delta(index=0, function={"name": "read", "arguments": '{"path": '}),
        call_delta(index=0, id="call_late", function={"arguments": '"/a"}'}),
    ])
    assert [(c["id"], c["function"]["arguments"]) for c in message["tool_calls"]] == [
        ("call_late", '{"path": "/a"}')]


def test_a_name_streamed_in_pieces_is_joined():
    message = message_of([call_delta(index=0, id="c", function={"name": "get_"}),
                          call_delta(index=0, function={"name": "weather", "arguments": "{}"})])
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"


def test_choices_are_assembled_apart():
    completion, pieces = assemble([chunk({"content": "a"}, index=1), chunk({"content": "b"}),
                                   chunk({}, "stop", index=1), chunk({}, "length")])
    assert [(c["index"], c["message"]["content"], c["finish_reason"])
            for c in completion["choices"]] == [(0, "b", "length"), (1, "a", "stop")]
    assert pieces == [Piece(1, CONTENT, "a"), Piece(0, CONTENT, "b")]


def test_an_error_event_is_kept_and_nothing_after_it_is_reported():
    assembler = StreamAssembler()
    assembler.feed(chunk({"content": "x"}))
    assert assembler.feed({"error": {"message": "boom", "code": 500}}) == []
    assert assembler.error == {"error": {"message": "boom", "code": 500}}


def test_logprobs_are_accumulated():
    token = {"token": "a", "logprob": -0.1, "bytes": [97], "top_logprobs": []}
    first = chunk({"content": "a"})
    first["choices"][0]["logprobs"] = {"content": [token]}
    second = chunk({"content": "a"})
    second["choices"][0]["logprobs"] = {"content": [token]}
    completion, _ = assemble([first, second])
    assert completion["choices"][0]["logprobs"]["content"] == [token, token]


@pytest.mark.parametrize("stream", [
    {"size": 1}, {"size": 7, "cumulative": True}, {"size": 3, "ids": False},
    {"size": 5, "indexes": False, "cumulative": True}, {"size": 4, "indexes": False, "ids": False},
])
def test_vllms_stream_assembles_to_its_buffered_answer(stream):
    calls = [{"id": "chatcmpl-tool-1", "type": "function",
              "function": {"name": "get_weather", "arguments": ARGS}},
             {"id": "chatcmpl-tool-2", "type": "function",
              "function": {"name": "read", "arguments": '{"path": "/a"}'}}]
    buffered = vllm_completion("Two calls.", reasoning="Plan.", tool_calls=calls,
                               finish_reason="tool_calls", choices=2)
    assembler = StreamAssembler()
    for event in vllm_stream_of(buffered, **stream)[:-1]:
        assembler.feed(orjson.loads(event.removeprefix(b"data: ")))
    completion = assembler.completion()
    for got, want in zip(completion["choices"], buffered["choices"], strict=True):
        assert got["finish_reason"] == want["finish_reason"] == "tool_calls"
        message = got["message"]
        assert (message["content"], message["reasoning"]) == ("Two calls.", "Plan.")
        assert [c["function"] for c in message["tool_calls"]] == [c["function"] for c in calls]
        assert [c["id"] for c in message["tool_calls"]] == (  # (minted later when missing)
            [c["id"] for c in calls] if stream.get("ids", True) else [None, None])
    assert completion["usage"] == buffered["usage"]
