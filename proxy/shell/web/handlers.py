"""What the proxy does with a request that came in: a front's turn, the passthrough, the proxy's
health, an answer the store keeps; and the app's objects they share (settings, upstream clients,
the door, the store, logger and metrics, the server's stopping)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time
from typing import Any

import orjson
from flask import Response, request

from ... import __version__
from ...base.config import Config, mask_upstream, mask_url
from ...base.errors import ProxyError
from ...fronts import Ask, Incoming, ModelCard, Recall, Reply, recall_nothing
from ...fronts.registry import Routed, key_headers
from ...telemetry.metrics import Metrics
from ...telemetry.request_log import RequestLog, make_logger
from ...telemetry.status import StatusBuild, StatusInput, build, seen_by, turn_record
from ...turn.plan import TurnPlan
from ...turn.thinking import ThinkingMemory
from ..driver.passthrough import PassthroughServices, all_models, passthrough
from ..driver.turns import TurnResponse, TurnServices
from ..runtime.clients import ClientWatcher, client_socket
from ..store import open_store
from ..store.interface import StoreLimits, refusal
from ..upstream.catalog import ContextLengths, model_cards, model_ids
from ..upstream.client import Timeouts, Unreached, Upstream
from ..upstream.profiles import LISTED_MAX, Profiles
from ..upstream.replicas import Replicas
from .addressed import Addressing, local_port
from .door import Door, current_request, read_body
from .recorder import make_recorder
from .run_dir import allocate_worker_files

REQUEST_ID = "toolcall_proxy.request_id"  # the environ key of the request's id
HEALTH_PROBE_SECONDS = 5.0  # /proxy/health?upstream=1 asks the upstreams at most this often
STATUS_SECONDS = 1.0  # status.json is built at most this often (per process)
# ... and at most this share of the worker's time: the next build waits this many times
# what the last one took (a build reading many full rings is spaced out, never back to back)
STATUS_BUILD_SHARE = 0.1
MODELS_SECONDS = 5.0  # a model list answered is kept this long for the same headers
MODELS_KEPT = 64  # model lists kept (one per distinct set of request headers), at most
# What differs between two requests for the same model list, not the upstreams' answer.
_NOT_IN_MODELS_KEY = frozenset({"x-request-id", "content-length", "content-type"})


def json_response(payload: Any, status: int = 200) -> Response:
    """`payload` as a JSON response."""
    return Response(orjson.dumps(payload), status=status, content_type="application/json")


def _model_of(raw: bytes) -> str:
    """The `model` of a JSON request body, or "" (to pick the model's settings only)."""
    if not raw.lstrip().startswith(b"{"):
        return ""
    try:
        model = orjson.loads(raw).get("model")
    except orjson.JSONDecodeError:
        return ""
    return model if isinstance(model, str) else ""


def incoming_of(routed: Routed, raw: bytes, recall: Recall = recall_nothing) -> Incoming:
    """The request being handled as its front sees it (`raw`: its body, read)."""
    request = current_request()
    return Incoming(request.method, request.path, raw, request.query_string.decode("latin-1"),
                    request.headers, routed.params, recall)


class Proxy:
    """The app's objects: settings, upstream clients, the door, logger and metrics, and what
    the server's stopping means for requests still waiting."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.upstreams = {url: Upstream(url) for url in config.upstreams()}
        self.logger = make_logger(config.log_level)
        self.metrics = Metrics(shared=self._run_dir_allocated())
        # What /proxy/status shows, every worker's.
        self.recorder = make_recorder(warn=self.logger.warning)
        self.upstream_labels = {url: mask_url(url) for url in config.upstreams()}
        # A replica back from down may be another server version: its profile is read again.
        self.replicas = Replicas(self.upstreams, self.metrics,
                                 on_back=lambda url: self.profiles.recheck(url))
        self.door = Door(config.api_keys, key_headers())
        # The Ollama port's own door, when its keys differ (`ollama_api_keys`).
        ollama_keys = config.port_keys(config.ollama_port)
        self.ollama_door = (self.door if ollama_keys is config.api_keys
                            else Door(ollama_keys, key_headers()))
        self.addressing = Addressing.of(config.allowed_hosts, config.allowed_origins,
                                        config.host)
        self.client_watcher = ClientWatcher(self.draining)
        self.store = open_store(config, self.logger)
        # Set when the server stops (gunicorn's graceful shutdown or reload): requests still
        # waiting on upstream then are ended, retryably, before the server would cut them.
        self.drain_at: float | None = None
        # Models seen closing a thinking block their template opened (per process).
        self.thinking = ThinkingMemory()
        self.contexts = ContextLengths()  # the upstream's windows, for a client's own idea
        # What each upstream is (kind, version, dialects, refusals), learned on first need.
        self.profiles = Profiles(self.upstreams, self.store)
        self._probed: tuple[float, list[dict[str, Any]]] | None = None  # when, and reports
        self._probing = threading.Lock()  # who probes now (never held across the probe)
        self._probe_under_way = False
        # What a turn and a relayed request use of all this, handed to them by name.
        self.turn_services = TurnServices(self.replicas, self.thinking, self.store,
                                          self.logger, self.emit, self.draining,
                                          self.profiles)
        self.passthrough_services = PassthroughServices(self.replicas, self.upstreams,
                                                        self.client_watcher, self.emit,
                                                        self.draining)
        # status.json: when it is due to be built again, what, and its JSON by viewer.
        self._status_built: tuple[float, StatusBuild, dict[str, bytes]] | None = None
        self._status_building = threading.Lock()
        # model lists by a hash of the request's headers: when, and the cards
        self._cards: dict[bytes, tuple[float, tuple[ModelCard, ...]]] = {}

    def _run_dir_allocated(self) -> bool:
        """Whether this worker's Prometheus files are allocated in the run directory (or
        there is none); a full disk is logged, and the figures then kept in memory."""
        run_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        failed = allocate_worker_files(run_dir, os.getpid()) if run_dir else None
        if failed is not None:
            self.logger.warning("metrics of worker %s kept in memory: %s: %s", os.getpid(),
                                run_dir, failed.strerror or failed)
        return failed is None

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
        if log.mode in ("preflight", "refused") or (
                log.owner is None and (self.door.locked or self.ollama_door.locked)):
            return  # (with keys, only keyed requests: a flood of wrong keys keeps no history)
        try:
            capture = orjson.dumps(record) if log.bodies is not None else None
            self.recorder.record(turn_record(log, time.time(), total * 1000), capture)
        except OSError as exc:  # a full disk must not fail the request: the page misses it
            self.logger.warning("status record of %s not kept: %s", log.request_id, exc)

    def status(self, viewer: str) -> bytes:
        """The status document (JSON), the whole server's, with each upstream's health probe
        (asked at most every HEALTH_PROBE_SECONDS), as `viewer` (an owner) sees it: only its
        own turns link their capture. Built at most once every STATUS_SECONDS, for every
        viewer, and served from then on (reading every worker's ring is what costs), and
        no sooner than its last build's cost allows (STATUS_BUILD_SHARE)."""
        kept = self._status_built
        if kept is None or time.monotonic() >= kept[0]:
            probes = {r["url"]: r for r in self._upstream_reports()}
            with self._status_building:  # one build at a time; who waited takes the new one
                kept = self._status_built
                if kept is None or time.monotonic() >= kept[0]:
                    recorder = self.recorder
                    started = time.monotonic()
                    built = build(StatusInput(
                        turns=recorder.turns(), minutes=recorder.minutes(),
                        upstreams=list(self.upstream_labels.values()),
                        in_flight=self.metrics.upstreams_in_flight(), probes=probes,
                        captures=self.config.log_bodies, version=__version__,
                        kept_per_worker=recorder.capacity))
                    done = time.monotonic()
                    # kept until the next build is due (its time: what this one cost)
                    due = done + max(STATUS_SECONDS, (done - started) / STATUS_BUILD_SHARE)
                    kept = self._status_built = (due, built, {})
        seen = kept[2]  # this build as each viewer asked it (as many as keys, at most)
        if viewer not in seen:
            seen[viewer] = orjson.dumps(seen_by(kept[1], viewer))
        return seen[viewer]

    def door_of(self, environ: dict[str, Any]) -> Door:
        """The door of the port a request came in on: the Ollama port's own when its keys
        differ, else the main port's. The port is the socket's (never the Host header's); a
        server that shows no socket gets the main port's door."""
        if self.ollama_door is self.door:
            return self.door
        port = local_port(client_socket(environ))
        return self.ollama_door if port == self.config.ollama_port else self.door

    def upstream_headers(self, config: Config, *, buffered: bool) -> dict[str, str]:
        """This request's headers as they go upstream (see `Door.upstream_headers`)."""
        request = current_request()
        door = self.door_of(request.environ)
        return door.upstream_headers(request.headers.items(), config,
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
        with self._probing:  # decides who asks; nobody waits on another's I/O
            probed = self._probed
            due = probed is None or time.monotonic() - probed[0] >= HEALTH_PROBE_SECONDS
            mine = due and (probed is None or not self._probe_under_way)
            if mine:
                self._probe_under_way = True
        if mine:  # (with nothing to show yet, each asks: a slow upstream holds only it)
            try:
                reports = [self._upstream_report(url, settings)
                           for url, settings in self.config.upstream_settings().items()]
                with self._probing:
                    self._probed = (time.monotonic(), reports)
            finally:
                with self._probing:
                    self._probe_under_way = False
        else:
            assert probed is not None
            reports = probed[1]  # the last round, while another is asking
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
            reply = self.upstreams[url].complete_get("/v1/models", headers, timeouts,
                                                     settings.max_upstream_body_bytes)
            report.update(status=reply.status, reachable=True)
            report["models"] = model_ids(reply)
            # Reachable but refusing (a wrong key, a base URL ending in /v1): not healthy.
            report["ok"] = reply.status == 200 and report["models"] is not None
            if report["ok"]:  # what each model's server is (learned once, then kept)
                report["profiles"] = self._profile_records(url, report["models"], settings,
                                                           headers)
        except ProxyError as exc:
            report["error"] = exc.message
            self.replicas.failed(url, settings, exc.message,
                                 mark_down=isinstance(exc, Unreached) and exc.connecting)
        if report["ok"]:
            self.replicas.mark_up(url)
        shown = mask_url(url)
        report["refusals"] = [r for r in self.profiles.refusals() if r["upstream"] == shown]
        report["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
        return report

    def _profile_records(self, url: str, models: list[Any], settings: Config,
                         headers: dict[str, str]) -> dict[str, Any]:
        """Each listed model's profile (every one the proxy profiles), learned side by side
        within one probe deadline; a model whose profile is not in by then is left out
        (it is shown once it is)."""
        learnings = {model: self.profiles.learning(url, model, settings, headers)
                     for model in [m for m in models if isinstance(m, str)][:LISTED_MAX]}
        deadline = time.monotonic() + self.profiles.deadline
        for learning in learnings.values():
            learning.wait(deadline - time.monotonic())
        return {model: learning.result().record()
                for model, learning in learnings.items() if learning.settled}

    def model_cards(self, log: RequestLog) -> tuple[ModelCard, ...]:
        """Every upstream's models as cards (each upstream asked with this request's
        headers and its own key); what they say of context lengths is remembered. A request
        with the same headers as one answered in the last MODELS_SECONDS gets that answer
        (a client polling `/api/tags`, `/api/show`, `/api/ps` asked every upstream's
        `/v1/models` each time); a list some upstream failed to give is not kept."""
        key = hashlib.sha256(orjson.dumps(sorted(
            (name.lower(), value) for name, value in request.headers.items()
            if name.lower() not in _NOT_IN_MODELS_KEY))).digest()
        now = time.monotonic()
        kept = self._cards.get(key)
        if kept is not None and now - kept[0] < MODELS_SECONDS:
            cards = kept[1]
        else:
            notes = len(log.notes)
            cards = model_cards(self.upstreams, self.replicas, self.config, log,
                                lambda settings: self.upstream_headers(settings, buffered=True))
            if len(log.notes) == notes:  # every upstream answered
                self._cards.pop(key, None)
                self._cards[key] = (now, cards)
                while len(self._cards) > MODELS_KEPT:  # the oldest go first
                    del self._cards[next(iter(self._cards))]
        self.contexts.learn(cards)
        return tuple(dataclasses.replace(card, reasons=True) if self._reasons(card.id)
                     else card for card in cards)

    def _reasons(self, model: str) -> bool:
        """Whether `model` is known to reason: its settings say its template opens thinking,
        or this process saw it close a block its template opened."""
        return (self.config.for_model(model).thinking_opened_by_template == "true"
                or self.thinking.knows(model))

    def ask(self, asked: Ask, log: RequestLog) -> Reply:
        """A front's one upstream call (on the upstream of the model it names), and what the
        front makes of its answer."""
        log.model = asked.model
        config = self.config.for_model(asked.model)
        headers = self.upstream_headers(config, buffered=True)
        timeouts = Timeouts(config.connect_timeout_seconds, config.read_timeout_seconds)
        upstream = self.upstreams[self.replicas.choose(config, None)]
        log.upstream_clock.begin(time.monotonic())
        try:
            if asked.body is None:
                reply = upstream.complete_get(asked.path, headers, timeouts,
                                              config.max_upstream_body_bytes)
            else:
                reply = upstream.complete(asked.path, asked.body, headers, timeouts,
                                          max_bytes=config.max_upstream_body_bytes)
        finally:
            log.upstream_clock.end(time.monotonic())
        log.upstream_status = reply.status
        return asked.then(reply.status, reply.body)

    def handle(self, routed: Routed | None, log: RequestLog, target: str,
               api_key: str | None = None) -> Response:
        """Any request that came in: a front's turn (`routed`), or relayed (None).
        `api_key`: the key that let it in, whose answers it may continue and keep."""
        request = current_request()
        raw = read_body(request, self.config.max_body_bytes, self.config.body_timeout_seconds)
        if routed is None and request.method in ("GET", "HEAD"):
            raw = b""  # a GET's content has no meaning (RFC 9110): relayed, it sends none
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
            if isinstance(plan, (Reply, Ask)):  # no turn: the front's answer, or one call's
                log.mode = "answered" if isinstance(plan, Reply) else "exchange"
                reply = plan if isinstance(plan, Reply) else self.ask(plan, log)
                log.status, log.bytes_out = reply.status, len(reply.body)
                return Response(reply.body, status=reply.status,
                                content_type=reply.content_type)
            log.mode, log.model, log.client_stream = plan.mode, plan.model, plan.client_stream
            log.rewrites = list(plan.rewrites)
            if isinstance(plan, TurnPlan):
                if front.storing is not None:
                    self._admit(front.storing.keeping(plan), api_key)
                log.tools = frozenset(plan.extraction.tools)
                above = self.contexts.above(plan, lambda: self.model_cards(log))
                if above is not None:
                    self.logger.warning(
                        "model %s: a client asks for a context window of %d tokens; the "
                        "upstream's is %d (set where it runs, e.g. vLLM's --max-model-len)",
                        plan.model, *above)
                if plan.config.log_bodies:  # a capture `replay` reads: the store's part too
                    log.bodies = {"request": orjson.loads(raw),
                                  **({"recalled": recalled} if recalled else {})}
                path = target if front.upstream_path is None else front.upstream_path
                headers = self.upstream_headers(plan.config, buffered=True)
                return TurnResponse(self.turn_services, front, plan, log, path, headers, environ,
                                    api_key=api_key).respond()
            raw, config = plan.upstream_body, plan.config
        elif len(self.upstreams) > 1:
            if request.method == "GET" and request.path.rstrip("/") == "/v1/models":
                return all_models(self.passthrough_services, self.config, log, target,
                                  lambda settings: self.upstream_headers(settings,
                                                                         buffered=True))
            config = self.config.for_model(_model_of(raw))
        affinity = None if routed is None else plan.affinity
        return passthrough(self.passthrough_services, request.method, raw, log, target, config,
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
