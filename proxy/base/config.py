"""The proxy's settings as one immutable value, and how a request's model picks its own.

Where they come from (defaults < file < environment < flags) is `shell.config_load`'s job.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .frozen import replaced


@dataclass(frozen=True)
class Config:
    """Every setting of the proxy. `config.example.json` lists each with its default."""

    host: str = "127.0.0.1"
    port: int = 8003
    # A second port serving the same app (0: none), for clients of Ollama's API that assume
    # its port (11434): every path is served on both.
    ollama_port: int = 0
    # One base URL, or (a tuple) the replicas of one model: a turn goes to one of them by
    # cache affinity with bounded load (`upstream_routing`), failing over before the first byte.
    upstream: str | tuple[str, ...] = "http://127.0.0.1:8000"
    upstream_routing: str = "affinity"
    upstream_load_factor: float = 0.25
    upstream_down_seconds: float = 10.0
    upstream_affinity_headers: tuple[str, ...] = ("X-Session-Affinity", "X-Opencode-Session",
                                                  "X-Claude-Code-Session-Id", "Session-Id")
    loop_guard_max_tool_calls: int = 500
    connect_timeout_seconds: float = 5.0
    read_timeout_seconds: float = 600.0
    buffered_timeout_seconds: float = 1800.0
    commit_window_seconds: float = 0.5
    heartbeat_seconds: float = 5.0
    heartbeat_mode: str = "chunk"
    reasoning_field: str = "reasoning_content"
    formats: tuple[str, ...] = ("auto",)
    # A call the model plainly made to a name that matches no offered tool: "deliver" it as
    # written (the agent answers "no such tool"), or keep it out as "text" (the old rule).
    unknown_tool_calls: str = "deliver"
    upstream_tool_parser: bool = True
    tool_temperature: float | None = None
    required_call_retries: int = 1
    # A demanded call that did not come or is off its schema (and, with `+unreadable`, a
    # frame whose arguments cannot be read) is asked once more, constrained in the
    # upstream's own dialect; a call written whole on an `auto` turn never is.
    # (`demanded+botched`, the former name, is read as `demanded+unreadable`.)
    constrained_reask: str = "demanded+unreadable"
    # Opt-in: every tool turn carries a triggered structural tag in the model's own call
    # wrapper (servers that take one): any call it opens is valid from its first token.
    constrain_every_call: bool = False
    fit_max_tokens: bool = True
    drop_store: bool = True
    max_completion_tokens_as_max_tokens: bool = True
    developer_role_as_system: bool = True
    drop_empty_tools: bool = True
    drop_orphan_tool_choice: bool = True
    drop_stream_options_without_stream: bool = True
    repair_history_arguments: bool = True
    # The prefix cache: the volatile lines a client's system prompt opens with (Home
    # Assistant's time and area, Claude Code's token reminder) moved behind its stable part.
    stable_prefix: bool = False
    models: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    max_body_bytes: int = 32 * 1024 * 1024
    max_upstream_body_bytes: int = 256 * 1024 * 1024
    api_keys: tuple[str, ...] = ()
    # The keys of `ollama_port` when they differ from the main port's: None (unset) = the
    # same as `api_keys`; () = that port is keyless (Home Assistant, Zed, Open WebUI).
    ollama_api_keys: tuple[str, ...] | None = None
    protect_proxy_endpoints: bool = False
    upstream_api_key: str = ""
    log_format: str = "json"
    log_level: str = "info"
    log_bodies: bool = False
    # Each answer tells the client the proxy's own time and its wait on upstream.
    server_timing: bool = True
    body_timeout_seconds: float = 30.0
    # Who may address the proxy: `Host` names beyond loopback, this machine's own names and
    # addresses; browser pages' origins beyond the proxy's own (none by default).
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    # The Responses API front (POST /v1/responses): translated onto the turn, or relayed; its
    # kept answers (`store`): a store URL (`sqlite:///abs/path`, `sqlite://:memory:`,
    # `redis://[:password@]host:port/db` shared by several instances), else
    # SQLite at `responses_store_path` ("" = the default path under the state directory).
    responses_mode: str = "translate"
    responses_store_url: str = ""
    responses_store_path: str = ""
    responses_store_max_age_seconds: float = 30 * 24 * 3600.0
    responses_store_max_responses: int = 10000  # per API key
    responses_store_max_bytes_per_key: int = 256 * 1024 * 1024
    responses_store_max_bytes: int = 1024 * 1024 * 1024
    # The Anthropic Messages front (/v1/messages).
    messages_keep_billing_header: bool = False
    messages_thinking_switch: str = "enable_thinking"
    # Streamed mode (issue 19): "buffer" answers a tool turn once it is whole; "stream" lets
    # text and reasoning flow as upstream writes them, holding back what could be a call.
    stream_mode: str = "buffer"
    # A leading <think>…</think> in the content (a server without a reasoning parser) is the
    # reasoning: moved to `reasoning_field` in answers, and out of the history sent upstream.
    reasoning_from_content: bool = True
    # Whether the chat template opens the thinking block in the prompt (so the output starts
    # inside it): "auto" (a lone closer still ends it; learned per process from closers seen),
    # "true" (all of an output is thinking until a closer), "false" (a lone closer is text).
    thinking_opened_by_template: str = "auto"

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain JSON-able data (as in the config file)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["formats"] = list(self.formats)
        out["upstream_affinity_headers"] = list(self.upstream_affinity_headers)
        if isinstance(self.upstream, tuple):
            out["upstream"] = list(self.upstream)
        out["api_keys"] = list(self.api_keys)
        if self.ollama_api_keys is not None:
            out["ollama_api_keys"] = list(self.ollama_api_keys)
        out["allowed_hosts"] = list(self.allowed_hosts)
        out["allowed_origins"] = list(self.allowed_origins)
        out["models"] = {glob: dict(values) for glob, values in self.models}
        return out

    def for_model(self, model: str) -> Config:
        """The settings in force for `model`: every matching glob of `models`, in file order,
        overrides the ones before it."""
        overrides: dict[str, Any] = {}
        for glob, values in self.models:
            if fnmatch.fnmatchcase(model, glob):
                overrides.update(values)
        return replaced(self, **overrides) if overrides else self

    def summary(self) -> dict[str, Any]:
        """The settings without secrets: API keys counted or flagged, never shown, and URLs
        without their `user:password@` (per-model overrides included)."""
        out = self.as_dict()
        out["api_keys"] = len(self.api_keys)
        if self.ollama_api_keys is not None:
            out["ollama_api_keys"] = len(self.ollama_api_keys)
        out["responses_store_url"] = mask_url(self.responses_store_url)  # a password in it
        out.update(_public_settings({"upstream": self.upstream,
                                     "upstream_api_key": self.upstream_api_key}))
        out["models"] = {glob: _public_settings(values) for glob, values in self.models}
        return out

    def port_keys(self, port: int | None) -> tuple[str, ...]:
        """The keys a request to `port` needs: `ollama_api_keys` on `ollama_port` when they
        are set, `api_keys` everywhere else."""
        if port and port == self.ollama_port and self.ollama_api_keys is not None:
            return self.ollama_api_keys
        return self.api_keys

    def replicas(self) -> tuple[str, ...]:
        """The base URLs this model's turns may go to: one, or the replicas listed."""
        return replicas_of(self.upstream)

    def upstreams(self) -> list[str]:
        """Every upstream base URL (each replica): the default ones first, then those of
        `models`."""
        return list(self.upstream_settings())

    def upstream_settings(self) -> dict[str, Config]:
        """Each upstream base URL (each replica) with the settings it is reached with (its
        key, timeouts): the global ones for the default upstream, else those of the first
        `models` entry that names it."""
        settings = dict.fromkeys(self.replicas(), self)
        for _, values in self.models:
            urls = values.get("upstream")
            for url in replicas_of(urls) if urls is not None else ():
                if url not in settings:
                    settings[url] = dataclasses.replace(self, **values)
        return settings


def upstream_groups(config: Config) -> list[tuple[tuple[str, ...], Config]]:
    """Each distinct `upstream` (one URL, or the replicas of one model) with the settings it
    is reached with: the global one first, then those of `models`, in file order."""
    groups = [(config.replicas(), config)]
    for _, values in config.models:
        urls = values.get("upstream")
        if urls is not None and all(replicas_of(urls) != seen for seen, _ in groups):
            groups.append((replicas_of(urls), dataclasses.replace(config, **values)))
    return groups


def replicas_of(upstream: str | tuple[str, ...]) -> tuple[str, ...]:
    """An `upstream` setting as the tuple of its base URLs."""
    return upstream if isinstance(upstream, tuple) else (upstream,)


def mask_upstream(upstream: str | tuple[str, ...]) -> str | list[str]:
    """An `upstream` setting safe to show: one masked URL, or the list of them."""
    if isinstance(upstream, tuple):
        return [mask_url(url) for url in upstream]
    return mask_url(upstream)


def mask_url(url: str) -> str:
    """`url` with its userinfo shown as `***@`: safe to print, log or answer on /proxy/health
    (the `user:password@` of an upstream URL is a credential)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _public_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """Settings with their secrets out: `upstream` masked, `upstream_api_key` as a flag."""
    out = dict(values)
    if "upstream" in out:
        out["upstream"] = mask_upstream(out["upstream"])
    if "upstream_api_key" in out:
        out["upstream_api_key"] = bool(out["upstream_api_key"])
    return out
