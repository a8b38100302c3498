"""A fast fake vLLM (OpenAI-compatible chat completions) for the benchmark.

Why: the benchmark compares "client → proxy → upstream" with "client → upstream" on one small
machine, so the upstream must cost almost nothing and behave the same for both. This server is
plain asyncio HTTP/1.1 with keep-alive, answers from pre-encoded bytes (built once per shape and
cached), and sleeps instead of computing, so it is never the bottleneck.

What it serves:

* `POST /v1/chat/completions`
  - `"stream": false` (or absent): vLLM's non-streaming `chat.completion` JSON, vendor fields
    included (`prompt_logprobs`, `kv_transfer_params`, `stop_reason`, `token_ids`, ...), after
    `delay_ms`, with a body of about `size` bytes;
  - `"stream": true`: headers at once, then after `delay_ms` an SSE stream
    (`data: {chat.completion.chunk}\\n\\n` … `data: [DONE]\\n\\n`, chunked transfer encoding) of
    a role chunk, `chunks` content chunks `gap_ms` apart, a finish chunk and, with
    `stream_options.include_usage`, a usage chunk.
* `GET /v1/models`, `GET /health`, and `GET /fake/stats` (counters: requests, streams open,
  client disconnects seen mid-response).

Every knob has a server-wide default (command-line flags) and can be overridden per request, so
one server serves every scenario, through (later wins):

1. a suffix on the model name after `@`: `"model": "bench@delay_ms=20,size=64k,kind=tool"`
   (survives any proxy that forwards the body, whatever it does with headers);
2. the query string: `/v1/chat/completions?delay_ms=0&size=1m`;
3. an `X-Fake: delay_ms=0,chunks=60,gap_ms=500` request header.

Knobs: `delay_ms` (before the answer; the stand-in for generation), `size` (bytes of the JSON
body, or of the streamed content; `1k`, `64k`, `1m` accepted), `chunks`, `gap_ms`, `kind`
(`tool`: prose padding then a Hermes `<tool_call>{"name": "read", ...}</tool_call>` in
`content`; `text`: prose only; `bigargs`: a Hermes `write` call whose `content` argument holds
the padding; `native`: vLLM-parsed `tool_calls`, content null; `botched`: prose, then a Hermes
`read` call whose arguments are no JSON; `calls`: the content a constrained engine writes for
vLLM's `required` schema, a JSON array of calls) and `status` (a non-200 answers with OpenAI's
error envelope, e.g. 429 or 503). The model never calls unless constrained: a request whose
`structured_outputs` holds a `json` schema (vLLM's own constraint) is answered `kind=calls`
whatever its kind (`text` and `botched` become a call; the constrained re-asks' rows).

Faults (`fault=...`, for the soak, `tools/soak.py`), applied after `delay_ms`:

* `cut`: the answer starts (JSON: the head and half the body; stream: the first events), then
  the connection closes;
* `stall`: the same start, then nothing more until the client goes away;
* `silent`: the request is read and nothing is ever sent, until the client goes away;
* `drop`: the connection closes without any answer;
* `garbage`: `200` with a JSON content type and a body that is not JSON;
* `html`: an nginx-style HTML error page, with `status` (so `fault=html,status=502`);
* `empty`: `200` with a JSON content type and an empty body.

A held connection (`stall`, `silent`) is released after at most `HOLD_LIMIT_SECONDS`.

Held-stream mode is `chunks=60,gap_ms=500` (30 s, a chunk every 500 ms); the buffered
"wait 30 s then answer" mode is `delay_ms=30000` on a non-streaming request.

Run: `python -m bench.fake_upstream --port 0` prints `FAKE_UPSTREAM_READY http://127.0.0.1:PORT`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import resource
import signal
import sys
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

READY_MARKER = "FAKE_UPSTREAM_READY"
KINDS = ("tool", "text", "bigargs", "native", "botched", "calls")
FAULTS = ("cut", "stall", "silent", "drop", "garbage", "html", "empty")
HOLD_LIMIT_SECONDS = 300.0
GARBAGE_BODY = (b'{"id": "chatcmpl-garbage", "object": "chat.completion", "choices": '
                b'[{"index": 0, "message": {"role": "assistant", "content": "the answer was')
HTML_BODY = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
             b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
             b"</body>\r\n</html>\r\n")
_CACHE_LIMIT = 512  # the soak mixes a few hundred shapes
_MAX_HEADER_BYTES = 64 * 1024
_MAX_BODY_BYTES = 64 * 1024 * 1024
_CREATED = 1_760_000_000  # fixed: responses are pre-encoded and cached per shape

_WORDS = (
    "the", "model", "reads", "the", "file", "and", "then", "decides", "which", "tool",
    "to", "call", "next", "because", "the", "user", "asked", "for", "a", "careful",
    "change", "to", "the", "parser", "so", "that", "every", "frame", "is", "checked",
    "against", "the", "schema", "while", "the", "stream", "keeps", "flowing", "to", "the",
    "client", "who", "waits", "for", "an", "answer", "about", "configuration", "values",
    "and", "the", "tests", "that", "cover", "them",
)


@dataclasses.dataclass(frozen=True)
class FakeConfig:
    """How one response is shaped and timed."""

    delay_ms: float = 20.0
    size: int = 1024
    chunks: int = 100
    gap_ms: float = 20.0
    kind: str = "tool"
    status: int = 200
    fault: str = ""

    def merged(self, spec: str) -> FakeConfig:
        """This config with the `key=value` pairs of `spec` (`,` `;` or `&` separated) applied."""
        if not spec:
            return self
        changes: dict[str, Any] = {}
        for part in spec.replace(";", ",").replace("&", ",").split(","):
            key, sep, value = part.strip().partition("=")
            if not sep:
                continue
            key = key.strip().replace("-", "_")
            value = value.strip()
            if key in ("delay_ms", "gap_ms"):
                changes[key] = max(0.0, float(value))
            elif key == "size":
                changes[key] = parse_size(value)
            elif key in ("chunks", "status"):
                changes[key] = int(value)
            elif key == "kind" and value in KINDS:
                changes[key] = value
            elif key == "fault" and value in (*FAULTS, "", "none"):
                changes[key] = "" if value == "none" else value
        return dataclasses.replace(self, **changes) if changes else self


def parse_size(text: str) -> int:
    """`1024`, `1k`, `64K`, `1m` → bytes (binary multiples)."""
    text = text.strip().lower().removesuffix("b")
    scale = 1
    if text and text[-1] in "km":
        scale = 1024 if text[-1] == "k" else 1024 * 1024
        text = text[:-1]
    return max(0, int(float(text) * scale))


def padding_text(n_chars: int) -> str:
    """Deterministic prose of `n_chars` characters, with paragraphs and a few quotes."""
    parts: list[str] = []
    total = 0
    i = 0
    while total < n_chars:
        word = _WORDS[i % len(_WORDS)]
        if i % 97 == 96:
            piece = '"' + word + '"\n\n'
        elif i % 13 == 12:
            piece = word + ". "
        else:
            piece = word + " "
        parts.append(piece)
        total += len(piece)
        i += 1
    return "".join(parts)[:n_chars]


_READ_CALL = {"name": "read", "arguments": {"path": "/srv/app/main.py", "offset": 0, "limit": 200}}


def _content_for(kind: str, n_chars: int) -> str | None:
    if kind == "native":
        return None
    if kind == "text":
        return padding_text(n_chars)
    if kind == "bigargs":
        call = {"name": "write", "arguments": {"path": "/srv/app/big.txt",
                                               "content": padding_text(n_chars)}}
        return "I will write the file.\n\n<tool_call>\n" + orjson.dumps(call).decode() + \
            "\n</tool_call>"
    if kind == "calls":
        return orjson.dumps([_READ_CALL]).decode()
    if kind == "botched":
        call_text = '\n\n<tool_call>\n{"name": "read", "arguments": "{path: /srv/app/main.py"}' \
            "\n</tool_call>"
    else:
        call_text = "\n\n<tool_call>\n" + orjson.dumps(_READ_CALL).decode() + "\n</tool_call>"
    return padding_text(max(0, n_chars - len(call_text))) + call_text


def _message(kind: str, content: str | None) -> dict[str, Any]:
    tool_calls: list[dict[str, Any]] = []
    if kind == "native":
        tool_calls = [{"id": "chatcmpl-tool-bench0001", "type": "function",
                       "function": {"name": "read",
                                    "arguments": orjson.dumps(_READ_CALL["arguments"]).decode()}}]
    return {"role": "assistant", "content": content, "refusal": None, "annotations": None,
            "audio": None, "function_call": None, "tool_calls": tool_calls,
            "reasoning_content": None}


def _usage(content: str | None) -> dict[str, Any]:
    completion = max(1, len(content or "") // 4)
    return {"prompt_tokens": 211, "total_tokens": 211 + completion,
            "completion_tokens": completion, "prompt_tokens_details": None}


def completion_body(cfg: FakeConfig, model: str) -> bytes:
    """vLLM's non-streaming chat.completion, about `cfg.size` bytes long."""

    def build(n_chars: int) -> bytes:
        content = _content_for(cfg.kind, n_chars)
        finish = "tool_calls" if cfg.kind == "native" else "stop"
        return orjson.dumps({
            "id": "chatcmpl-bench0001", "object": "chat.completion", "created": _CREATED,
            "model": model,
            "choices": [{"index": 0, "message": _message(cfg.kind, content), "logprobs": None,
                         "finish_reason": finish, "stop_reason": None, "token_ids": None}],
            "service_tier": None, "system_fingerprint": None, "usage": _usage(content),
            "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None,
        })

    n_chars = cfg.size
    body = build(n_chars)
    for _ in range(4):  # escapes and overhead: converge on the requested size
        if cfg.kind == "native" or abs(len(body) - cfg.size) <= 8:
            break
        n_chars = max(0, n_chars - (len(body) - cfg.size))
        body = build(n_chars)
    return body


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None,
           extra: dict[str, Any] | None = None) -> bytes:
    obj: dict[str, Any] = {
        "id": "chatcmpl-bench0001", "object": "chat.completion.chunk", "created": _CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                     "stop_reason": None, "token_ids": None}],
    }
    if extra:
        obj.update(extra)
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


@dataclasses.dataclass
class StreamPlan:
    """Pre-encoded pieces of one SSE answer, each already framed as an HTTP chunk."""

    first: bytes  # role chunk + first content chunk
    middle: list[bytes]  # the remaining content chunks, one per gap
    tail_plain: bytes  # finish chunk + [DONE] + terminating 0-chunk
    tail_usage: bytes  # the same with a usage chunk


def stream_events(cfg: FakeConfig, model: str) -> tuple[list[bytes], bytes, bytes]:
    """The SSE events of a streamed answer, in order: the role chunk, `cfg.chunks` content
    pieces and the finish chunk; then the usage chunk and `data: [DONE]` separately."""
    content = _content_for(cfg.kind, cfg.size) or ""
    n = max(1, cfg.chunks)
    step = max(1, -(-len(content) // n)) if content else 1
    pieces = [content[i * step:(i + 1) * step] for i in range(n)]
    role = _chunk(model, {"role": "assistant", "content": ""})
    finish_reason = "tool_calls" if cfg.kind == "native" else "stop"
    finish = _chunk(model, {}, finish_reason)
    usage = b"data: " + orjson.dumps({
        "id": "chatcmpl-bench0001", "object": "chat.completion.chunk", "created": _CREATED,
        "model": model, "choices": [], "usage": _usage(content)}) + b"\n\n"
    events = [role, *(_chunk(model, {"content": p}) for p in pieces), finish]
    return events, usage, b"data: [DONE]\n\n"


def stream_body(cfg: FakeConfig, model: str, usage: bool) -> bytes:
    """The whole SSE body of a streamed answer as a client reads it (transfer framing off)."""
    events, usage_event, done = stream_events(cfg, model)
    return b"".join(events) + (usage_event if usage else b"") + done


def stream_plan(cfg: FakeConfig, model: str) -> StreamPlan:
    """The SSE events of a streamed answer framed as HTTP chunks, one frame per gap."""
    events, usage, done = stream_events(cfg, model)
    role, content, finish = events[0], events[1:-1], events[-1]
    end = b"0\r\n\r\n"
    return StreamPlan(
        first=_frame(role + content[0]),
        middle=[_frame(e) for e in content[1:]],
        tail_plain=_frame(finish + done) + end,
        tail_usage=_frame(finish + usage + done) + end,
    )


def cut_point(cfg: FakeConfig) -> int:
    """How many frames of a stream (after the first) `cut` and `stall` send: up to two."""
    return min(2, max(0, cfg.chunks - 1))


def fault_answer(cfg: FakeConfig) -> tuple[int, str, bytes] | None:
    """(status, content type, body) of a fault that answers in full, else None."""
    if cfg.fault == "garbage":
        return 200, "application/json", GARBAGE_BODY
    if cfg.fault == "html":
        return cfg.status, "text/html", HTML_BODY
    if cfg.fault == "empty":
        return 200, "application/json", b""
    return None


def error_body(status: int) -> bytes:
    """The JSON body the fake sends with a non-200 `status`."""
    return orjson.dumps({"error": {"message": f"fake upstream status {status}",
                                   "type": "server_error", "param": None, "code": status}})


# What the proxy asks a server of itself (its upstream profile), not a client's request.
_INFO = frozenset({("GET", "/v1/models"), ("GET", "/version"), ("POST", "/tokenize")})


class _Stats:
    """Counters exposed on GET /fake/stats (benchmark diagnostics and disconnect tests)."""

    def __init__(self) -> None:
        self.requests = 0
        self.info = 0  # of which: what a server is asked of itself (models, version, tokenize)
        self.open_streams = 0
        self.open_connections = 0
        self.peak_connections = 0
        self.disconnects = 0  # client went away before the response was complete
        self.faults = 0  # answers shaped by a `fault` knob
        self.holding = 0  # connections held open by `stall` / `silent` right now

    def as_json(self) -> bytes:
        return orjson.dumps(self.__dict__)


class FakeUpstream:
    """The server: one asyncio task per connection, HTTP/1.1 keep-alive."""

    def __init__(self, defaults: FakeConfig) -> None:
        self.defaults = defaults
        self.stats = _Stats()
        self._json_cache: dict[tuple[FakeConfig, str], bytes] = {}
        self._stream_cache: dict[tuple[FakeConfig, str], StreamPlan] = {}

    # ---- shapes, built once ------------------------------------------------------------
    def _json_response(self, cfg: FakeConfig, model: str) -> bytes:
        key = (cfg, model)
        cached = self._json_cache.get(key)
        if cached is None:
            body = error_body(cfg.status) if cfg.status != 200 else completion_body(cfg, model)
            cached = _head(cfg.status, "application/json", len(body)) + body
            if len(self._json_cache) >= _CACHE_LIMIT:
                self._json_cache.clear()
            self._json_cache[key] = cached
        return cached

    def _stream(self, cfg: FakeConfig, model: str) -> StreamPlan:
        key = (cfg, model)
        cached = self._stream_cache.get(key)
        if cached is None:
            cached = stream_plan(cfg, model)
            if len(self._stream_cache) >= _CACHE_LIMIT:
                self._stream_cache.clear()
            self._stream_cache[key] = cached
        return cached

    # ---- connection loop ---------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests on one connection until the client closes it."""
        st = self.stats
        st.open_connections += 1
        st.peak_connections = max(st.peak_connections, st.open_connections)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        ConnectionError):
                    return
                method, target, version, headers = _parse_head(head)
                body = await _read_body(reader, headers)
                st.requests += 1
                keep_alive = _keep_alive(version, headers)
                if not await self._dispatch(method, target, headers, body, reader, writer):
                    return
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            st.open_connections -= 1
            with contextlib.suppress(Exception):
                writer.close()

    async def _dispatch(self, method: str, target: str, headers: dict[str, str], body: bytes,
                        reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close."""
        split = urlsplit(target)
        path = split.path
        if method == "POST" and path == "/v1/chat/completions":
            return await self._chat(split.query, headers, body, reader, writer)
        if (method, path) in _INFO:
            self.stats.info += 1
        if method == "GET" and path == "/v1/models":
            payload = orjson.dumps({"object": "list", "data": [
                {"id": "bench", "object": "model", "created": _CREATED, "owned_by": "vllm",
                 "root": "bench", "parent": None, "max_model_len": 131072}]})
            writer.write(_head(200, "application/json", len(payload)) + payload)
        elif method == "GET" and path == "/version":  # vLLM's own
            payload = orjson.dumps({"version": "0.33.0"})
            writer.write(_head(200, "application/json", len(payload)) + payload)
        elif method == "POST" and path == "/tokenize":
            payload = _tokenized(body)
            writer.write(_head(200, "application/json", len(payload)) + payload)
        elif method == "GET" and path == "/health":
            writer.write(_head(200, "application/json", 0))
        elif method == "GET" and path == "/fake/stats":
            payload = self.stats.as_json()
            writer.write(_head(200, "application/json", len(payload)) + payload)
        else:
            payload = orjson.dumps({"error": {"message": f"no route {method} {path}",
                                              "type": "not_found_error"}})
            writer.write(_head(404, "application/json", len(payload)) + payload)
        await writer.drain()
        return True

    async def _chat(self, query: str, headers: dict[str, str], body: bytes,
                    reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            request = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            payload = b'{"error":{"message":"invalid JSON","type":"invalid_request_error"}}'
            writer.write(_head(400, "application/json", len(payload)) + payload)
            await writer.drain()
            return True
        model = str(request.get("model") or "bench")
        cfg = self.defaults
        _, at, spec = model.partition("@")
        if at:
            cfg = cfg.merged(spec)
        if query:
            cfg = cfg.merged("&".join(f"{k}={v}" for k, v in parse_qsl(query)))
        if "x-fake" in headers:
            cfg = cfg.merged(headers["x-fake"])
        if cfg.fault:
            return await self._fault(cfg, model, bool(request.get("stream")), reader, writer)
        constrained = request.get("structured_outputs")
        if isinstance(constrained, dict) and constrained.get("json") is not None:
            cfg = dataclasses.replace(cfg, kind="calls")
        if request.get("stream") and cfg.status == 200:
            options = request.get("stream_options") or {}
            usage = bool(isinstance(options, dict) and options.get("include_usage"))
            return await self._stream_answer(cfg, model, usage, writer)
        response = self._json_response(cfg, model)
        if cfg.delay_ms:
            await asyncio.sleep(cfg.delay_ms / 1000.0)
        writer.write(response)
        await writer.drain()
        return True

    async def _fault(self, cfg: FakeConfig, model: str, stream: bool,
                     reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Misbehave as `cfg.fault` says; False when the connection must close."""
        self.stats.faults += 1
        if cfg.delay_ms:
            await asyncio.sleep(cfg.delay_ms / 1000.0)
        answer = fault_answer(cfg)
        if answer is not None:
            status, content_type, payload = answer
            writer.write(_head(status, content_type, len(payload)) + payload)
            await writer.drain()
            return True
        if cfg.fault in ("cut", "stall"):
            if stream:
                plan = self._stream(dataclasses.replace(cfg, fault=""), model)
                writer.write(_SSE_HEAD + plan.first + b"".join(plan.middle[:cut_point(cfg)]))
            else:
                whole = self._json_response(dataclasses.replace(cfg, fault="", status=200),
                                            model)
                head_end = whole.index(b"\r\n\r\n") + 4
                writer.write(whole[:head_end + (len(whole) - head_end) // 2])
            await writer.drain()
        if cfg.fault in ("stall", "silent"):
            await self._hold(reader)
        return False

    async def _hold(self, reader: asyncio.StreamReader) -> None:
        """Send nothing until the client closes the connection (or the hold limit passes)."""
        st = self.stats
        st.holding += 1
        try:
            async with asyncio.timeout(HOLD_LIMIT_SECONDS):
                while await reader.read(65536):
                    pass
        except (TimeoutError, ConnectionError):
            pass
        finally:
            st.holding -= 1
            st.disconnects += 1

    async def _stream_answer(self, cfg: FakeConfig, model: str, usage: bool,
                             writer: asyncio.StreamWriter) -> bool:
        plan = self._stream(cfg, model)
        loop = asyncio.get_running_loop()
        st = self.stats
        st.open_streams += 1
        try:
            writer.write(_SSE_HEAD)
            await writer.drain()
            start = loop.time() + cfg.delay_ms / 1000.0
            if cfg.delay_ms:
                await asyncio.sleep(cfg.delay_ms / 1000.0)
            writer.write(plan.first)
            await writer.drain()
            gap = cfg.gap_ms / 1000.0
            for i, frame in enumerate(plan.middle, start=1):
                if gap:
                    # absolute schedule: gaps do not drift with load
                    await asyncio.sleep(max(0.0, start + i * gap - loop.time()))
                if writer.is_closing():
                    raise ConnectionResetError
                writer.write(frame)
                if gap or writer.transport.get_write_buffer_size() > 256 * 1024:
                    await writer.drain()
            writer.write(plan.tail_usage if usage else plan.tail_plain)
            await writer.drain()
            return True
        except (ConnectionError, RuntimeError):
            st.disconnects += 1
            return False
        finally:
            st.open_streams -= 1


_SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
             b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n"
             b"server: fake-vllm\r\n\r\n")
_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 429: b"Too Many Requests",
            500: b"Internal Server Error", 502: b"Bad Gateway", 503: b"Service Unavailable"}


def _tokenized(body: bytes) -> bytes:
    """vLLM's `/tokenize` answer for a chat, rendered by a ChatML template that opens no
    thinking (the bench model's): `count`, `max_model_len`, `tokens`, and with
    `return_token_strs` the tokens' text."""
    try:
        request = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        request = {}
    messages = request.get("messages") if isinstance(request, dict) else None
    pieces: list[str] = []
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            pieces += ["<|im_start|>", f"{message.get('role')}\n{message.get('content')}",
                       "<|im_end|>", "\n"]
    if isinstance(request, dict) and request.get("add_generation_prompt", True):
        pieces += ["<|im_start|>", "assistant\n"]
    strs = pieces if isinstance(request, dict) and request.get("return_token_strs") else None
    return orjson.dumps({"count": len(pieces), "max_model_len": 131072,
                         "tokens": list(range(len(pieces))), "token_strs": strs})


def _head(status: int, content_type: str, length: int) -> bytes:
    reason = _REASONS.get(status, b"Status")
    extra = b"retry-after: 1\r\n" if status in (429, 503) else b""
    return (b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n%sserver: fake-vllm"
            b"\r\n\r\n" % (status, reason, content_type.encode(), length, extra))


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return method, target, version, headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers
                return b"".join(parts)
            total += size
            if total > _MAX_BODY_BYTES:
                raise ValueError("request body too large")
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = int(headers.get("content-length", "0") or 0)
    if length > _MAX_BODY_BYTES:
        raise ValueError("request body too large")
    return await reader.readexactly(length) if length else b""


def _keep_alive(version: str, headers: dict[str, str]) -> bool:
    connection = headers.get("connection", "").lower()
    if version == "HTTP/1.0":
        return "keep-alive" in connection
    return "close" not in connection


def raise_fd_limit() -> int:
    """Raise the soft open-files limit to the hard one (held streams need thousands)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def serve(host: str, port: int, defaults: FakeConfig, *, backlog: int = 4096,
                ready: asyncio.Future[int] | None = None) -> None:
    """Run the fake until cancelled; prints the ready marker (or resolves `ready`)."""
    upstream = FakeUpstream(defaults)
    server = await asyncio.start_server(upstream.handle, host, port, backlog=backlog,
                                        limit=_MAX_HEADER_BYTES, reuse_address=True)
    bound = server.sockets[0].getsockname()[1]
    if ready is not None:
        ready.set_result(bound)
    else:
        print(f"{READY_MARKER} http://{host}:{bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    """Command line: serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m bench.fake_upstream",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--size", default="1k", help="bytes: 1k, 64k, 1m")
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--kind", choices=KINDS, default="tool")
    parser.add_argument("--backlog", type=int, default=4096)
    args = parser.parse_args(argv)
    if not args.host.startswith("127.") and args.host not in ("localhost", "::1"):
        parser.error("the fake upstream binds loopback only")
    raise_fd_limit()
    defaults = FakeConfig(delay_ms=args.delay_ms, size=parse_size(args.size),
                          chunks=args.chunks, gap_ms=args.gap_ms, kind=args.kind)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serve(args.host, args.port, defaults, backlog=args.backlog)

    started = time.monotonic()
    asyncio.run(run())
    print(f"fake upstream stopped after {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
