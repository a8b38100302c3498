"""One huge upstream event (issue 30, item 6): the decoder reads it whole however the bytes
are cut (its cost is linear: `python -m bench.sse_event` measures it), refuses one that
outgrows its limit as soon as it does, and the streamed mode ends the client's stream with
that error while the upstream is still sending the event."""

from __future__ import annotations

import orjson
import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.base.sse import SseDecoder, SseEventTooLarge
from tests.conftest import TOOLS
from tests.fake_vllm import Answer

LINE_ENDS = [b"\n", b"\r\n", b"\r"]
DATA = st.binary(max_size=30).map(
    lambda raw: raw.replace(b"\r", b"").replace(b"\n", b"") or b"x")


def _event(lines: list[bytes], end: bytes) -> bytes:
    return b"".join(b"data: " + line + end for line in lines) + end


def _fed(decoder: SseDecoder, raw: bytes, cuts: list[int]) -> list[bytes]:
    """What `decoder` gives for `raw` fed in pieces cut at `cuts`."""
    out: list[bytes] = []
    start = 0
    for cut in [*sorted(cuts), len(raw)]:
        out += decoder.feed(raw[start:cut])
        start = cut
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(DATA, min_size=1, max_size=3), st.sampled_from(LINE_ENDS)),
                max_size=6),
       st.data())
def test_events_decode_alike_however_the_bytes_are_cut(events, data):
    raw = b"".join(_event(lines, end) for lines, end in events)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12))
    expected = [b"\n".join(lines) for lines, _ in events]
    assert SseDecoder().feed(raw) == expected
    assert _fed(SseDecoder(), raw, cuts) == expected


@pytest.mark.parametrize("end", LINE_ENDS)
@pytest.mark.parametrize("piece", [1 << 10, 16 << 10, (64 << 10) + 3])
def test_a_large_event_split_across_many_chunks_decodes_whole(end, piece):
    text = "".join(f"word {i} " for i in range(400_000))  # some 4.5 MB of content
    big = b'{"choices": [{"delta": {"content": ' + orjson.dumps(text) + b"}}]}"
    raw = (_event([b'{"first": 1}'], end) + _event([big], end) + b": comment" + end + end
           + _event([b"[DONE]"], end))
    decoder = SseDecoder()
    out = _fed(decoder, raw, list(range(piece, len(raw), piece)))
    assert out == [b'{"first": 1}', big, b"[DONE]"]
    assert orjson.loads(out[1])["choices"][0]["delta"]["content"] == text
    assert decoder.pending == b""


def test_an_event_cut_off_at_the_end_stays_pending_whole():
    decoder = SseDecoder()
    head = b"data: " + b"x" * 100_000
    assert _fed(decoder, b"data: a\n\n" + head, list(range(7, 100_000, 997))) == [b"a"]
    assert decoder.pending == head


def test_an_event_past_the_limit_is_refused_as_soon_as_it_grows_past_it():
    decoder = SseDecoder(max_event=1000)
    assert decoder.feed(b"data: " + b"a" * 994 + b"\n\ndata: ") == [b"a" * 994]  # 1000: fits
    assert decoder.feed(b"b" * 900) == []
    with pytest.raises(SseEventTooLarge):
        decoder.feed(b"b" * 100)  # not yet ended, already past the limit


def test_many_whole_events_in_one_piece_are_not_held_against_the_limit():
    decoder = SseDecoder(max_event=100)
    raw = b"".join(b"data: %d\n\n" % i for i in range(1000))
    assert decoder.feed(raw) == [b"%d" % i for i in range(1000)]


# --- the streamed mode ------------------------------------------------------------------------

def _chunk(delta: dict) -> bytes:
    return b"data: " + orjson.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1,
                                     "model": "m", "choices": [{"index": 0, "delta": delta,
                                                                "finish_reason": None}]}) + b"\n\n"


def _sse_events(response: requests.Response):
    """The data of each event of a streamed answer, as it arrives."""
    decoder = SseDecoder()
    for piece in response.iter_content(chunk_size=None):
        yield from decoder.feed(piece)


class _Counted(list):
    """Chunks for the fake that count how many it has taken to send."""

    given = 0

    def __iter__(self):
        for chunk in super().__iter__():
            self.given += 1
            yield chunk


def test_an_upstream_event_past_the_limit_ends_the_clients_stream_before_it_is_read(
        fake, start_proxy):
    limit = 1 << 20
    # `thinking_opened_by_template: false`: the prose flows live at once (a template that may
    # open thinking would hold it until a closer or the end).
    proxy = start_proxy(stream_mode="stream", max_upstream_body_bytes=limit,
                        commit_window_seconds=0.05, thinking_opened_by_template="false")
    # Prose first (the client's stream begins), then an event of 4 MB in 64 KB pieces; the
    # upstream stops after 2 MB of it, until the proxy hangs up (or for two minutes).
    huge = _chunk({"content": "x" * (4 << 20)})
    pieces = [huge[i:i + (64 << 10)] for i in range(0, len(huge), 64 << 10)]
    paused_after = 2 + 32
    chunks = _Counted([_chunk({"role": "assistant", "content": ""}),
                       _chunk({"content": "Hello. "}), *pieces])
    fake.answer(Answer(chunks=chunks, pauses={paused_after: 120.0}))
    with requests.post(proxy.url + "/v1/chat/completions", stream=True, timeout=20, json={
            "model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tools": TOOLS, "stream": True}) as response:
        assert response.status_code == 200
        events = []
        for data in _sse_events(response):
            events.append(data)
            if data == b"[DONE]":
                break
    # The proxy hung up before the upstream's pause ended (at the limit, or while the upstream
    # was paused mid-event, as the socket's buffers decide): nothing after the pause was sent.
    assert fake.first_disconnect(within=20) is not None
    assert chunks.given <= paused_after + 1
    errors = [orjson.loads(e)["error"] for e in events if e.startswith(b'{"error"')]
    assert [e["code"] for e in errors] == ["upstream_too_large"]
    assert "is larger than max_upstream_body_bytes" in errors[0]["message"]
    assert events[-1] == b"[DONE]"
    text = "".join(orjson.loads(e)["choices"][0]["delta"].get("content") or ""
                   for e in events if e.startswith(b'{"id"') and orjson.loads(e)["choices"])
    assert text.rstrip() == "Hello."  # the space may be held (a call could follow it)
