"""Settings: defaults < JSON config file < environment < command-line flags, validated.

A `models` section overrides settings per model, keyed by a glob on the request's model name.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..base.config import Config
from ..toolcalls.registry import UnknownFormat, resolve
from .store import BACKENDS as STORE_BACKENDS
from .upstream.choice import POLICIES

ENV_PREFIX = "TOOLCALL_PROXY_"


class ConfigError(ValueError):
    """A setting that cannot be used; the message is one line for a person."""


_CHOICES: dict[str, tuple[str, ...]] = {
    "heartbeat_mode": ("chunk", "comment", "both"),
    "constrained_reask": ("off", "demanded", "demanded+unreadable", "demanded+botched"),
    "reasoning_field": ("reasoning_content", "reasoning", "both", "drop"),
    "log_format": ("json", "text"),
    "log_level": ("debug", "info", "warning", "error"),
    "responses_mode": ("translate", "relay"),
    "stream_mode": ("buffer", "stream"),
    "unknown_tool_calls": ("deliver", "text"),
    "thinking_opened_by_template": ("auto", "true", "false"),
    "upstream_routing": POLICIES,
}
# Choices that read a JSON boolean as the choice of that name.
_BOOL_AS_CHOICE = frozenset({"thinking_opened_by_template"})
# Settings that only make sense for the whole process, never per model.
_PROCESS_ONLY = frozenset({"host", "port", "ollama_port", "models", "max_body_bytes",
                           "log_format", "log_level", "log_bodies", "server_timing", "api_keys",
                           "ollama_api_keys", "protect_proxy_endpoints",
                           "body_timeout_seconds", "allowed_hosts", "allowed_origins",
                           "responses_mode", "responses_store_url", "responses_store_path",
                           "responses_store_max_age_seconds", "responses_store_max_responses",
                           "responses_store_max_bytes_per_key", "responses_store_max_bytes"})

_FIELDS = {f.name: f for f in dataclasses.fields(Config)}
_DEFAULTS = Config()
_KINDS: dict[str, str] = {
    name: {bool: "bool", int: "int", float: "float", str: "str", tuple: "list"}.get(
        type(getattr(_DEFAULTS, name)), "")
    for name in _FIELDS
}
_KINDS["tool_temperature"] = "optional_float"
_KINDS["ollama_api_keys"] = "optional_list"
_KINDS["models"] = "models"
_KINDS["upstream"] = "upstreams"
# Settings read under an older name too (file key or environment variable): old name → new.
_RENAMED = {"cors_allow_origins": "allowed_origins"}
# Between two replicas written in one string: a comma before the next URL's scheme (a comma
# inside a URL, in its password, is left alone).
_URL_SEPARATOR = re.compile(r"\s*,\s*(?=https?://)")


def _coerce(name: str, value: Any, source: str) -> Any:
    """Check one value's type (JSON semantics: ints are accepted where floats are)."""
    kind = _KINDS[name]
    where = f"{source}: '{name}'"
    if kind in ("optional_float", "optional_list") and value is None:
        return None
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, not {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, not {value!r}")
        return value
    if kind in ("float", "optional_float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number, not {value!r}")
        return float(value)
    if kind == "str":
        if isinstance(value, bool) and name in _BOOL_AS_CHOICE:
            return "true" if value else "false"
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, not {value!r}")
        return value
    if kind == "upstreams":
        return _coerce_upstreams(value, where)
    if kind in ("list", "optional_list"):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings, not {value!r}")
        return tuple(value)
    return _coerce_models(value, where)


def _coerce_upstreams(value: Any, where: str) -> str | tuple[str, ...]:
    """One base URL, or the replicas of one model (a list, or URLs joined by commas); a list
    of one is that URL (a single upstream behaves as it always has)."""
    if isinstance(value, str):
        value = _URL_SEPARATOR.split(value.strip())
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, str) and v.strip() for v in value)):
        raise ConfigError(f"{where} must be a URL or a non-empty list of URLs, not {value!r}")
    urls = tuple(v.strip() for v in value)
    if len(set(urls)) < len(urls):
        raise ConfigError(f"{where} lists a replica twice")
    return urls[0] if len(urls) == 1 else urls


def _coerce_models(value: Any, where: str) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """`{"glob": {setting: value}}` with each setting checked like a top-level one."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object of model globs, not {value!r}")
    out = []
    for glob, settings in value.items():
        if not isinstance(settings, dict):
            raise ConfigError(f"{where}['{glob}'] must be an object of settings")
        checked = {}
        for key, item in settings.items():
            if key.startswith("_"):
                continue
            if key not in _FIELDS:
                raise ConfigError(f"{where}['{glob}']: unknown key '{key}'")
            if key in _PROCESS_ONLY:
                raise ConfigError(f"{where}['{glob}']: '{key}' cannot be set per model")
            checked[key] = _coerce(key, item, f"{where}['{glob}']")
        out.append((glob, checked))
    return tuple(out)


def _from_env_text(name: str, text: str, var: str) -> Any:
    """An environment variable's text as the setting's type."""
    kind = _KINDS[name]
    stripped = text.strip()
    if kind == "str" or (kind == "upstreams" and not stripped.startswith("[")):
        return text
    if kind == "optional_list" and stripped.lower() in ("none", "null"):
        return None
    if kind in ("list", "optional_list", "models", "upstreams") and stripped.startswith(
            ("[", "{", "null")):
        try:
            return orjson.loads(stripped)
        except orjson.JSONDecodeError:
            raise ConfigError(f"{var}: not valid JSON: {text!r}") from None
    if kind in ("list", "optional_list"):
        return [part.strip() for part in stripped.split(",") if part.strip()]
    if kind == "models":
        raise ConfigError(f"{var} must be a JSON object of model globs")
    if kind == "bool":
        lowered = stripped.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{var} must be true or false, not {text!r}")
    if kind == "optional_float" and stripped.lower() in ("", "none", "null"):
        return None
    try:
        return int(stripped) if kind == "int" else float(stripped)
    except ValueError:
        raise ConfigError(f"{var} must be {'an integer' if kind == 'int' else 'a number'}, "
                          f"not {text!r}") from None


def _validate(values: Mapping[str, Any], where: str = "") -> None:
    for name, choices in _CHOICES.items():
        if values[name] not in choices:
            raise ConfigError(f"{where}'{name}' must be one of {', '.join(choices)}, "
                              f"not {values[name]!r}")
    if not 0 < values["port"] < 65536:
        raise ConfigError(f"'port' must be between 1 and 65535, not {values['port']}")
    if not 0 <= values["ollama_port"] < 65536 or values["ollama_port"] == values["port"]:
        raise ConfigError(f"'ollama_port' must be 0 (off) or a port between 1 and 65535 other "
                          f"than 'port', not {values['ollama_port']}")
    upstream = values["upstream"]
    for url in upstream if isinstance(upstream, tuple) else (upstream,):
        _validate_url(url, where)
    if not 0 <= values["upstream_load_factor"] <= 100:
        raise ConfigError(f"{where}'upstream_load_factor' must be between 0 and 100")
    if values["upstream_down_seconds"] <= 0:
        raise ConfigError(f"{where}'upstream_down_seconds' must be greater than 0")
    for name in ("loop_guard_max_tool_calls", "max_body_bytes", "max_upstream_body_bytes",
                 "required_call_retries", "responses_store_max_responses",
                 "responses_store_max_age_seconds", "responses_store_max_bytes_per_key",
                 "responses_store_max_bytes"):
        if values[name] < 0:
            raise ConfigError(f"{where}'{name}' must not be negative")
    for name in ("connect_timeout_seconds", "read_timeout_seconds", "buffered_timeout_seconds"):
        if values[name] <= 0:
            raise ConfigError(f"{where}'{name}' must be greater than 0")
    for name in ("commit_window_seconds", "heartbeat_seconds", "body_timeout_seconds"):
        if values[name] < 0:
            raise ConfigError(f"{where}'{name}' must not be negative")
    for name in ("api_keys", "ollama_api_keys"):
        if any(not key.strip() for key in values[name] or ()):
            raise ConfigError(f"{where}'{name}' must not hold an empty key (it would let any "
                              "request in; an empty list makes that port keyless)")
    for name in ("allowed_hosts", "allowed_origins"):
        if any(not entry.strip() for entry in values[name]):
            raise ConfigError(f"{where}'{name}' must not hold an empty entry")
    _check_store_url(values["responses_store_url"], values["responses_store_path"])
    temperature = values["tool_temperature"]
    if temperature is not None and not 0 <= temperature <= 2:
        raise ConfigError(f"{where}'tool_temperature' must be between 0 and 2")
    try:
        resolve(values["formats"])
    except UnknownFormat as exc:
        raise ConfigError(f"{where}'formats': {exc}") from None


def _check_store_url(url: str, path: str) -> None:
    """`responses_store_url`: a scheme some backend serves, and a URL that backend can use
    (its own check, declared beside it)."""
    if not url:
        return
    if path:
        raise ConfigError("set 'responses_store_url' or 'responses_store_path', not both")
    scheme, sep, _ = url.partition("://")
    backend = STORE_BACKENDS.get(scheme) if sep else None
    if backend is None:
        raise ConfigError(f"'responses_store_url' must start with one of "
                          f"{', '.join(s + '://' for s in STORE_BACKENDS)}, not {url!r}")
    problem = backend.check_url(url)
    if problem is not None:
        raise ConfigError(f"'responses_store_url' {problem}")


def _validate_url(url: str, where: str) -> None:
    """One upstream base URL: http(s), a host, no query, not ending in /v1."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}'upstream' must be an http:// or https:// URL, not {url!r}")
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}'upstream' must not carry a query or fragment")
    if parts.path.rstrip("/").endswith("/v1"):
        root = url.rstrip("/")[:-3]
        raise ConfigError(f"{where}'upstream' is the server's root, without /v1 (request paths "
                          f"already start with /v1): {root!r}, not {url!r}")


def read_config_file(path: str) -> dict[str, Any]:
    """The JSON object in `path`, or a ConfigError saying why it cannot be used."""
    try:
        with open(path, "rb") as fh:
            data = orjson.loads(fh.read())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a JSON object")
    return data


def build_config(
    file_values: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    *,
    file_label: str = "config file",
) -> Config:
    """Merge the layers in precedence order and validate the result (and each model's)."""
    values = {name: getattr(_DEFAULTS, name) for name in _FIELDS}
    for key, value in (file_values or {}).items():
        if key.startswith("_"):  # "_comment" keys document the file
            continue
        key = _RENAMED.get(key, key)
        if key not in _FIELDS:
            raise ConfigError(f"{file_label}: unknown key '{key}'")
        values[key] = _coerce(key, value, file_label)
    renamed = {new: old for old, new in _RENAMED.items()}
    for name in _FIELDS:
        for var in (ENV_PREFIX + renamed.get(name, "").upper(), ENV_PREFIX + name.upper()):
            if env and var in env and var != ENV_PREFIX:
                values[name] = _coerce(name, _from_env_text(name, env[var], var), var)
    for key, value in (flags or {}).items():
        if value is not None:
            values[key] = _coerce(key, value, f"--{key}")
    _validate(values)
    for glob, overrides in values["models"]:
        _validate({**values, **overrides}, f"models['{glob}']: ")
    return Config(**values)


def parse_flags(argv: Sequence[str]) -> argparse.Namespace:
    """The command line of `python app.py`."""
    parser = argparse.ArgumentParser(
        prog="app.py",
        description="Tool Call Proxy: repairs the tool calls of local models behind vLLM",
        epilog="other commands: `app.py doctor --help` (probe a live vLLM and recommend "
               "settings), `app.py replay --help` (run a captured exchange through the proxy)",
    )
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (default 8003)")
    parser.add_argument("--ollama-port", type=int,
                        help="a second port for Ollama's clients, e.g. 11434 (default 0: off)")
    parser.add_argument("--ollama-api-keys", metavar="KEYS",
                        help="the keys of the Ollama port, comma-separated, when they differ "
                             "from api_keys; '' for none (a keyless port). Seen by every "
                             "local user in the process list: prefer "
                             "TOOLCALL_PROXY_OLLAMA_API_KEYS")
    parser.add_argument("--upstream", help="base URL of vLLM (default http://127.0.0.1:8000); "
                                           "replicas of one model: URLs joined by commas")
    parser.add_argument("--config", help="JSON config file (env TOOLCALL_PROXY_CONFIG)")
    return parser.parse_args(list(argv))


def load_config(argv: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> Config:
    """The effective settings for this process: defaults < file < environment < flags."""
    env = os.environ if environ is None else environ
    args = parse_flags(argv)
    path = args.config or env.get(ENV_PREFIX + "CONFIG")
    file_values = read_config_file(path) if path else {}
    flags = {"host": args.host, "port": args.port, "ollama_port": args.ollama_port,
             "upstream": args.upstream,
             "ollama_api_keys": None if args.ollama_api_keys is None else _from_env_text(
                 "ollama_api_keys", args.ollama_api_keys, "--ollama-api-keys")}
    return build_config(file_values, env, flags, file_label=path or "config file")
