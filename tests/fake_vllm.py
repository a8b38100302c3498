"""A fake vLLM 0.33 server on loopback: real HTTP, vLLM's exact response shapes, scripted answers.

Tests script what it answers (`FakeVLLM.answer`) and read what it received (`.received`).
"""

from __future__ import annotations

import itertools
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

MODEL = "Qwen/Qwen3.6-27B-FP8"


def vllm_tool_call(name: str, arguments: str) -> dict[str, Any]:
    """A tool call as vLLM's own parser returns it."""
    return {"id": f"chatcmpl-tool-{uuid.uuid4().hex}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def vllm_completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
    finish_reason: str = "stop",
    model: str = MODEL,
    choices: int = 1,
) -> dict[str, Any]:
    """A non-streaming chat completion exactly as vLLM 0.33 serialises it: every vendor field
    present (null when unused), `reasoning`, and the `tool_calls` key omitted when empty."""
    message: dict[str, Any] = {
        "role": "assistant", "content": content, "refusal": None, "annotations": None,
        "audio": None, "function_call": None, "reasoning": reasoning,
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": i, "message": dict(message), "logprobs": None,
            "finish_reason": finish_reason, "stop_reason": None, "token_ids": None,
            "routed_experts": None,
        } for i in range(choices)],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": {"prompt_tokens": 31, "total_tokens": 52, "completion_tokens": 21,
                  "prompt_tokens_details": {"cached_tokens": 0, "cached_tokens_by_device": None},
                  "completion_tokens_details": None},
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
        "weight_versions": None,
    }


def vllm_error(status: int, message: str, type_: str = "BadRequestError") -> Answer:
    """vLLM's error envelope, with its integer `code`."""
    return Answer(status=status, body={"error": {"message": message, "type": type_,
                                                 "param": None, "code": status}})


def vllm_stream_chunks(text: str, pieces: int = 5, model: str = MODEL) -> list[bytes]:
    """A streamed answer as vLLM sends it: role chunk, content pieces, finish, [DONE]."""
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish, "token_ids": None}]}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    size = max(1, -(-len(text) // pieces))
    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": text[i:i + size]}) for i in range(0, len(text), size)]
    parts += [chunk({}, "stop"), b"data: [DONE]\n\n"]
    return parts


def fake_token_count(body: Any) -> int:
    """The fake tokenizer: a token per 4 bytes of the messages' and tools' JSON."""
    return len(orjson.dumps([body.get("messages"), body.get("tools")])) // 4


def vllm_context_window(window: int, then: Callable[[Received], Answer],
                        prompt_tokens: Callable[[Any], int] = fake_token_count,
                        wording: str = "current") -> Callable[[Received], Answer]:
    """vLLM's check of a request against `--max-model-len` `window`: a prompt plus the
    completion's `max_tokens` (at least 1) that does not fit is refused with a 400 in vLLM's
    words, `current` ones (the prompt counted only up to where it overflows: a floor) or
    `earlier` ones (counted whole); anything else is answered by `then`."""
    def answer(received: Received) -> Answer:
        body = received.json
        prompt = prompt_tokens(body)
        asked = body.get("max_tokens", body.get("max_completion_tokens"))
        wanted = asked or 0
        if prompt + max(wanted, 1) <= window:
            return then(received)
        if wording == "current":
            counted = max(1, min(prompt, window - wanted + 1))
            return vllm_error(400, f"This model's maximum context length is {window} tokens. "
                              f"However, you requested {wanted} output tokens and your prompt "
                              f"contains at least {counted} input tokens, for a total of at "
                              f"least {counted + wanted} tokens. Please reduce the length of "
                              "the input prompt or the number of requested output tokens. "
                              f"(parameter=input_tokens, value={counted})")
        head = f"This model's maximum context length is {window} tokens."
        if asked is None or prompt >= window:
            return vllm_error(400, f"{head} However, your request has {prompt} input tokens. "
                              "Please reduce the length of the input messages.")
        return vllm_error(400, f"'max_tokens' or 'max_completion_tokens' is too large: "
                          f"{asked}. This model's maximum context length is {window} "
                          f"tokens and your request has {prompt} input tokens "
                          f"({asked} > {window} - {prompt}).")
    return answer


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def vllm_stream_of(completion: dict[str, Any], *, size: int = 4, cumulative: bool = False,
                   ids: bool = True, indexes: bool = True, usage: bool = True,
                   done: bool = True, reasoning_key: str = "reasoning") -> list[bytes]:
    """The stream vLLM sends for the same answer as `completion` (built by vllm_completion):
    the role chunk, reasoning and content in pieces of `size` characters, each tool call as
    its own parser streams it (id, name and empty arguments, then the arguments in pieces),
    each choice's finish, the usage chunk and `[DONE]`; choices interleaved, as with `n`.

    `cumulative`: each arguments chunk is the whole arguments so far, and the name comes
    again (llama.cpp). `ids`/`indexes` False: calls without their id / index (servers that
    leave them out). `done` False: the stream ends without `[DONE]`."""
    ident, created, model = completion["id"], completion["created"], completion["model"]

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice: dict[str, Any] = {"index": index, "delta": delta, "logprobs": None,
                                  "finish_reason": finish, "token_ids": None}
        if finish is not None:
            choice["stop_reason"] = None
        return b"data: " + orjson.dumps({"id": ident, "object": "chat.completion.chunk",
                                         "created": created, "model": model,
                                         "choices": [choice]}) + b"\n\n"

    lanes: list[list[bytes]] = []
    for choice in completion["choices"]:
        index, message = choice["index"], choice["message"]
        lane = [chunk(index, {"role": "assistant", "content": ""})]
        lane += [chunk(index, {reasoning_key: part})
                 for part in _pieces(message.get("reasoning") or "", size)]
        lane += [chunk(index, {"content": part})
                 for part in _pieces(message.get("content") or "", size)]
        for position, call in enumerate(message.get("tool_calls") or ()):
            head: dict[str, Any] = {"type": "function",
                                    "function": {"name": call["function"]["name"],
                                                 "arguments": ""}}
            head |= {"id": call["id"]} if ids else {}
            head |= {"index": position} if indexes else {}
            lane.append(chunk(index, {"tool_calls": [head]}))
            arguments = call["function"]["arguments"]
            for end in range(size, len(arguments) + size, size):
                part = arguments[:end] if cumulative else arguments[end - size:end]
                delta: dict[str, Any] = {"function": {"arguments": part}}
                delta |= {"index": position} if indexes else {}
                if cumulative:
                    delta["function"]["name"] = call["function"]["name"]
                    delta |= {"id": call["id"]} if ids else {}
                lane.append(chunk(index, {"tool_calls": [delta]}))
        lane.append(chunk(index, {}, choice["finish_reason"]))
        lanes.append(lane)
    parts = [part for row in itertools.zip_longest(*lanes) for part in row if part]
    if usage:
        parts.append(b"data: " + orjson.dumps({
            "id": ident, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [], "usage": completion["usage"]}) + b"\n\n")
    if done:
        parts.append(b"data: [DONE]\n\n")
    return parts


@dataclass
class Answer:
    """What the fake sends for one request."""

    status: int = 200
    body: Any = None  # dict/list → JSON; bytes → as is
    headers: dict[str, str] = field(default_factory=dict)
    header_lines: list[tuple[str, str]] = field(default_factory=list)  # repeatable names
    delay: float = 0.0  # seconds before the status line
    chunks: list[bytes] | None = None  # streamed with chunked encoding when set
    chunk_gap: float = 0.0
    cut_after: int | None = None  # close the connection after this many body bytes / chunks
    # Streams: after chunk i, wait this many seconds, or until the Event is set (at most 30 s).
    pauses: dict[int, float | threading.Event] = field(default_factory=dict)


def vllm_answer(completion: dict[str, Any], **stream: Any) -> Callable[[Received], Answer]:
    """vLLM's answer to a request of either kind: `completion` as JSON, or (the request
    streams) the same answer streamed (`stream` as for vllm_stream_of)."""
    def answer(received: Received) -> Answer:
        if received.json.get("stream"):
            return Answer(chunks=vllm_stream_of(completion, **stream))
        return Answer(body=completion)
    return answer


@dataclass
class Received:
    """One request as the fake saw it."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> Any:
        """The body decoded as JSON."""
        return orjson.loads(self.raw)


def _validate_like_vllm(body: Any, tool_parser: bool) -> Answer | None:
    """The request checks vLLM 0.33 applies before generating (the ones proxies trip on),
    with a chat template that knows the roles system, user, assistant and tool (Qwen's)."""
    if not isinstance(body, dict):
        return vllm_error(400, "Expected a JSON object")
    if body.get("stream_options") is not None and not body.get("stream"):
        return vllm_error(400, "Stream options can only be defined when `stream=True`.")
    if body.get("tools") == []:
        return vllm_error(400, "tools must not be an empty list")
    choice = body.get("tool_choice")
    if choice is not None and not body.get("tools"):
        return vllm_error(400, "When using `tool_choice`, `tools` must be set.")
    if choice not in (None, "none") and not tool_parser:
        return vllm_error(400, f'"{choice if isinstance(choice, str) else "named"}" tool choice '
                          "requires --enable-auto-tool-choice and --tool-call-parser to be set")
    for message in body.get("messages") or ():
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "user", "assistant", "tool"):
            return vllm_error(400, f"Unexpected message role: {role}")
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            return vllm_error(400, "messages.tool_calls: Input should be a valid list")
        for call in calls or ():
            try:
                arguments = orjson.loads(call["function"]["arguments"])
            except (orjson.JSONDecodeError, TypeError, KeyError):
                arguments = None
            if not isinstance(arguments, dict):
                return vllm_error(400, "Tool call arguments must be a JSON object string")
    return None


# The info endpoints of the other servers (SGLang, llama.cpp, Ollama): vLLM answers 404.
_OTHER_SERVERS_PATHS = frozenset({"/get_server_info", "/server_info", "/props",
                                  "/apply-template", "/api/version"})


class FakeVLLM:
    """The fake server. By default a chat completion gets a plain text answer."""

    def __init__(self, tool_parser: bool = True, model: str = MODEL) -> None:
        self.tool_parser = tool_parser  # started with --enable-auto-tool-choice
        self.model = model
        self.received: list[Received] = []
        self.disconnects: list[tuple[Received, float]] = []  # client closed before the end
        self._answer: Callable[[Received], Answer] = lambda r: Answer(
            body=vllm_completion("Hello from the fake."))
        self._lock = threading.Lock()
        # vLLM's /tokenize for a chat: the count it answers (None: a server without one).
        self.tokenize: Callable[[Any], int] | None = fake_token_count
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                received = Received(self.command, self.path, dict(self.headers.items()), raw)
                with fake._lock:
                    fake.received.append(received)
                answer = fake._route(received)
                if answer.delay and not fake._wait_unless_closed(self.connection, answer.delay):
                    fake._saw_disconnect(received)
                    self.close_connection = True
                    return
                try:
                    fake._send(self, answer)
                except (BrokenPipeError, ConnectionResetError):
                    fake._saw_disconnect(received)
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _handle

            def do_HEAD(self) -> None:
                self._handle()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @staticmethod
    def _wait_unless_closed(connection: socket.socket, seconds: float) -> bool:
        """Sleep `seconds` like a model generating; False as soon as the client hangs up."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([connection], [], [], min(remaining, 0.02))
            if readable and connection.recv(1, socket.MSG_PEEK) == b"":
                return False
        return True

    def _saw_disconnect(self, received: Received) -> None:
        with self._lock:
            self.disconnects.append((received, time.monotonic()))

    def first_disconnect(self, within: float = 5.0) -> float | None:
        """When (time.monotonic) the first client of this server left before its answer's
        end, waiting up to `within` seconds for one; None if none did."""
        deadline = time.monotonic() + within
        while not self.disconnects and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.disconnects[0][1] if self.disconnects else None

    def wait_chat_requests(self, count: int = 1, within: float = 10.0) -> bool:
        """Wait up to `within` seconds until this server has received `count` chat completion
        requests (a client's request may take a while to get through a loaded machine)."""
        deadline = time.monotonic() + within
        while len(self.chat_requests()) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self.chat_requests()) >= count

    def answer(self, answer: Answer | Callable[[Received], Answer]) -> None:
        """Script the next answers: one fixed Answer, or a function of the request."""
        self._answer = answer if callable(answer) else (lambda r: answer)

    def chat_requests(self) -> list[Received]:
        """The chat completion requests received so far."""
        return [r for r in self.received if r.path.startswith("/v1/chat/completions")]

    def _route(self, received: Received) -> Answer:
        if received.method == "GET" and received.path == "/v1/models":
            return Answer(body={"object": "list", "data": [
                {"id": self.model, "object": "model", "created": 0, "owned_by": "vllm",
                 "root": self.model, "parent": None, "max_model_len": 32768,
                 "permission": []}]})
        if received.method == "GET" and received.path == "/version":
            return Answer(body={"version": "0.33.0"})
        if received.path.startswith("/proxy/") or received.path in _OTHER_SERVERS_PATHS:
            return Answer(status=404, body={"detail": "Not Found"})  # vLLM has no such path
        if received.path == "/tokenize" and received.method == "POST":
            return self._tokenized(received)
        if received.path.startswith("/v1/chat/completions") and received.method == "POST":
            try:
                rejection = _validate_like_vllm(received.json, self.tool_parser)
            except orjson.JSONDecodeError:
                rejection = vllm_error(400, "Invalid JSON")
            if rejection is not None:
                return rejection
        return self._answer(received)

    def _tokenized(self, received: Received) -> Answer:
        """vLLM's /tokenize answer for a chat (`count`, `max_model_len`, `tokens`)."""
        if self.tokenize is None:
            return Answer(status=404, body={"detail": "Not Found"})
        body = received.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return vllm_error(400, "messages: Field required")
        count = self.tokenize(body)
        return Answer(body={"count": count, "max_model_len": 32768,
                            "tokens": list(range(count)), "token_strs": None})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, answer: Answer) -> None:
        handler.send_response(answer.status)
        for key, value in [*answer.headers.items(), *answer.header_lines]:
            handler.send_header(key, value)
        if answer.chunks is not None:
            if "Content-Type" not in answer.headers:
                handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            for sent, piece in enumerate(answer.chunks):
                if answer.cut_after is not None and sent >= answer.cut_after:
                    handler.wfile.flush()
                    handler.close_connection = True
                    handler.connection.shutdown(socket.SHUT_RDWR)
                    return
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                handler.wfile.flush()
                pause = answer.pauses.get(sent)
                if isinstance(pause, threading.Event):
                    pause.wait(30)
                elif pause and not FakeVLLM._wait_unless_closed(handler.connection, pause):
                    raise ConnectionResetError("client closed mid-stream")
                if answer.chunk_gap and not FakeVLLM._wait_unless_closed(handler.connection,
                                                                          answer.chunk_gap):
                    raise ConnectionResetError("client closed mid-stream")
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
            return
        body = answer.body
        if not isinstance(body, bytes):
            body = orjson.dumps(body)
            if "Content-Type" not in answer.headers:
                handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body if answer.cut_after is None else body[:answer.cut_after])
        if answer.cut_after is not None:
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def main(argv: list[str]) -> None:
    """`python -m tests.fake_vllm [DELAY]`: a fake in a process of its own (one a test can
    kill) answering every chat with a `read` call after DELAY seconds; its URL on stdout."""
    delay = float(argv[0]) if argv else 0.0
    fake = FakeVLLM()
    call = vllm_completion(tool_calls=[vllm_tool_call("read", '{"path": "a"}')],
                           finish_reason="tool_calls")
    fake.answer(lambda received: Answer(body=call, delay=delay))
    print(fake.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
