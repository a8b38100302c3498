"""What an upstream is asked of itself, each request ended at a deadline whatever the server
does and read up to a size bound: the info endpoints a profile is learned from (no generation
spent), and a refusal check's one-token POST. What to make of the answers is
`turn.constrained.profile`'s; `profiles` decides when to ask."""

from __future__ import annotations

import time
from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import ProxyError
from ...turn.constrained.dialects import wrappers
from ...turn.constrained.profile import Probes, UpstreamProfile, kind_hint, learn
from ..runtime.background import call_later
from .client import _FAILURES, Timeouts, Upstream, _ConnectionTracker

PROBE_READ_SECONDS = 3.0  # an info endpoint answers at once, or is not worth waiting for
INFO_BYTES = 64 * 1024  # an info endpoint's answer, at most (more is not read)
RENDERED_BYTES = 1 << 20  # a rendered probe prompt (`/tokenize`, `/apply-template`)
AUTH_REFUSED = (401, 403)
PROBE_MESSAGES = [{"role": "user", "content": "hi"}]
PROBE_TOOL = {"type": "object", "properties": {}}
# One tool, so that the rendered prompt shows the template's call wrapper.
PROBE_TOOLS = [{"type": "function", "function": {
    "name": "probe", "description": "", "parameters": PROBE_TOOL}}]


def fetch(client: Upstream, method: str, path: str, body: bytes | None,
          auth: dict[str, str], config: Config, deadline: float,
          max_bytes: int) -> tuple[int | None, Any]:
    """One request of a probe, ended at `deadline` whatever the server does (its
    connection cut then: a server that drips a byte a second holds nothing past it):
    its status (None: no answer in time) and the JSON object of a 200 answer within
    `max_bytes` (else None)."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None, None
    timeouts = Timeouts(min(config.connect_timeout_seconds, left),
                        min(PROBE_READ_SECONDS, left))
    tracker = _ConnectionTracker()
    cut = call_later(left, tracker.cancel)
    headers = {**auth, "Content-Type": "application/json"} if body is not None else auth
    try:
        response = client.open(method, path, body or b"", headers, timeouts, tracker)
    except ProxyError:
        cut()
        return None, None
    status = response.status
    try:
        pieces, size = [], 0
        while data := response.read1(INFO_BYTES, decode_content=True):
            size += len(data)
            if size > max_bytes or time.monotonic() > deadline:
                response.close()
                return status, None
            pieces.append(data)
        response.release_conn()
    except _FAILURES:
        response.close()
        return (status if status != 200 else None), None
    finally:
        cut()
        tracker.detach()
    if status != 200:
        return status, None
    try:
        value = orjson.loads(b"".join(pieces))
    except orjson.JSONDecodeError:
        return status, None
    return status, value if isinstance(value, dict) else None


def probe(client: Upstream, model: str, entry: dict[str, Any] | None, config: Config,
          auth: dict[str, str], deadline: float, now: float) -> tuple[UpstreamProfile, bool]:
    """Ask the info endpoints of `model` (`entry`: its model list's entry, if listed), all
    before `deadline`; the profile what answered makes (learned at `now`), and whether the
    server refused the key (401/403: the profile is not to be kept)."""
    statuses: list[int | None] = []
    models = {"data": [entry]} if entry else None

    def get(path: str) -> Any:
        if any(s in AUTH_REFUSED for s in statuses):
            return None
        status, value = fetch(client, "GET", path, None, auth, config, deadline, INFO_BYTES)
        statuses.append(status)
        return value

    hint = kind_hint(models, model)  # only the named server's own endpoints, then

    def ask(path: str, *kinds: str) -> Any:
        return get(path) if hint is None or hint in kinds else None

    version = ask("/version", "vllm", "sglang")
    server_info = ask("/get_server_info", "sglang")
    props = ask("/props", "llama.cpp")
    ollama = ask("/api/version")
    kind_probes = Probes(models=models, version=version, server_info=server_info,
                         props=props, ollama=ollama)
    rendered = None
    if not any(s in AUTH_REFUSED for s in statuses):
        rendered = _rendered(client, model, auth, config, deadline, kind_probes, statuses)
    probes = Probes(models, version, server_info, props, ollama, rendered)
    profile = learn(probes, model, wrappers(), now,
                    tool_parser=config.upstream_tool_parser)
    return profile, any(s in AUTH_REFUSED for s in statuses)


def _rendered(client: Upstream, model: str, auth: dict[str, str], config: Config,
              deadline: float, probes: Probes, statuses: list[int | None]) -> str | None:
    """The generation prompt for one user message, rendered without generating:
    llama.cpp's `/apply-template` (`prompt`), vLLM's `/tokenize` with `messages` and
    `return_token_strs` (the tokens' text, joined)."""
    body = {"model": model, "messages": PROBE_MESSAGES, "tools": PROBE_TOOLS,
            "add_generation_prompt": True}
    if isinstance(probes.props, dict):
        status, answer = fetch(client, "POST", "/apply-template", orjson.dumps(body),
                               auth, config, deadline, RENDERED_BYTES)
        statuses.append(status)
        prompt = answer.get("prompt") if isinstance(answer, dict) else None
        return prompt if isinstance(prompt, str) else None
    if isinstance(probes.version, dict) and probes.version.get("version"):
        status, answer = fetch(
            client, "POST", "/tokenize", orjson.dumps({**body, "return_token_strs": True}),
            auth, config, deadline, RENDERED_BYTES)
        statuses.append(status)
        strs = answer.get("token_strs") if isinstance(answer, dict) else None
        if isinstance(strs, list) and all(isinstance(s, str) for s in strs):
            return "".join(strs).replace("Ġ", " ").replace("Ċ", "\n")
    return None


def fetch_any(client: Upstream, body: bytes, auth: dict[str, str], config: Config,
              seconds: float) -> tuple[int | None, Any]:
    """A refusal check's POST: its status and its JSON body (an error's too, which names
    the field), within `seconds`."""
    timeouts = Timeouts(config.connect_timeout_seconds, seconds)
    tracker = _ConnectionTracker()
    cut = call_later(seconds, tracker.cancel)
    try:
        reply = client.complete("/v1/chat/completions", body,
                                {**auth, "Content-Type": "application/json"}, timeouts,
                                tracker, INFO_BYTES)
    except ProxyError:
        return None, None
    finally:
        cut()
    try:
        return reply.status, orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        return reply.status, reply.body.decode(errors="replace")
