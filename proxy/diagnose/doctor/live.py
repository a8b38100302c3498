"""The doctor against a live server: its models, the proxy's health, the probes of each turn
and of each front."""

from __future__ import annotations

import time
from typing import Any

import orjson

from ...base.config import Config, mask_url
from ...base.errors import ProxyError
from ...shell.upstream.client import Timeouts, Upstream
from ...shell.upstream.profiles import Profiles
from ...turn.plan import TurnPlan
from .findings import diagnose
from .fronts import Turn, front_settings, probe_fronts
from .probe import (
    MAX_ANSWER_BYTES,
    PROMPT,
    WEATHER_TOOL,
    DoctorError,
    Probe,
    error_message,
    plan_probe,
    read_answer,
    read_failure,
)


def _headers(api_key: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def list_models(upstream: Upstream, headers: dict[str, str], timeouts: Timeouts) -> list[str]:
    """The ids `GET /v1/models` lists; DoctorError when it cannot be read."""
    try:
        reply = upstream.complete_get("/v1/models", headers, timeouts, MAX_ANSWER_BYTES)
    except ProxyError as exc:
        raise DoctorError(read_failure(exc, f"{mask_url(upstream.base)}/v1/models")) from None
    if reply.status >= 400:
        try:
            answer = orjson.loads(reply.body)
        except orjson.JSONDecodeError:
            answer = None
        raise DoctorError(f"{mask_url(upstream.base)}/v1/models answered HTTP {reply.status}: "
                          f"{error_message(answer, reply.body)}")
    try:
        data = orjson.loads(reply.body).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        data = None
    if not isinstance(data, list):
        raise DoctorError(f"{mask_url(upstream.base)}/v1/models did not answer a model list "
                          "(is this an OpenAI-compatible server?)")
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


def proxy_health(upstream: Upstream, headers: dict[str, str],
                 timeouts: Timeouts) -> dict[str, Any] | None:
    """The server's `/proxy/health` when it answers as a Tool Call Proxy does, else None
    (vLLM answers 404; any failure is for `/v1/models` to report)."""
    try:
        reply = upstream.complete_get("/proxy/health", headers, timeouts, MAX_ANSWER_BYTES)
        health = orjson.loads(reply.body) if reply.status == 200 else None
    except (ProxyError, orjson.JSONDecodeError):
        return None
    if (isinstance(health, dict) and isinstance(health.get("version"), str)
            and isinstance(health.get("config"), dict) and "upstream" in health):
        return health
    return None


def run_probe(upstream: Upstream, name: str, plan: TurnPlan, headers: dict[str, str],
              timeouts: Timeouts) -> Probe:
    """Send one planned probe upstream and read the answer."""
    probe = Probe(name, orjson.loads(plan.upstream_body))
    started = time.monotonic()
    try:
        reply = upstream.complete("/v1/chat/completions", plan.upstream_body, headers,
                                  timeouts, max_bytes=MAX_ANSWER_BYTES)
    except ProxyError as exc:
        probe.error = read_failure(exc, "the answer")
        probe.network_error = exc.code != "upstream_too_large"
        return probe
    finally:
        probe.elapsed_ms = round((time.monotonic() - started) * 1000, 1)
    read_answer(probe, plan, reply.status, reply.body)
    return probe


def run_doctor(url: str, model: str | None, *, api_key: str = "", max_tokens: int = 512,
               timeout: float = 120.0) -> dict[str, Any]:
    """Probe the server at `url` and return the report; DoctorError if it cannot be probed."""
    upstream = Upstream(url, pool_size=2)
    headers = _headers(api_key)
    health = proxy_health(upstream, headers, Timeouts(5.0, 30.0))
    if health is not None:
        named = health["upstream"]  # one URL, or the list of a proxy's replicas
        behind = ",".join(mask_url(str(url)) for url in
                          (named if isinstance(named, list) else [named]))
        raise DoctorError(f"{mask_url(upstream.base)} is a Tool Call Proxy, not vLLM (its "
                          "/proxy/health answers as one), and probing through it would "
                          "judge the proxy's repairs: point doctor at the vLLM server behind "
                          f"it: --upstream {behind}")
    models = list_models(upstream, headers, Timeouts(5.0, 30.0))
    if not models:
        raise DoctorError(f"{mask_url(upstream.base)}/v1/models lists no model")
    if model is None:
        model = models[0]
    elif model not in models:
        raise DoctorError(f"model {model!r} is not served by {mask_url(upstream.base)}; it serves: "
                          f"{', '.join(models)}")
    timeouts = Timeouts(5.0, timeout)
    auto = run_probe(upstream, "auto", plan_probe(model, max_tokens, upstream_tool_parser=True),
                     headers, timeouts)
    none = run_probe(upstream, "none",
                     plan_probe(model, max_tokens, upstream_tool_parser=False),
                     headers, timeouts)
    report = diagnose(upstream.base, models, model, auto, none)
    # what the server is, as the proxy learns it (no generation): its dialects follow
    profile = Profiles({upstream.base: upstream}).get(
        upstream.base, model, Config(upstream=upstream.base,
                                     upstream_tool_parser=report["tool_parser"] == "on"),
        headers)
    report["profile"] = profile.record()
    report["fronts"] = _front_probes(report, upstream, headers, timeouts, max_tokens)
    return report


def _front_probes(report: dict[str, Any], upstream: Upstream, headers: dict[str, str],
                  timeouts: Timeouts, max_tokens: int) -> list[dict[str, Any]]:
    """Each front's tool turn with the recommended settings (none when nothing is
    recommended); a front whose turn fails is a failed probe too."""
    recommended = report["recommended"]
    if recommended is None:
        return []
    proxy = recommended["proxy"]
    turn = Turn(report["model"], WEATHER_TOOL["function"], PROMPT, max_tokens)
    probes = [probe.as_dict() for probe in probe_fronts(
        turn, front_settings(proxy["upstream_tool_parser"], proxy["formats"]), upstream,
        headers, timeouts)]
    report["failed"] += [{"probe": f"front {probe['front']}", "status": probe["status"],
                          "error": probe["error"]} for probe in probes if probe["error"]]
    return probes
