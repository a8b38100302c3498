"""A fake vLLM replica that models a prefix cache: its time to first token grows with the
prompt tokens it has not seen (`make bench`, the replicas section, `bench/replicas.py`).

The prompt (the request's tools and messages as JSON) is read as tokens of 4 bytes in blocks
of 16 tokens, each block's hash chained to the ones before it, as vLLM's automatic prefix
caching does: the blocks found in the cache (an LRU of `--cache-tokens`) are not computed
again. Prefill is the replica's compute: one request at a time ("the GPU"), for
`--prefill-us` per token not in cache; decoding then takes `--decode-ms`, beside the others.
Every chat is answered with a `read` tool call, its `usage` saying how many prompt tokens
were cached (vLLM's `prompt_tokens_details.cached_tokens`).

`GET /fake/stats`: requests, prompt tokens, tokens prefilled (not in cache), busy seconds;
`POST /fake/reset` (`{"cache_tokens": N}` optional): cache and figures emptied. Prints
`fake replica ready URL` when it serves.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import threading
import time
import uuid
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

BLOCK_BYTES = 64  # 16 tokens of 4 bytes
READY = "fake replica ready"


class PrefixCache:
    """Block hashes of the prompts seen, least recently used first out."""

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity = max(1, capacity_tokens // (BLOCK_BYTES // 4))
        self.blocks: OrderedDict[bytes, None] = OrderedDict()

    def admit(self, prompt: bytes) -> tuple[int, int]:
        """(prompt tokens, tokens found in cache) for `prompt`, whose blocks are then kept."""
        found = 0
        missing = False
        digest = b""
        for start in range(0, len(prompt) - BLOCK_BYTES + 1, BLOCK_BYTES):
            digest = hashlib.blake2b(digest + prompt[start:start + BLOCK_BYTES],
                                     digest_size=16).digest()
            if not missing and digest in self.blocks:
                found += BLOCK_BYTES // 4
                self.blocks.move_to_end(digest)
                continue
            missing = True
            self.blocks[digest] = None
            if len(self.blocks) > self.capacity:
                self.blocks.popitem(last=False)
        return len(prompt) // 4, found


class Replica:
    """The replica's cache, its compute, and its figures."""

    def __init__(self, prefill_us: float, decode_ms: float, cache_tokens: int) -> None:
        self.prefill_seconds = prefill_us / 1e6
        self.decode_seconds = decode_ms / 1000
        self.cache_tokens = cache_tokens
        self.gpu = threading.Lock()
        self.lock = threading.Lock()
        self.reset()

    def reset(self, cache_tokens: int | None = None) -> None:
        """An empty cache (of `cache_tokens`, when given), figures at zero."""
        with self.lock:
            if cache_tokens:
                self.cache_tokens = cache_tokens
            self.cache = PrefixCache(self.cache_tokens)
            self.stats = {"requests": 0, "prompt_tokens": 0, "prefill_tokens": 0,
                          "busy_seconds": 0.0}

    def chat(self, body: dict[str, Any]) -> bytes:
        """Prefill what is not in cache (one request at a time), decode, answer a call."""
        prompt = orjson.dumps([body.get("tools"), body.get("messages")])
        with self.gpu:
            with self.lock:
                tokens, cached = self.cache.admit(prompt)
            work = (tokens - cached) * self.prefill_seconds
            time.sleep(work)
        time.sleep(self.decode_seconds)
        with self.lock:
            stats = self.stats
            stats["requests"] += 1
            stats["prompt_tokens"] += tokens
            stats["prefill_tokens"] += tokens - cached
            stats["busy_seconds"] += work
        return orjson.dumps(_completion(str(body.get("model") or "bench"), tokens, cached))


def _completion(model: str, tokens: int, cached: int) -> dict[str, Any]:
    call = {"id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}", "type": "function",
            "function": {"name": "read", "arguments": '{"path": "src/main.py"}'}}
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                                                 "reasoning": None, "tool_calls": [call]},
                         "finish_reason": "tool_calls", "logprobs": None}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 12,
                      "total_tokens": tokens + 12,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def serve(replica: Replica, port: int) -> ThreadingHTTPServer:
    """The HTTP server (HTTP/1.1, kept-alive connections, a thread each)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            if self.path == "/fake/stats":
                with replica.lock:
                    self._answer(200, orjson.dumps(replica.stats))
            elif self.path in ("/health", "/v1/models"):
                self._answer(200, orjson.dumps({"object": "list", "data": [
                    {"id": "bench", "object": "model"}]}))
            else:
                self._answer(404, b'{"detail": "Not Found"}')

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/fake/reset":
                replica.reset((orjson.loads(raw) if raw else {}).get("cache_tokens"))
                self._answer(200, b"{}")
            elif self.path == "/v1/chat/completions":
                self._answer(200, replica.chat(orjson.loads(raw)))
            else:
                self._answer(404, b'{"detail": "Not Found"}')

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    """Serve until killed."""
    parser = argparse.ArgumentParser(prog="python -m bench.fake_replica",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--prefill-us", type=float, default=100.0,
                        help="microseconds of prefill per prompt token not in cache")
    parser.add_argument("--decode-ms", type=float, default=50.0)
    parser.add_argument("--cache-tokens", type=int, default=4_000_000)
    args = parser.parse_args(argv)
    server = serve(Replica(args.prefill_us, args.decode_ms, args.cache_tokens), args.port)
    print(f"{READY} http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
