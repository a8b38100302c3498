"""Properties of the SSE renderer: whatever the completion, a client reassembles it exactly."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.base.sse import SseDecoder, SseEvents
from proxy.fronts.chat import StreamIdentity, completion_chunks, heartbeat, role_chunks
from proxy.turn.result import Call, Choice, TurnResult, Usage

IDENT = StreamIdentity("chatcmpl-p", 1, "m")
# Strings as they come out of orjson.loads of an upstream body: no lone surrogates.
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)
values = st.one_of(st.integers(-(2**53), 2**53), text, st.none())
arguments = st.dictionaries(text.map(lambda t: t[:10]), values, max_size=4).map(
    lambda d: orjson.dumps(d).decode())
call = st.builds(lambda i, name, args: Call(f"call_{i:024d}", name, args),
                 st.integers(0, 10**6), text.filter(bool).map(lambda t: t[:20]), arguments)
choice = st.builds(
    lambda content, reasoning, calls, finish: (content, reasoning, tuple(calls),
                                               "tool_calls" if calls else finish),
    st.one_of(st.none(), text), st.one_of(st.none(), text), st.lists(call, max_size=3),
    st.sampled_from(["stop", "length", "content_filter"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(choice, min_size=1, max_size=3), st.booleans(), st.booleans())
def test_stream_reassembles_to_the_completion(choices, include_usage, with_heartbeat):
    choices = [Choice(i, *item) for i, item in enumerate(choices)]
    completion = TurnResult("c", 1, "m", tuple(choices),
                            Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3))
    raw = role_chunks(IDENT)
    if with_heartbeat:
        raw += heartbeat(IDENT, "both")
    raw += b"".join(completion_chunks(IDENT, completion, include_usage))
    events = [e for e in raw.split(b"\n\n") if e and not e.startswith(b":")]
    assert events[-1] == b"data: [DONE]"
    got: dict[int, dict] = {}
    usage = None
    for event in events[:-1]:
        chunk = orjson.loads(event.removeprefix(b"data: "))
        assert (chunk["id"], chunk["created"], chunk["model"]) == ("chatcmpl-p", 1, "m")
        usage = chunk.get("usage") or usage
        for part in chunk["choices"]:
            slot = got.setdefault(part["index"], {"content": "", "reasoning": "", "calls": {},
                                                  "finish": None, "roles": 0})
            delta = part["delta"]
            slot["roles"] += delta.get("role") == "assistant"
            slot["content"] += delta.get("content") or ""
            slot["reasoning"] += delta.get("reasoning_content") or ""
            for piece in delta.get("tool_calls") or ():
                entry = slot["calls"].setdefault(piece["index"], {"id": None, "name": "",
                                                                  "arguments": ""})
                entry["id"] = piece.get("id") or entry["id"]
                entry["name"] += piece.get("function", {}).get("name") or ""
                entry["arguments"] += piece.get("function", {}).get("arguments") or ""
            slot["finish"] = part["finish_reason"] or slot["finish"]
    for item in choices:
        slot = got[item.index]
        assert slot["roles"] == 1  # each choice begins once
        assert slot["content"] == (item.content or "")
        assert slot["reasoning"] == (item.reasoning or "")
        calls = [slot["calls"][i] for i in sorted(slot["calls"])]
        assert calls == [{"id": c.id, "name": c.name, "arguments": c.arguments}
                         for c in item.calls]
        assert slot["finish"] == item.finish
    assert (usage is not None) == include_usage


event = st.builds(lambda body, end: b"data: " + body + end,
                  st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
                  st.sampled_from([b"\n\n", b"\r\n\r\n"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(event, min_size=1, max_size=6), st.binary(max_size=12).map(
    lambda b: b.replace(b"\r", b"").replace(b"\n", b"")), st.data())
def test_relayed_sse_is_cut_only_at_event_boundaries_and_loses_nothing(events, tail, data):
    stream = b"".join(events) + (b"data: " + tail if tail else b"")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    relay = SseEvents()
    out = b""
    for piece in pieces:
        passed = relay.complete(piece)
        assert passed == b"" or passed.endswith((b"\n\n", b"\r\n\r\n"))
        out += passed
    assert out == b"".join(events)  # every whole event, nothing of the half one
    assert out + relay.pending == stream


def test_an_event_longer_than_the_hold_limit_passes_in_pieces():
    relay = SseEvents()
    big = b"x" * (SseEvents.MAX_PENDING // 2)
    assert relay.complete(b"data: " + big) == b""
    assert relay.complete(big) == b"data: " + big + big  # past the limit: passed on as is
    assert relay.complete(b"\n\n") == b"\n\n"


# Bytes an upstream's SSE may hold, in the pieces that matter to the decoder's cuts.
sse_bytes = st.lists(st.sampled_from([b"data: ", b"data:", b"x", b"{}", b"\n", b"\r", b"\n\n",
                                      b": ping", b"event: e"]), max_size=12).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(st.lists(sse_bytes, max_size=4))
def test_the_decoder_reads_pieces_as_it_reads_the_same_bytes_one_at_a_time(pieces):
    # a piece that is one whole event takes a shortcut: the same data as the general path,
    # which a byte at a time always takes
    whole, single = SseDecoder(), SseDecoder()
    taken = [data for piece in pieces for data in whole.feed(piece)]
    one_by_one = [data for piece in pieces for at in range(len(piece))
                  for data in single.feed(piece[at:at + 1])]
    assert taken == one_by_one
    assert whole.pending == single.pending
