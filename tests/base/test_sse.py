"""Rendering a completion as OpenAI's SSE chunk sequence."""

from __future__ import annotations

import json

import orjson

from proxy.base.sse import SseDecoder
from proxy.fronts.chat import (
    ChatStream,
    StreamIdentity,
    completion_chunks,
    heartbeat,
    role_chunks,
)
from proxy.turn.normalize import ExtractionSettings, normalize
from proxy.turn.result import Choice, TurnResult
from tests.fake_vllm import vllm_completion

IDENT = StreamIdentity("chatcmpl-x", 1700000000, "qwen")


def _events(raw: bytes):
    parts = raw.decode().split("\n\n")
    assert parts[-1] == ""
    return parts[:-1]


def _chunks(completion, include_usage=False):
    raw = role_chunks(IDENT) + b"".join(completion_chunks(IDENT, completion, include_usage))
    events = _events(raw)
    assert events[-1] == "data: [DONE]"
    return [json.loads(e.removeprefix("data: ")) for e in events[:-1]]


def _completion(text, **kwargs):
    settings = ExtractionSettings(tools={"read": {}})
    return normalize(vllm_completion(text, **kwargs), settings)


def test_order_role_reasoning_content_calls_finish_usage():
    completion = _completion(
        'Reading.\n<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>\n'
        '<tool_call>{"name": "read", "arguments": {"path": "b"}}</tool_call>', reasoning="hm")
    chunks = _chunks(completion, include_usage=True)
    deltas = [c["choices"][0]["delta"] if c["choices"] else None for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[1] == {"reasoning_content": "hm"}
    assert deltas[2] == {"content": "Reading."}
    assert [d["tool_calls"][0]["index"] for d in deltas[3:7]] == [0, 0, 1, 1]
    assert deltas[3]["tool_calls"][0]["function"] == {"name": "read", "arguments": ""}
    assert deltas[4]["tool_calls"][0] == {"index": 0, "function": {"arguments": '{"path":"a"}'}}
    assert deltas[7] == {}
    assert chunks[7]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[8]["choices"] == []
    assert chunks[8]["usage"]["total_tokens"] == 52
    assert {(c["id"], c["created"], c["model"]) for c in chunks} == {
        ("chatcmpl-x", 1700000000, "qwen")}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:7])


def test_plain_text_answer_keeps_upstream_finish_reason():
    chunks = _chunks(_completion("just words", finish_reason="length"))
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "content": ""}, {"content": "just words"}, {}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_heartbeats_add_nothing_to_the_message():
    assert heartbeat(IDENT, "comment") == b": ping\n\n"
    (event,) = _events(heartbeat(IDENT, "chunk"))
    chunk = json.loads(event.removeprefix("data: "))
    assert chunk["choices"] == [{"index": 0, "delta": {}, "logprobs": None,
                                 "finish_reason": None}]
    assert heartbeat(IDENT, "both").startswith(b": ping\n\ndata: ")


def test_every_choice_that_begins_ends_whatever_upstream_returned():
    ident = StreamIdentity("chatcmpl-x", 1, "m")
    one = TurnResult("c", 1, "m", (Choice(1, "b"),))
    raw = role_chunks(ident) + b"".join(completion_chunks(ident, one, False))
    chunks = [json.loads(line[6:]) for line in raw.split(b"\n\n")
              if line.startswith(b"data: {")]
    began = {c["choices"][0]["index"] for c in chunks if c["choices"][0]["delta"].get("role")}
    ended = {c["choices"][0]["index"] for c in chunks if c["choices"][0]["finish_reason"]}
    assert began == ended == {0, 1}


def test_decoder_gives_each_event_data_as_it_completes():
    decoder = SseDecoder()
    assert decoder.feed(b'data: {"a": 1}\n\ndata: {"b"') == [b'{"a": 1}']
    assert decoder.pending == b'data: {"b"'
    assert decoder.feed(b": 2}\n\n") == [b'{"b": 2}']
    assert decoder.pending == b""


def test_decoder_reads_every_line_ending_comments_and_multi_line_data():
    decoder = SseDecoder()
    raw = (b": keep-alive\n\nevent: delta\r\ndata:first\r\ndata: second\r\n\r\n"
           b"data: [DONE]\r\r")
    assert decoder.feed(raw) == [b"first\nsecond", b"[DONE]"]


def test_decoder_is_indifferent_to_where_the_bytes_are_cut():
    raw = b"data: one\n\ndata: two\r\n\r\nid: 3\ndata: three\n\n"
    for cut in range(len(raw) + 1):
        decoder = SseDecoder()
        assert decoder.feed(raw[:cut]) + decoder.feed(raw[cut:]) == [b"one", b"two", b"three"]


def test_each_chunk_is_the_bytes_orjson_writes_for_it():
    # the identity is written once per stream, the rest per chunk: the bytes are still one
    # orjson document per event, keys in OpenAI's order, whatever the strings hold
    ident = StreamIdentity('chatcmpl-"q"\\', 1 << 40, "m\u2028é😀</script>")
    completion = _completion('Reading "it".\n<tool_call>{"name": "read", "arguments": '
                             '{"path": "a"}}</tool_call>', reasoning="hm\n")
    raw = role_chunks(ident) + b"".join(completion_chunks(ident, completion, True))
    events = raw.split(b"\n\n")[:-2]  # (the last is [DONE])
    for data in events:
        chunk = orjson.loads(data.removeprefix(b"data: "))
        assert data == b"data: " + orjson.dumps(chunk)
        assert list(chunk)[:5] == ["id", "object", "created", "model", "choices"]
        assert (chunk["id"], chunk["created"], chunk["model"]) == (
            ident.id, ident.created, ident.model)
    assert orjson.loads(events[-1].removeprefix(b"data: "))["usage"]["total_tokens"] == 52


def test_a_live_delta_is_the_bytes_orjson_writes_for_its_chunk():
    # a live text's chunk is written around the text alone (`text_opening`): the same bytes
    # as orjson writes for the whole chunk, for each choice, key and kind of text
    ident = StreamIdentity('chatcmpl-"q"\\', 1 << 40, "m\u2028é😀</script>")
    stream = ChatStream(ident, reasoning_keys=("reasoning_content", "reasoning"))
    stream.head()
    for text in ("Hi", ' "quoted"\n\\ tab\t', "é😀\u2028</script>\x00\x1f", "x" * 300):
        for choice in (0, 1, 12):
            for keys, raw in ((("content",), stream.text(text, choice)),
                              (stream.reasoning_keys, stream.reasoning(text, choice))):
                expected = b"".join(b"data: " + orjson.dumps({
                    "id": ident.id, "object": "chat.completion.chunk",
                    "created": ident.created, "model": ident.model,
                    "choices": [{"index": choice, "delta": {key: text}, "logprobs": None,
                                 "finish_reason": None}]}) + b"\n\n" for key in keys)
                assert raw.endswith(expected)
