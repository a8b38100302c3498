"""`python -m bench.sse_event`: one huge upstream event in the streamed mode (issue 30).

A 50 MB SSE event (one content delta) fed in pieces as the upstream's socket hands them over:
the CPU it costs the SSE decoder alone, and the decoder with the streamed mode's pure work on
top (`LiveTurn`: the chunk parsed, the text held back or released, the answer assembled).
Measured with the process's CPU clock, the pieces 16 KB and 256 KB (the most one read takes).
Before (issue 30): the decoder held an unfinished event as one buffer and added each piece to
it, a copy of the whole event per piece (7.4 s for 256 KB pieces, 110 s for 16 KB ones), and
the hold-back looked for a line start with five look-behinds at every character (4.4 s more).
After: the decoder holds the pieces and joins them once (0.15 s), the hold-back searches for
what ends a line (decoder + streamed turn: 0.62 s, either piece size; the buffered mode reads
the same answer in about 0.3 s). docs/streamed-mode.md quotes the figures.
"""

from __future__ import annotations

import argparse
import time

import orjson

from proxy.base.sse import SseDecoder
from proxy.shell.config_load import build_config
from proxy.turn.live import LiveTurn
from proxy.turn.plan import TurnPlan, plan_chat

TOOL = {"type": "function", "function": {"name": "read", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}


def stream(megabytes: int) -> bytes:
    """A streamed answer whose content comes as one event of about `megabytes` MB."""
    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return b"data: " + orjson.dumps({"id": "c", "object": "chat.completion.chunk",
                                         "created": 1, "model": "m", "choices": [
                                             {"index": 0, "delta": delta,
                                              "finish_reason": finish}]}) + b"\n\n"
    text = "word " * (megabytes * 1024 * 1024 // 5)
    return (chunk({"role": "assistant", "content": ""}) + chunk({"content": text})
            + chunk({}, "stop") + b"data: [DONE]\n\n")


def plan() -> TurnPlan:
    """A streamed tool turn (what reads the events in `stream_mode: stream`)."""
    config = build_config({"upstream": "http://127.0.0.1:9", "stream_mode": "stream"})
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL],
            "stream": True}
    made = plan_chat(orjson.dumps(body), config)
    assert isinstance(made, TurnPlan)
    assert made.streamed
    return made


def cpu(raw: bytes, piece: int, live: bool) -> float:
    """Seconds of CPU to read `raw` in pieces of `piece` bytes (with the LiveTurn's work)."""
    decoder = SseDecoder()
    turn = LiveTurn(plan()) if live else None
    started = time.process_time()
    for at in range(0, len(raw), piece):
        events = decoder.feed(raw[at:at + piece])
        if turn is not None and turn.feed(events):
            turn.release()
    if turn is not None:
        turn.release()
        turn.reply()
    return time.process_time() - started


def main() -> None:
    """Print the CPU seconds of each case."""
    parser = argparse.ArgumentParser(prog="python -m bench.sse_event", description=__doc__)
    parser.add_argument("--megabytes", type=int, default=50)
    args = parser.parse_args()
    raw = stream(args.megabytes)
    for piece in (16 << 10, 256 << 10):
        for live in (False, True):
            what = "decoder + streamed turn" if live else "decoder alone"
            print(f"{len(raw) / 1e6:.0f} MB event, {piece >> 10} KB pieces, {what}: "
                  f"{cpu(raw, piece, live):.2f} s CPU")


if __name__ == "__main__":
    main()
