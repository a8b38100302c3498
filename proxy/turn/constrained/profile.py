"""What an upstream is, as data: its server kind and version, context length, the template's
call wrapper and thinking opener, whether a tool parser is on, and the fields it refused.
Read from the answers of the server's own info endpoints (the shell fetches them, spending
no generation); kept per upstream URL and model, shared by all workers through the store."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...base.frozen import quick_init

# How long a learned profile is kept (in the store, for every worker) and may still be used
# while it is read again; it is read again (beside the turns, the old one used meanwhile)
# once it is RECHECK_SECONDS old: a server restarted in place with another chat template
# keeps its URL, name and window, and only its template's fingerprint tells.
PROFILE_TTL_SECONDS = 3600.0
RECHECK_SECONDS = 60.0
# How long a field the server refused stays refused: a server restarted with the grammar
# backend it lacked takes it again, and no refusal retires a dialect for long.
REFUSAL_SECONDS = 600.0
# What a learned field may hold at most: whatever a server writes, a profile stays small
# (it is kept in the store, shown on the status page and in every health answer).
VERSION_CHARS = 64
CONTEXT_MAX = 1 << 30
UNKNOWN = "openai-compatible"  # a server that answered none of the info endpoints
KINDS = ("vllm", "sglang", "llama.cpp", "ollama", UNKNOWN)
_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


@quick_init
@dataclass(frozen=True)
class UpstreamProfile:
    """One upstream (replica) serving one model, as learned. `version` "": unknown;
    `thinking_opened`, `tool_parser`: None where the server does not say; `call_wrapper`: the
    format whose call markers the chat template writes (None: not seen); `template`: a short
    fingerprint of the chat template (or of the prompt it rendered; "": not seen);
    `refusals`: request fields the server answered 400 to, each with the wall-clock time
    until which it is not sent again; `learned_at`: wall-clock seconds (the store outlives a
    process)."""

    kind: str = UNKNOWN
    version: str = ""
    context_length: int | None = None
    call_wrapper: str | None = None
    thinking_opened: bool | None = None
    tool_parser: bool | None = None
    refusals: tuple[tuple[str, float], ...] = ()
    learned_at: float = 0.0
    template: str = ""

    @property
    def refused(self) -> frozenset[str]:
        """The fields refused (`current` lets go of those whose time is up)."""
        return frozenset(name for name, _ in self.refusals)

    @property
    def version_tuple(self) -> tuple[int, int, int] | None:
        """The version as three numbers, or None when unknown."""
        return version_tuple(self.version)

    def stale(self, now: float, ttl: float = PROFILE_TTL_SECONDS) -> bool:
        """Whether the profile is due to be read again."""
        return now - self.learned_at >= ttl

    def refusing(self, field: str, until: float) -> UpstreamProfile:
        """The profile once the server refused `field`: not sent again before `until`."""
        kept = tuple((name, at) for name, at in self.refusals if name != field)
        return dataclasses.replace(self, refusals=(*kept, (field, until)))

    def current(self, now: float) -> UpstreamProfile:
        """The profile without the refusals whose time is up."""
        kept = tuple((name, at) for name, at in self.refusals if at > now)
        return self if len(kept) == len(self.refusals) else dataclasses.replace(
            self, refusals=kept)

    def record(self) -> dict[str, Any]:
        """As JSON-able data, for the store, health and the status page (`refused`: the
        fields, `refused_until`: until when, each)."""
        record = dataclasses.asdict(self)
        record["refusals"] = [[name, at] for name, at in sorted(self.refusals)]
        record["refused"] = sorted(self.refused)
        record["refused_until"] = {name: at for name, at in self.refusals}
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> UpstreamProfile | None:
        """A profile read back from the store (None: not one, of an older shape, or with a
        field past its cap: the store is read as untrusted)."""
        try:
            fields = {f.name: record[f.name] for f in dataclasses.fields(cls)}
            fields["refusals"] = tuple((str(name), float(at))
                                       for name, at in fields["refusals"])
            profile = cls(**fields)
        except (KeyError, TypeError, ValueError):
            return None
        return profile if profile == capped(profile) else None


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """`0.33.1`, `v0.10.2rc1`, `b6812` (llama.cpp's build) as three numbers."""
    match = _VERSION.search(text or "")
    if match is None:
        return None
    return (int(match[1]), int(match[2] or 0), int(match[3] or 0))


# -- reading the servers' info endpoints ------------------------------------------------------
# Each takes the decoded JSON of the endpoint's answer (None: the endpoint did not answer
# 200 with a JSON object) and says what it learned; `learn` puts them together.

@dataclass(frozen=True)
class Probes:
    """The answers of the info endpoints, as the shell fetched them (None: no answer).
    `models`: `/v1/models`; `version`: vLLM's `/version`; `server_info`: SGLang's
    `/get_server_info` (or `/server_info`); `props`: llama.cpp's `/props`; `ollama`:
    Ollama's `/api/version`; `rendered`: the generation prompt the server rendered for one
    user message without generating (vLLM `/tokenize` with `messages`, llama.cpp
    `/apply-template`), when it did."""

    models: Any = None
    version: Any = None
    server_info: Any = None
    props: Any = None
    ollama: Any = None
    rendered: str | None = None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _model_entry(models: Any, model: str) -> dict[str, Any]:
    """The `/v1/models` entry of `model` (or the only one served)."""
    data = _dict(models).get("data")
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    for entry in entries:
        if entry.get("id") == model:
            return entry
    return entries[0] if len(entries) == 1 else {}


# `/v1/models`'s `owned_by`, as each server writes it (vLLM's ModelCard, SGLang's,
# llama-server's): which info endpoints are worth asking.
_OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}


def kind_hint(models: Any, model: str) -> str | None:
    """The server kind `/v1/models` names as the model's owner (None: another owner)."""
    return _OWNERS.get(_str(_model_entry(models, model).get("owned_by")))


def kind_of(probes: Probes) -> tuple[str, str]:
    """The server's kind and version, from whichever info endpoint answered as its kind does:
    SGLang's `/get_server_info` (it also serves `/version`), llama.cpp's `/props`, vLLM's
    `/version`, Ollama's `/api/version`."""
    info = _dict(probes.server_info)
    if info and ("version" in info or "context_length" in info or "tp_size" in info):
        return "sglang", _str(info.get("version"))
    props = _dict(probes.props)
    if props and ("default_generation_settings" in props or "build_info" in props
                  or "chat_template" in props):
        return "llama.cpp", _str(props.get("build_info"))
    version = _str(_dict(probes.version).get("version"))
    if version:
        return "vllm", version
    ollama = _str(_dict(probes.ollama).get("version"))
    if ollama:
        return "ollama", ollama
    return UNKNOWN, ""


def context_length_of(kind: str, probes: Probes, model: str) -> int | None:
    """The context window: vLLM's `max_model_len` in `/v1/models`, SGLang's
    `context_length`, llama.cpp's `n_ctx` (per slot, in `default_generation_settings`)."""
    if kind == "sglang":
        found = _int(_dict(probes.server_info).get("context_length"))
        if found:
            return found
    if kind == "llama.cpp":
        props = _dict(probes.props)
        settings = _dict(props.get("default_generation_settings"))
        return _int(settings.get("n_ctx")) or _int(props.get("n_ctx"))
    return _int(_model_entry(probes.models, model).get("max_model_len"))


def call_wrapper_of(template: str, wrappers: Mapping[str, str]) -> str | None:
    """The format whose call trigger the chat template (or a rendering of it) holds, from
    `wrappers` (format name → trigger, as the formats' specs declare them); the longest
    trigger wins (`<tool_call>` over `{"name": `)."""
    found = [(len(trigger), name) for name, trigger in wrappers.items() if trigger in template]
    return max(found)[1] if found else None


def thinking_opened_of(rendered: str | None) -> bool | None:
    """Whether the generation prompt leaves the model inside a thinking block: the rendered
    prompt ends in an opener (`<think>`, followed by space at most). None: not rendered."""
    if rendered is None:
        return None
    tail = rendered.rstrip()
    return tail.endswith(("<think>", "<|begin_of_thought|>", "<seed:think>"))


def fingerprint(text: str) -> str:
    """A short fingerprint of a chat template (or of the prompt one rendered)."""
    return hashlib.sha256(text.encode(errors="replace")).hexdigest()[:16] if text else ""


def learn(probes: Probes, model: str, wrappers: Mapping[str, str], now: float,
          tool_parser: bool | None = None) -> UpstreamProfile:
    """The profile the info endpoints' answers make, every field within its cap."""
    kind, version = kind_of(probes)
    template = _str(_dict(probes.props).get("chat_template")) or (probes.rendered or "")
    return capped(UpstreamProfile(
        kind=kind, version=version, context_length=context_length_of(kind, probes, model),
        call_wrapper=call_wrapper_of(template, wrappers) if template else None,
        thinking_opened=thinking_opened_of(probes.rendered), tool_parser=tool_parser,
        learned_at=now, template=fingerprint(template)))


_PRINTABLE = re.compile(r"[^\x21-\x7e]+")


def capped(profile: UpstreamProfile) -> UpstreamProfile:
    """`profile` with every field within its cap: a known kind, a version of at most
    VERSION_CHARS printable characters, a window below CONTEXT_MAX, a format name and a
    fingerprint of the lengths they have, a few refusals of short field names."""
    window = _int(profile.context_length)
    return dataclasses.replace(
        profile, kind=profile.kind if profile.kind in KINDS else UNKNOWN,
        version=_PRINTABLE.sub(" ", _str(profile.version))[:VERSION_CHARS].strip(),
        context_length=window if window is not None and window < CONTEXT_MAX else None,
        call_wrapper=profile.call_wrapper if isinstance(profile.call_wrapper, str)
        and len(profile.call_wrapper) <= 32 else None,
        thinking_opened=profile.thinking_opened
        if isinstance(profile.thinking_opened, bool) else None,
        tool_parser=profile.tool_parser if isinstance(profile.tool_parser, bool) else None,
        refusals=tuple((name, at) for name, at in profile.refusals
                       if isinstance(name, str) and len(name) <= 32)[:8],
        learned_at=float(profile.learned_at) if isinstance(profile.learned_at, (int, float))
        else 0.0,
        template=_str(profile.template)[:16])


def refreshed(old: UpstreamProfile | None, new: UpstreamProfile,
              now: float | None = None) -> UpstreamProfile:
    """`new`, with what `old` learned of refusals too when the server is the same (the same
    version, and the same chat template where both were seen): the refusals of both, each
    field until the later of its times, none whose time is up at `now` (when given)."""
    if old is None or (old.kind, old.version, old.template) != (new.kind, new.version,
                                                                 new.template):
        return new
    until = dict(new.refusals)
    for name, at in old.refusals:
        until[name] = max(at, until.get(name, at))
    refusals = tuple(sorted((name, at) for name, at in until.items()
                            if now is None or at > now))
    return new if refusals == new.refusals else dataclasses.replace(new, refusals=refusals)
