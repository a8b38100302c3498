"""A fake vLLM 0.33 server on loopback: real HTTP, vLLM's identity endpoints (/version,
/health, /v1/models, /tokenize), its request rules (tests/fakes/vllm_rules.py), its answer
shapes (tests/fakes/vllm_shapes.py) and, with a tool parser, its own constrained path for
demanded calls. Tests script what it answers (`answer`, or a model behaviour with `behave`)
and read what it received (`.received`)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from tests.fakes.base import Answer, ModelServer, Received
from tests.fakes.constraints import UnscriptedConstraint
from tests.fakes.models import Generation, Turn
from tests.fakes.template import ChatTemplate
from tests.fakes.vllm_rules import (
    CHAT_FIELDS,
    STRUCTURAL_TAG_PARSERS,
    hermes_calls,
    tool_choice_of,
    validate_like_vllm,
    vllm_constraint,
)
from tests.fakes.vllm_shapes import (
    MODEL,
    fake_token_count,
    vllm_completion,
    vllm_error,
    vllm_stream_of,
    vllm_tool_call,
    vllm_validation_error,
)

VERSION = "0.33.0"


class FakeVLLM(ModelServer):
    """The fake server. By default a chat completion gets a plain text answer.

    `tool_parser`: the `--tool-call-parser` it was started with (with
    `--enable-auto-tool-choice`); None: started without, so it refuses `auto`, `required` and
    named choices as vLLM does (True/False are read as "hermes"/None). Its parser reads calls
    in the template's wrapper (`<tool_call>` JSON `</tool_call>` by default); "hermes" has a
    structural tag for demanded calls, any other parser name takes vLLM's JSON-schema
    fallback. `tool_strict_level`: `--tool-strict-level` (auto, function, parameter)."""

    def __init__(self, tool_parser: str | bool | None = "hermes", model: str = MODEL,
                 template: ChatTemplate | None = None, max_model_len: int = 32768,
                 version: str = VERSION, tool_strict_level: str = "auto") -> None:
        self.tool_parser = "hermes" if tool_parser is True else (tool_parser or None)
        self.model = model
        self.template = template or ChatTemplate()
        self.max_model_len = max_model_len
        self.version = version
        self.tool_strict_level = tool_strict_level  # --tool-strict-level: auto|function|parameter
        self.ignored: list[set[str]] = []  # per chat request: the fields vLLM logged and ignored
        # vLLM's /tokenize for a chat: the count it answers (None: a server without one).
        self.tokenize: Callable[[Any], int] | None = fake_token_count
        # Whether /v1/embeddings answers as vLLM serving an embedding model does (else the
        # scripted answer, as any other path).
        self.embeddings = False
        # What /health answers when a test scripts it (a replica loading, a server without
        # one); None: vLLM's own 200 with an empty body.
        self.health: Callable[[Received], Answer] | None = None
        super().__init__()

    def _route(self, received: Received) -> Answer:
        path = received.path.split("?")[0]  # FastAPI ignores a query it does not declare
        if received.method == "GET" and path == "/v1/models":
            return Answer(body={"object": "list", "data": [
                {"id": self.model, "object": "model", "created": 0, "owned_by": "vllm",
                 "root": self.model, "parent": None, "max_model_len": self.max_model_len,
                 "permission": []}]})
        if received.method == "GET" and path == "/version":
            # vllm/frontend/entrypoints/serve/instrumentator/basic.py: show_version
            return Answer(body={"version": self.version})
        if received.method == "GET" and path == "/health":
            if self.health is not None:
                return self.health(received)
            # vllm/frontend/entrypoints/serve/instrumentator/health.py: 200, empty body
            return Answer(body=b"")
        if path.startswith("/proxy/"):  # vLLM has no such path (the proxy's own)
            return Answer(status=404, body={"detail": "Not Found"})
        if path == "/tokenize" and received.method == "POST":
            return self._tokenized(received)
        if path == "/v1/embeddings" and received.method == "POST" and self.embeddings:
            return self._embedded(received)
        if path.startswith("/v1/chat/completions") and received.method == "POST":
            try:
                body = received.json
            except orjson.JSONDecodeError:
                return vllm_error(400, "Invalid JSON")
            rejection = validate_like_vllm(body, self.tool_parser)
            if rejection is not None:
                return rejection
            with self._lock:
                self.ignored.append(set(body) - CHAT_FIELDS)
        assert self._answer is not None
        return self._answer(received)

    def _generated(self, received: Received) -> Answer:
        """vLLM's answer with what the model behaviour writes under the request's constraint."""
        if not received.path.startswith(self.chat_path):  # vLLM's answer to a path it lacks
            return Answer(status=404, body={"detail": "Not Found"})
        body = received.json
        tools = body.get("tools") or []
        constraint = vllm_constraint(body, self.tool_parser, self.tool_strict_level)
        try:
            generation = self._behaviour(Turn(body.get("messages") or [], tools, constraint))
        except UnscriptedConstraint as error:
            return vllm_error(500, str(error), "InternalServerError")
        completion = self._completion(body, generation)
        if body.get("stream"):  # serve/utils/api_utils.py: should_include_usage
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return Answer(chunks=vllm_stream_of(completion, usage=usage))
        return Answer(body=completion)

    def _completion(self, body: dict[str, Any], generation: Generation) -> dict[str, Any]:
        """SERVING: chat_completion_full_generator's message for the generated text. With a
        parser and a tool_choice other than none: a demanded call's message has content ""
        and finish "tool_calls" ("required") or "stop" (named) — its calls read from the
        wrapper (structural tag) or the JSON (fallback schema); `auto`'s calls are what the
        parser reads. Calls are cut to the first when parallel_tool_calls is false
        (vllm/entrypoints/serve/utils/tool_calls_utils.py: maybe_filter_parallel_tool_calls).
        Otherwise, the text."""
        choice = tool_choice_of(body)
        text, reasoning = generation.text, generation.reasoning
        shape = {"reasoning": reasoning, "model": self.model}
        if self.tool_parser is None or not body.get("tools") or choice in ("none", None):
            return vllm_completion(text, finish_reason=generation.finish_reason, **shape)
        parsed = hermes_calls(text, self.template.call_open, self.template.call_close)
        demanded = choice == "required" or isinstance(choice, dict)
        if demanded and self.tool_parser not in STRUCTURAL_TAG_PARSERS:
            named = choice["function"]["name"] if isinstance(choice, dict) else None
            items = [{"name": named, "parameters": orjson.loads(text)}] if named \
                else orjson.loads(text)
            parsed = ("", [vllm_tool_call(item["name"], orjson.dumps(item["parameters"]).decode())
                           for item in items])
        if parsed is None:
            return vllm_completion(text, finish_reason=generation.finish_reason, **shape)
        content, calls = parsed
        calls = calls[:1] if body.get("parallel_tool_calls") is False else calls
        finish = "stop" if isinstance(choice, dict) else "tool_calls"
        return vllm_completion(content or ("" if demanded else None), tool_calls=calls,
                               finish_reason=finish, **shape)

    def _embedded(self, received: Received) -> Answer:
        """vLLM's /v1/embeddings answer (its `EmbeddingResponse`: `data` items of `object`
        "embedding" with their `index`, `usage` without completion tokens), one vector per
        input; a model it does not serve is vLLM's 404."""
        body = received.json
        inputs = body.get("input") if isinstance(body, dict) else None
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            return vllm_error(400, "input: Field required")
        if body.get("model") != self.model:
            return vllm_error(404, f"The model `{body.get('model')}` does not exist.",
                              "NotFoundError")
        size = body.get("dimensions") or 4
        data = [{"index": i, "object": "embedding",
                 "embedding": [round((len(text) + k) / 10, 3) for k in range(size)]}
                for i, text in enumerate(inputs)]
        tokens = sum(len(text.split()) + 1 for text in inputs)
        return Answer(body={"id": f"embd-{uuid.uuid4().hex}", "object": "list",
                            "created": int(time.time()), "model": self.model, "data": data,
                            "usage": {"prompt_tokens": tokens, "total_tokens": tokens,
                                      "completion_tokens": 0, "prompt_tokens_details": None}})

    def _tokenized(self, received: Received) -> Answer:
        """vLLM's /tokenize answer for a chat (`count`, `max_model_len`, `tokens`, and the
        token strings with `return_token_strs`), the chat rendered by the fake's template
        (vllm/entrypoints/serve/tokenize/protocol.py: TokenizeChatRequest, TokenizeResponse)."""
        if self.tokenize is None:
            return Answer(status=404, body={"detail": "Not Found"})
        body = received.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return vllm_error(400, "messages: Field required")
        if body.get("continue_final_message") and body.get("add_generation_prompt"):
            return vllm_validation_error("Cannot set both `continue_final_message` and "
                                         "`add_generation_prompt` to True.")
        count = self.tokenize(body)
        strings = None
        if body.get("return_token_strs"):
            prompt = self.template.render(body["messages"], body.get("tools"),
                                          body.get("add_generation_prompt", True))
            strings = self.template.pieces(prompt, count)
            count = len(strings)
        return Answer(body={"count": count, "max_model_len": self.max_model_len,
                            "tokens": list(range(count)), "token_strs": strings})


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
