"""Rules every front shares, written once: what of a finished answer the streamed mode still
has to send, the one 400 each front words in its own envelope, and the one typed result
each renders in its own words."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.base.errors import bad_request
from proxy.fronts import unsent
from proxy.fronts.registry import FRONTS
from proxy.turn.result import Call, Choice, TurnResult, Usage


@pytest.mark.parametrize(("text", "sent", "rest"), [
    ("Hello world", "", "Hello world"),
    ("Hello world", "Hello", " world"),
    ("Hello world", "Hello world", ""),
    ("Hello", "Hello world", ""),  # less than was sent: nothing more
    ("Goodbye", "Hello", ""),  # a finish that broke the promise: nothing resent
    ("", "", ""),
])
def test_what_is_still_to_send(text: str, sent: str, rest: str):
    assert unsent(text, sent) == rest


def test_every_front_words_the_one_400_in_its_envelope():
    error = bad_request("tools[0].name must be a string.", "tools[0].name")
    assert (error.status, error.param, error.code) == (400, "tools[0].name", "invalid_request")
    bodies = {front.name: front.error_response(error) for front in FRONTS}
    assert {response.status for response in bodies.values()} == {400}
    for name in ("chat", "responses"):
        assert orjson.loads(bodies[name].body)["error"]["param"] == "tools[0].name"
    anthropic = orjson.loads(bodies["messages"].body)
    assert anthropic["error"]["type"] == "invalid_request_error"
    assert "tools[0].name must be a string." in anthropic["error"]["message"]
    assert orjson.loads(bodies["ollama"].body) == {"error": "tools[0].name must be a string."}


def _blocks_of_stream(raw: bytes) -> list[dict]:
    """The content blocks a Messages client assembles from the event stream."""
    blocks: list[dict] = []
    partial: dict[int, str] = {}
    for frame in raw.decode().split("\n\n"):
        data = next((line[6:] for line in frame.splitlines() if line.startswith("data: ")), None)
        event = orjson.loads(data) if data else {}
        if event.get("type") == "content_block_start":
            blocks.append(dict(event["content_block"]))
        elif event.get("type") == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            if delta["type"] == "input_json_delta":
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
            else:
                key = "thinking" if delta["type"] == "thinking_delta" else "text"
                block[key] += delta[key]
    for index, text in partial.items():
        blocks[index]["input"] = orjson.loads(text)
    return blocks


# What went out live before the end (the hold-back lets reasoning finish before text flows).
@pytest.mark.parametrize(("thinking", "text"), [("", ""), ("Thi", ""), ("Think.", "Rea")])
def test_the_messages_json_and_stream_hold_the_same_blocks(thinking: str, text: str):
    from proxy.base.config import Config
    from proxy.fronts import Incoming, messages

    raw = orjson.dumps({"model": "m", "max_tokens": 64, "stream": True,
                        "messages": [{"role": "user", "content": "hi"}]})
    plan = messages.parse(Incoming.post(messages.PATH, raw), Config())
    calls = tuple(Call(f"call_{n}x", "read", f'{{"path": "/{n}"}}') for n in (1, 2))
    completion = TurnResult("c", 1, "m", (Choice(0, "Reading.", "Think.", calls, "tool_calls"),),
                            Usage(prompt_tokens=5, completion_tokens=7))
    stream = messages.MessagesStream.for_plan(plan)
    raw_stream = (stream.head() + stream.reasoning(thinking) + stream.text(text)
                  + stream.answer(completion))
    content = orjson.loads(messages.render_json(plan, completion))["content"]
    assert [block["type"] for block in content] == ["thinking", "text", "tool_use", "tool_use"]
    assert _blocks_of_stream(raw_stream) == content


def _sse_events(data: bytes) -> list[dict]:
    """The data of every SSE event (comments and `[DONE]` left out)."""
    out = []
    for frame in data.split(b"\n\n"):
        line = next((raw for raw in frame.split(b"\n") if raw.startswith(b"data: ")), None)
        if line is not None and line != b"data: [DONE]":
            out.append(orjson.loads(line[6:]))
    return out


def _chat_read(data: bytes) -> tuple[str, str]:
    deltas = [choice["delta"] for e in _sse_events(data) for choice in e.get("choices", ())]
    return ("".join(d.get("reasoning_content") or "" for d in deltas),
            "".join(d.get("content") or "" for d in deltas))


def _responses_read(data: bytes) -> tuple[str, str]:
    events = _sse_events(data)
    return ("".join(e["delta"] for e in events
                    if e["type"] == "response.reasoning_summary_text.delta"),
            "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta"))


def _messages_read(data: bytes) -> tuple[str, str]:
    blocks = _blocks_of_stream(data)
    return ("".join(b.get("thinking", "") for b in blocks if b["type"] == "thinking"),
            "".join(b.get("text", "") for b in blocks if b["type"] == "text"))


def _ollama_read(data: bytes) -> tuple[str, str]:
    lines = [orjson.loads(line) for line in data.splitlines()]
    assert [line["done"] for line in lines].count(True) == 1
    assert lines[-1]["done"] is True
    return ("".join(line["message"].get("thinking", "") for line in lines),
            "".join(line["message"]["content"] for line in lines))


_READERS = {"chat": _chat_read, "responses": _responses_read, "messages": _messages_read,
            "ollama": _ollama_read}
_BODIES = {"chat": {"messages": [{"role": "user", "content": "hi"}],  # a turn: with tools
                    "tools": [{"type": "function", "function": {"name": "read"}}]},
           "responses": {"input": "hi"},
           "messages": {"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
           "ollama": {"messages": [{"role": "user", "content": "hi"}]}}


def _writer(name: str):
    from proxy.base.config import Config
    from proxy.fronts import Incoming

    front = next(front for front in FRONTS if front.name == name)
    raw = orjson.dumps({"model": "m", "stream": True, **_BODIES[name]})
    return front.stream_writer(front.parse(Incoming.post(front.path, raw), Config()))


_TEXT = st.text(alphabet="ab é\n<>{}", max_size=12)


@settings(max_examples=150, deadline=None)
@given(reasoning=_TEXT, content=_TEXT, cut=st.data())
@pytest.mark.parametrize("name", sorted(_READERS))
def test_every_writer_streams_what_it_would_answer_whole(name, reasoning, content, cut):
    """Whatever went out live (a prefix of the reasoning, then of the text, in pieces), what
    a client reads of the stream is the finished answer: the streamed mode's rule through
    every front's writer."""
    completion = TurnResult("c", 1, "m", (Choice(0, content or None, reasoning or None),),
                            Usage())
    writer = _writer(name)
    data = writer.head()
    said = cut.draw(st.integers(0, len(reasoning)))
    pieces = cut.draw(st.lists(st.integers(0, said), max_size=3))
    for start, end in zip([0, *sorted(pieces)], [*sorted(pieces), said], strict=True):
        data += writer.reasoning(reasoning[start:end])
    if said == len(reasoning):
        data += writer.text(content[:cut.draw(st.integers(0, len(content)))])
    data += writer.answer(completion)
    whole = _writer(name)
    assert _READERS[name](data) == (reasoning, content)
    assert _READERS[name](whole.head() + whole.answer(completion)) == (reasoning, content)


_RESULT = TurnResult("chatcmpl-1", 1, "m", (Choice(
    0, "Reading.", "Think.", (Call("call_" + "a" * 24, "read", '{"path": "/a"}', "hermes"),),
    "tool_calls"),), Usage(prompt_tokens=9, completion_tokens=4, total_tokens=13,
                           prompt_details={"cached_tokens": 5}))


def _rendered(name: str, body: dict, config) -> dict:
    from proxy.fronts import Incoming

    front = next(front for front in FRONTS if front.name == name)
    raw = orjson.dumps({"model": "m", **body})
    return orjson.loads(front.render_json(front.parse(Incoming.post(front.path, raw), config),
                                          _RESULT))


def _wire_read(name: str, answer: dict) -> tuple:
    """(reasoning, text, calls as (name, arguments), finish, input tokens) as each wire says."""
    if name == "chat":
        (choice,) = answer["choices"]
        message = choice["message"]
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        calls = [(c["function"]["name"], c["function"]["arguments"])
                 for c in message.get("tool_calls") or ()]
        return (reasoning, message["content"], calls, choice["finish_reason"],
                answer["usage"]["prompt_tokens"])
    if name == "responses":
        items = answer["output"]
        reasoning = [i["summary"][0]["text"] for i in items if i["type"] == "reasoning"]
        texts = [p["text"] for i in items if i["type"] == "message" for p in i["content"]]
        calls = [(i["name"], i["arguments"]) for i in items if i["type"] == "function_call"]
        return ((reasoning or [None])[0], (texts or [None])[0], calls, answer["status"],
                answer["usage"]["input_tokens"])
    if name == "ollama":
        message = answer["message"]
        calls = [(c["function"]["name"], orjson.dumps(c["function"]["arguments"]).decode())
                 for c in message.get("tool_calls") or ()]
        return (message.get("thinking"), message["content"], calls, answer["done_reason"],
                answer["prompt_eval_count"])
    blocks = answer["content"]
    return (next((b["thinking"] for b in blocks if b["type"] == "thinking"), None),
            next((b["text"] for b in blocks if b["type"] == "text"), None),
            [(b["name"], orjson.dumps(b["input"]).decode()) for b in blocks
             if b["type"] == "tool_use"], answer["stop_reason"],
            sum(answer["usage"][k] for k in ("input_tokens", "cache_read_input_tokens")))


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "both", "drop"])
def test_every_front_renders_the_one_typed_result(field):
    """One `TurnResult`, four wires: each says the same reasoning, text, calls, finish and
    prompt tokens in its own words, and chat's `reasoning_field` names the reasoning on the
    chat wire alone (it is the core that leaves the reasoning out when it is not shown)."""
    from proxy.base.config import Config

    config = Config(reasoning_field=field)
    tools = {"chat": {"messages": [{"role": "user", "content": "hi"}],
                      "tools": [{"type": "function", "function": {"name": "read"}}]},
             "responses": {"input": "hi", "tools": [{"type": "function", "name": "read"}]},
             "messages": {"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}],
                          "tools": [{"name": "read", "input_schema": {"type": "object"}}]},
             "ollama": {"messages": [{"role": "user", "content": "hi"}], "stream": False,
                        "tools": [{"type": "function", "function": {"name": "read"}}]}}
    read = {name: _wire_read(name, _rendered(name, body, config)) for name, body in tools.items()}
    calls = [("read", '{"path":"/a"}')]
    assert read["responses"] == ("Think.", "Reading.", [("read", '{"path": "/a"}')],
                                 "completed", 9)
    assert read["messages"] == ("Think.", "Reading.", calls, "tool_use", 9)
    assert read["ollama"] == ("Think.", "Reading.", calls, "stop", 9)
    chat_reasoning = None if field == "drop" else "Think."
    assert read["chat"] == (chat_reasoning, "Reading.", [("read", '{"path": "/a"}')],
                            "tool_calls", 9)
    chat_message = _rendered("chat", tools["chat"], config)["choices"][0]["message"]
    assert {key for key in chat_message if key.startswith("reasoning")} == {
        "reasoning_content": {"reasoning_content"}, "reasoning": {"reasoning"},
        "both": {"reasoning_content", "reasoning"}, "drop": set()}[field]
