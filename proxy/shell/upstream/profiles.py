"""Upstream profiles, learned from each replica's info endpoints the first time a turn needs
one (no generation spent) and kept per upstream URL and model; read again when stale or when
the server's answers stop fitting (`refused`). What to make of the answers is
`turn.constrained.profile`'s; this module only asks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from ...base.config import Config
from ...base.errors import ProxyError
from ...turn.constrained.dialects import wrappers
from ...turn.constrained.profile import (
    PROFILE_TTL_SECONDS,
    Probes,
    UpstreamProfile,
    context_length_of,
    kind_hint,
    learn,
    refreshed,
)
from .client import Timeouts, Upstream

_HINTED = ("vllm", "sglang", "llama.cpp")  # the kinds a model list names as its owner
PROBE_READ_SECONDS = 3.0  # an info endpoint answers at once, or is not worth waiting for
_PROBE_MESSAGES = [{"role": "user", "content": "hi"}]
# One tool, so that the rendered prompt shows the template's call wrapper.
_PROBE_TOOLS = [{"type": "function", "function": {
    "name": "probe", "description": "", "parameters": {"type": "object", "properties": {}}}}]


class ProfileKeeper(Protocol):
    """Where profiles are kept for every worker: the store's profile area (`ResponseStore`'s
    `put_profile`, `get_profile`), named here so that this room needs nothing above it."""

    def put_profile(self, key: str, profile: bytes, ttl_seconds: float) -> bool: ...

    def get_profile(self, key: str) -> bytes | None: ...


class Profiles:
    """The profiles this process knows, learned on first need or read from the store,
    where what one worker learned is kept for all workers, instances and restarts (a turn
    waiting for a probe waits at most its timeouts)."""

    def __init__(self, clients: dict[str, Upstream], store: ProfileKeeper | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._clients = clients
        self._store = store
        self._clock = clock
        self._known: dict[tuple[str, str], UpstreamProfile] = {}
        self._since: dict[str, float] = {}  # an upstream back from down: profiles older re-read
        self._lock = threading.Lock()

    def known(self) -> dict[tuple[str, str], UpstreamProfile]:
        """Every profile learned so far, by (upstream URL, model)."""
        with self._lock:
            return dict(self._known)

    def get(self, url: str, model: str, config: Config,
            headers: dict[str, str] | None = None) -> UpstreamProfile:
        """The profile of `model` on `url`, learned now when not known or stale."""
        key = (url, model)
        with self._lock:
            profile = self._known.get(key)
            since = self._since.get(url, 0.0)
        if profile is None or not self._fits(profile, since):
            kept = self._kept(key)
            # another process's profile, once per process: still the server that answers
            # there? (one `GET /v1/models`, asked only of a profile still fresh enough to
            # use; another server on the same URL is read anew)
            if kept is not None and (not self._fits(kept, since) or self._same_server(
                    kept, url, model, config, headers or {})):
                profile = kept  # (a stale one: the base whose refusals a refresh keeps)
        if profile is not None and self._fits(profile, since):
            with self._lock:
                self._known[key] = profile
            return profile
        learned = refreshed(profile, self._probe(url, model, config, headers or {}))
        self._keep(key, learned)
        return learned

    def recheck(self, url: str) -> None:
        """`url` came back after it was down (perhaps another version now): its profiles
        are read again when next needed (refusals kept only if the version is the same)."""
        with self._lock:
            self._since[url] = self._clock()

    def _fits(self, profile: UpstreamProfile, since: float) -> bool:
        """Whether a profile may still be used: learned within its TTL, and after its
        upstream last came back."""
        return not profile.stale(self._clock()) and profile.learned_at >= since

    def refused(self, url: str, model: str, field: str) -> None:
        """The server at `url` refused `field`: never sent to it again (for this version).
        A refusal may also mean the profile stopped fitting: it is read again when next
        needed (the refusal kept if the server is the same version)."""
        key = (url, model)
        with self._lock:
            profile = self._known.get(key)
        if profile is not None:
            self._keep(key, profile.refusing(field))
            self.recheck(url)

    def _same_server(self, kept: UpstreamProfile, url: str, model: str, config: Config,
                     headers: dict[str, str]) -> bool:
        """Whether the server at `url` is still the one `kept` describes, as far as its
        model list tells (its owner, and its window where it gives one)."""
        client = self._clients.get(url) or Upstream(url)
        timeouts = Timeouts(config.connect_timeout_seconds, PROBE_READ_SECONDS)
        auth = {k: v for k, v in headers.items() if k.lower() == "authorization"}
        models = _json(lambda: client.complete_get("/v1/models", auth, timeouts,
                                                     config.max_upstream_body_bytes))
        if models is None:
            return False
        hint = kind_hint(models, model)
        if (hint or "") != (kept.kind if kept.kind in _HINTED else ""):
            return False
        window = context_length_of(kept.kind, Probes(models=models), model)
        return window is None or kept.context_length in (None, window)

    def _keep(self, key: tuple[str, str], profile: UpstreamProfile) -> None:
        """Know `profile` here, and keep it in the store for every other worker."""
        with self._lock:
            self._known[key] = profile
        if self._store is not None:
            ttl = PROFILE_TTL_SECONDS - (self._clock() - profile.learned_at)
            self._store.put_profile("|".join(key), orjson.dumps(profile.record()),
                                    max(ttl, 1.0))

    def _kept(self, key: tuple[str, str]) -> UpstreamProfile | None:
        """The profile another worker kept in the store, if any."""
        if self._store is None:
            return None
        data = self._store.get_profile("|".join(key))
        try:
            record = orjson.loads(data) if data is not None else None
        except orjson.JSONDecodeError:
            return None
        return UpstreamProfile.from_record(record) if isinstance(record, dict) else None

    def _probe(self, url: str, model: str, config: Config,
               headers: dict[str, str]) -> UpstreamProfile:
        """Ask the info endpoints; what answered makes the profile."""
        client = self._clients.get(url) or Upstream(url)
        timeouts = Timeouts(config.connect_timeout_seconds, PROBE_READ_SECONDS)
        auth = {k: v for k, v in headers.items() if k.lower() == "authorization"}

        def get(path: str) -> Any:
            return _json(lambda: client.complete_get(path, auth, timeouts,
                                                     config.max_upstream_body_bytes))

        models = get("/v1/models")
        hint = kind_hint(models, model)  # only the named server's own endpoints, then

        def ask(path: str, *kinds: str) -> Any:
            return get(path) if hint is None or hint in kinds else None

        kind_probes = Probes(models=models, version=ask("/version", "vllm", "sglang"),
                             server_info=ask("/get_server_info", "sglang"),
                             props=ask("/props", "llama.cpp"), ollama=ask("/api/version"))
        rendered = self._rendered(client, model, auth, timeouts, kind_probes)
        probes = Probes(kind_probes.models, kind_probes.version, kind_probes.server_info,
                        kind_probes.props, kind_probes.ollama, rendered)
        return learn(probes, model, wrappers(), self._clock(),
                     tool_parser=config.upstream_tool_parser)

    @staticmethod
    def _rendered(client: Upstream, model: str, auth: dict[str, str], timeouts: Timeouts,
                  probes: Probes) -> str | None:
        """The generation prompt for one user message, rendered without generating:
        llama.cpp's `/apply-template` (`prompt`), vLLM's `/tokenize` with `messages` and
        `return_token_strs` (the tokens' text, joined)."""
        body = {"model": model, "messages": _PROBE_MESSAGES, "tools": _PROBE_TOOLS,
                "add_generation_prompt": True}
        if isinstance(probes.props, dict):
            answer = _json(lambda: client.complete("/apply-template", orjson.dumps(body),
                                                   {**auth, "Content-Type": "application/json"},
                                                   timeouts, None, 1 << 20))
            prompt = answer.get("prompt") if isinstance(answer, dict) else None
            return prompt if isinstance(prompt, str) else None
        if isinstance(probes.version, dict) and probes.version.get("version"):
            answer = _json(lambda: client.complete(
                "/tokenize", orjson.dumps({**body, "return_token_strs": True}),
                {**auth, "Content-Type": "application/json"}, timeouts, None, 1 << 22))
            strs = answer.get("token_strs") if isinstance(answer, dict) else None
            if isinstance(strs, list) and all(isinstance(s, str) for s in strs):
                return "".join(strs).replace("Ġ", " ").replace("Ċ", "\n")
        return None


def _json(call: Callable[[], Any]) -> Any:
    """The JSON object a 200 answer holds; None for anything else (no answer, an error, a
    body that is not a JSON object)."""
    try:
        reply = call()
    except ProxyError:
        return None
    if getattr(reply, "status", None) != 200:
        return None
    try:
        data = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None
