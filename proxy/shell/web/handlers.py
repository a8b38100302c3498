"""What the proxy does with a request that came in: a front's turn, the relay, the proxy's
health, an answer the store keeps; and the app's objects they share (settings, upstream
clients, the door, the store, logger and metrics, the server's stopping)."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
from flask import Response, request

from ... import __version__
from ...base.config import Config, mask_upstream, mask_url
from ...base.errors import ProxyError
from ...fronts import Incoming, Recall, recall_nothing
from ...fronts.registry import Routed, key_headers
from ...telemetry.metrics import Metrics
from ...telemetry.request_log import RequestLog, make_logger
from ...telemetry.status import StatusInput, document, turn_record
from ...turn.plan import TurnPlan
from ...turn.thinking import ThinkingMemory
from ..driver.passthrough import all_models, model_ids, passthrough
from ..driver.turns import TurnResponse
from ..runtime.clients import ClientWatcher
from ..store import open_store
from ..store.interface import StoreLimits, refusal
from ..upstream.client import Timeouts, Unreached, Upstream
from ..upstream.profiles import Profiles
from ..upstream.replicas import Replicas
from .door import Door, read_body
from .recorder import make_recorder

PROFILED_MODELS = 8  # the models of an upstream whose profile the health check shows
REQUEST_ID = "toolcall_proxy.request_id"  # the environ key of the request's id
HEALTH_PROBE_SECONDS = 5.0  # /proxy/health?upstream=1 asks the upstreams at most this often


def json_response(payload: Any, status: int = 200) -> Response:
    """`payload` as a JSON response."""
    return Response(orjson.dumps(payload), status=status, content_type="application/json")


def _model_of(raw: bytes) -> str:
    """The `model` of a JSON request body, or "" (routing by model only)."""
    if not raw.lstrip().startswith(b"{"):
        return ""
    try:
        model = orjson.loads(raw).get("model")
    except orjson.JSONDecodeError:
        return ""
    return model if isinstance(model, str) else ""


def incoming_of(routed: Routed, raw: bytes, recall: Recall = recall_nothing) -> Incoming:
    """The request being handled as its front sees it (`raw`: its body, read)."""
    return Incoming(request.method, request.path, raw, request.query_string.decode("latin-1"),
                    request.headers, routed.params, recall)


class Proxy:
    """The app's objects: settings, upstream clients, the door, logger and metrics, and what
    the server's stopping means for requests still waiting."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.upstreams = {url: Upstream(url) for url in config.upstreams()}
        self.logger = make_logger(config.log_level)
        self.metrics = Metrics()
        self.recorder = make_recorder()  # what /proxy/status shows, every worker's
        self.upstream_labels = {url: mask_url(url) for url in config.upstreams()}
        self.replicas = Replicas(self.upstreams, self.metrics)
        self.door = Door(config.api_keys, key_headers())
        self.client_watcher = ClientWatcher(self.draining)
        self.store = open_store(config, self.logger)
        # Set when the server stops (gunicorn's graceful shutdown or reload): requests still
        # waiting on upstream then are ended, retryably, before the server would cut them.
        self.drain_at: float | None = None
        # Models seen closing a thinking block their template opened (per process).
        self.thinking = ThinkingMemory()
        # What each upstream is (kind, version, dialects, refusals), learned on first need.
        self.profiles = Profiles(self.upstreams, self.store)
        self._probed: tuple[float, list[dict[str, Any]]] | None = None  # when, and reports
        self._probing = threading.Lock()

    def drain(self, seconds: float) -> None:
        """The server is stopping: what still waits on upstream in `seconds` is ended with a
        503 (in the stream, for one that has started), never cut mid-stream without [DONE]."""
        self.drain_at = time.monotonic() + max(0.0, seconds)

    def draining(self) -> bool:
        """Whether waiting requests must end now (the server is stopping)."""
        return self.drain_at is not None and time.monotonic() >= self.drain_at

    def emit(self, log: RequestLog) -> None:
        """Write the request's log line, count it and keep its status record (once per
        request)."""
        if log.emitted:
            return
        record = log.emit(self.logger, self.config.log_format)
        total = time.monotonic() - log.started
        self.metrics.finished(log, total)
        if log.mode == "preflight":
            return
        try:
            capture = orjson.dumps(record) if log.bodies is not None else None
            self.recorder.record(turn_record(log, time.time(), total * 1000), capture)
        except OSError as exc:  # a full disk must not fail the request: the page misses it
            self.logger.warning("status record of %s not kept: %s", log.request_id, exc)

    def status(self, probe: bool) -> dict[str, Any]:
        """The status document, the whole server's; with `probe`, each upstream's health
        probe too (asked at most every HEALTH_PROBE_SECONDS)."""
        recorder = self.recorder
        probes = {r["url"]: r for r in self._upstream_reports()} if probe else {}
        return document(StatusInput(
            turns=recorder.turns(), minutes=recorder.minutes(),
            upstreams=list(self.upstream_labels.values()),
            in_flight=self.metrics.upstreams_in_flight(), probes=probes,
            captures=self.config.log_bodies, version=__version__,
            kept_per_worker=recorder.capacity))

    def upstream_headers(self, config: Config, *, buffered: bool) -> dict[str, str]:
        """This request's headers as they go upstream (see `Door.upstream_headers`)."""
        return self.door.upstream_headers(request.headers.items(), config,
                                          request.environ.get(REQUEST_ID), buffered=buffered)

    def health(self, check_upstream: bool) -> Response:
        """The proxy's status, version and settings (no secrets); with `check_upstream`,
        whether its store can be read and each upstream's reachability and models too (503
        when an upstream is down; the plain check reaches neither, as a liveness check
        should not)."""
        body: dict[str, Any] = {"status": "ok", "version": __version__,
                                "upstream": mask_upstream(self.config.upstream),
                                "config": self.config.summary()}
        if not check_upstream:
            return json_response(body)
        body["store"] = self._store_report()
        body["upstreams"] = reports = self._upstream_reports()
        if not all(r["ok"] for r in reports):
            body["status"] = "degraded"
            return json_response(body, 503)
        return json_response(body)

    def _store_report(self) -> dict[str, Any]:
        """Whether the response store can be read (told, not counted in the status: only the
        Responses front's kept answers need it)."""
        report: dict[str, Any] = {"backend": self.store.backend, "ok": True}
        try:
            self.store.check()
        except ProxyError as exc:
            report.update(ok=False, error=exc.message)
        return report

    def replica_reports(self) -> list[dict[str, Any]]:
        """Every upstream URL (each replica) as this process sees it, without I/O: `url`
        (masked), `up`, `in_flight`, `last_error`, `last_error_at` (for the status page)."""
        return self.replicas.reports()

    def _upstream_reports(self) -> list[dict[str, Any]]:
        """Every upstream's report, asked anew at most every HEALTH_PROBE_SECONDS (a burst
        of health checks costs the upstreams one round of probes)."""
        with self._probing:
            if self._probed is None or time.monotonic() - self._probed[0] >= HEALTH_PROBE_SECONDS:
                reports = [self._upstream_report(url, settings)
                           for url, settings in self.config.upstream_settings().items()]
                self._probed = (time.monotonic(), reports)
            reports = self._probed[1]
        # What the probe found, with what the traffic found (both change: asked each time).
        states = {state["url"]: state for state in self.replicas.reports()}
        return [{**report, **{k: v for k, v in states.get(report["url"], {}).items()
                              if k != "url"}} for report in reports]

    def _upstream_report(self, url: str, settings: Config) -> dict[str, Any]:
        """One upstream's reachability, status and models, as /proxy/health reports them."""
        started = time.monotonic()
        report: dict[str, Any] = {"url": mask_url(url), "reachable": False, "ok": False}
        timeouts = Timeouts(settings.connect_timeout_seconds,
                            min(settings.read_timeout_seconds, 10.0))
        headers = self.upstream_headers(settings, buffered=True)
        try:
            reply = self.upstreams[url].complete_get("/v1/models", headers, timeouts)
            report.update(status=reply.status, reachable=True)
            report["models"] = model_ids(reply)
            # Reachable but refusing (a wrong key, a base URL ending in /v1): not healthy.
            report["ok"] = reply.status == 200 and report["models"] is not None
            if report["ok"]:  # what each model's server is (learned once, then kept)
                models = [m for m in report["models"] if isinstance(m, str)]
                report["profiles"] = {
                    model: self.profiles.get(url, model, settings, headers).record()
                    for model in models[:PROFILED_MODELS]}
        except ProxyError as exc:
            report["error"] = exc.message
            self.replicas.failed(url, settings, exc.message,
                                 mark_down=isinstance(exc, Unreached) and exc.connecting)
        if report["ok"]:
            self.replicas.mark_up(url)
        report["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
        return report

    def handle(self, routed: Routed | None, log: RequestLog, target: str,
               api_key: str | None = None) -> Response:
        """Any request that came in: a front's turn (`routed`), or relayed (None).
        `api_key`: the key that let it in, whose answers it may continue and keep."""
        raw = read_body(request, self.config.max_body_bytes, self.config.body_timeout_seconds)
        config = self.config
        environ = request.environ
        if routed is not None:
            front = routed.front
            log.front = front.name
            recalled: dict[str, Any] = {}  # what the store gave the front, for `log_bodies`
            recall_own = self._recall(api_key)

            def recall(key: str) -> list[dict[str, Any]] | None:
                recalled[key] = items = recall_own(key)
                return items

            plan = front.parse(incoming_of(routed, raw, recall), self.config)
            log.mode, log.model, log.client_stream = plan.mode, plan.model, plan.client_stream
            log.rewrites = list(plan.rewrites)
            if isinstance(plan, TurnPlan):
                if front.storing is not None:
                    self._admit(front.storing.keeping(plan), api_key)
                log.tools = frozenset(plan.extraction.tools)
                if plan.config.log_bodies:  # a capture `replay` reads: the store's part too
                    log.bodies = {"request": orjson.loads(raw),
                                  **({"recalled": recalled} if recalled else {})}
                path = target if front.upstream_path is None else front.upstream_path
                headers = self.upstream_headers(plan.config, buffered=True)
                return TurnResponse(self, front, plan, log, path, headers, environ,
                                    api_key=api_key).respond()
            raw, config = plan.upstream_body, plan.config
        elif len(self.upstreams) > 1:
            if request.method == "GET" and request.path.rstrip("/") == "/v1/models":
                return all_models(self, log, target,
                                  lambda settings: self.upstream_headers(settings,
                                                                         buffered=True))
            config = self.config.for_model(_model_of(raw))
        affinity = None if routed is None else plan.affinity
        return passthrough(self, request.method, raw, log, target, config,
                           self.upstream_headers(config, buffered=False), environ, affinity)

    def _recall(self, api_key: str | None) -> Recall:
        """The store's recall for the requests of `api_key`: its own answers only, and no
        conversation larger than a request body may be (`max_body_bytes`)."""
        store = self.store
        return lambda response_id: store.recall(store.owner(api_key), response_id,
                                                self.config.max_body_bytes)

    def _admit(self, incoming: int | None, api_key: str | None) -> None:
        """Refuse (413) a turn whose answer the store would have no room for, before
        upstream is called: never an answer silently not kept."""
        if incoming is None:
            return
        limits = StoreLimits.of(self.config)
        store = self.store
        usage = store.usage(store.owner(api_key)) if limits.max_bytes else None
        error = refusal(usage, incoming, limits)
        if error is not None:
            raise error
