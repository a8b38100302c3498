"""What the proxy does with a request that came in, as plain functions of the app's objects
(`wiring.Proxy`) and the request: a front's turn or the passthrough (`handle`), the proxy's
health and status document, the upstreams' model cards, and the one upstream call of a
front's exchange (`ask`, Ollama's `/api/embed`...). What they keep between requests is the
app's (`Proxy.kept`)."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Any

import orjson
from flask import Request as FlaskRequest
from flask import request

from ... import __version__
from ...base.config import Config, mask_upstream, mask_url
from ...base.errors import ProxyError
from ...fronts import Ask, Incoming, ModelCard, Recall, Reply, recall_nothing
from ...fronts.registry import Routed
from ...telemetry.request_log import RequestLog
from ...telemetry.status import StatusInput, build, seen_by
from ...turn.plan import PassthroughPlan, TurnPlan
from ..driver.passthrough import all_models, passthrough
from ..driver.turns import TurnResponse
from ..runtime.wire import Response
from ..store.interface import StoreLimits, refusal
from ..upstream.catalog import model_cards as cards_of_upstreams
from ..upstream.catalog import model_ids
from ..upstream.client import Timeouts, Unreached
from ..upstream.profiles import LISTED_MAX
from .door import current_request, read_body
from .wiring import Proxy

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


def incoming_of(routed: Routed, raw: bytes, recall: Recall = recall_nothing,
                request: FlaskRequest | None = None) -> Incoming:
    """The request being handled (`request`, else Flask's current one) as its front sees it
    (`raw`: its body, read)."""
    request = current_request() if request is None else request
    return Incoming(request.method, request.path, raw, request.query_string.decode("latin-1"),
                    request.headers, routed.params, recall)


def status(app: Proxy, viewer: str) -> bytes:
    """The status document (JSON), the whole server's, with each upstream's health probe
    (asked at most every HEALTH_PROBE_SECONDS), as `viewer` (an owner) sees it: only its
    own turns link their capture. Built at most once every STATUS_SECONDS, for every
    viewer, and served from then on (reading every worker's ring is what costs), and
    no sooner than its last build's cost allows (STATUS_BUILD_SHARE)."""
    kept = app.kept.status
    if kept is None or time.monotonic() >= kept[0]:
        probes = {r["url"]: r for r in _upstream_reports(app)}
        with app.kept.status_building:  # one build at a time; who waited takes the new one
            kept = app.kept.status
            if kept is None or time.monotonic() >= kept[0]:
                recorder = app.recorder
                started = time.monotonic()
                built = build(StatusInput(
                    turns=recorder.turns(), minutes=recorder.minutes(),
                    upstreams=list(app.upstream_labels.values()),
                    in_flight=app.metrics.upstreams_in_flight(), probes=probes,
                    captures=app.config.log_bodies, version=__version__,
                    kept_per_worker=recorder.capacity))
                done = time.monotonic()
                # kept until the next build is due (its time: what this one cost)
                due = done + max(STATUS_SECONDS, (done - started) / STATUS_BUILD_SHARE)
                kept = app.kept.status = (due, built, {})
    seen = kept[2]  # this build as each viewer asked it (as many as keys, at most)
    if viewer not in seen:
        seen[viewer] = orjson.dumps(seen_by(kept[1], viewer))
    return seen[viewer]


def health(app: Proxy, check_upstream: bool) -> Response:
    """The proxy's status, version and settings (no secrets); with `check_upstream`,
    whether its store can be read and each upstream's reachability and models too (503
    when an upstream is down; the plain check reaches neither, as a liveness check
    should not)."""
    body: dict[str, Any] = {"status": "ok", "version": __version__,
                            "upstream": mask_upstream(app.config.upstream),
                            "config": app.config.summary()}
    if not check_upstream:
        return json_response(body)
    body["store"] = _store_report(app)
    body["upstreams"] = reports = _upstream_reports(app)
    if not all(r["ok"] for r in reports):
        body["status"] = "degraded"
        return json_response(body, 503)
    return json_response(body)


def _store_report(app: Proxy) -> dict[str, Any]:
    """Whether the response store can be read (told, not counted in the status: only the
    Responses front's kept answers need it)."""
    report: dict[str, Any] = {"backend": app.store.backend, "ok": True}
    try:
        app.store.check()
    except ProxyError as exc:
        report.update(ok=False, error=exc.message)
    return report


def _upstream_reports(app: Proxy) -> list[dict[str, Any]]:
    """Every upstream's report, asked anew at most every HEALTH_PROBE_SECONDS (a burst
    of health checks costs the upstreams one round of probes)."""
    with app.kept.probing:  # decides who asks; nobody waits on another's I/O
        probed = app.kept.probed
        due = probed is None or time.monotonic() - probed[0] >= HEALTH_PROBE_SECONDS
        mine = due and (probed is None or not app.kept.probe_under_way)
        if mine:
            app.kept.probe_under_way = True
    if mine:  # (with nothing to show yet, each asks: a slow upstream holds only it)
        try:
            reports = [_upstream_report(app, url, settings)
                       for url, settings in app.config.upstream_settings().items()]
            with app.kept.probing:
                app.kept.probed = (time.monotonic(), reports)
        finally:
            with app.kept.probing:
                app.kept.probe_under_way = False
    else:
        assert probed is not None
        reports = probed[1]  # the last round, while another is asking
    # What the probe found, with what the traffic found (both change: asked each time).
    states = {state["url"]: state for state in app.replicas.reports()}
    return [{**report, **{k: v for k, v in states.get(report["url"], {}).items()
                          if k != "url"}} for report in reports]


def _upstream_report(app: Proxy, url: str, settings: Config) -> dict[str, Any]:
    """One upstream's reachability, status and models, as /proxy/health reports them."""
    started = time.monotonic()
    report: dict[str, Any] = {"url": mask_url(url), "reachable": False, "ok": False}
    timeouts = Timeouts(settings.connect_timeout_seconds,
                        min(settings.read_timeout_seconds, 10.0))
    headers = app.upstream_headers(settings, buffered=True)
    try:
        reply = app.upstreams[url].complete_get("/v1/models", headers, timeouts,
                                                settings.max_upstream_body_bytes)
        report.update(status=reply.status, reachable=True)
        report["models"] = model_ids(reply)
        # Reachable but refusing (a wrong key, a base URL ending in /v1): not healthy.
        report["ok"] = reply.status == 200 and report["models"] is not None
        if report["ok"]:  # what each model's server is (learned once, then kept)
            report["profiles"] = _profile_records(app, url, report["models"], settings,
                                                  headers)
    except ProxyError as exc:
        report["error"] = exc.message
        app.replicas.failed(url, settings, exc.message,
                            mark_down=isinstance(exc, Unreached) and exc.connecting)
    if report["ok"]:
        app.replicas.mark_up(url)
    shown = mask_url(url)
    report["refusals"] = [r for r in app.profiles.refusals() if r["upstream"] == shown]
    report["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
    return report


def _profile_records(app: Proxy, url: str, models: list[Any], settings: Config,
                     headers: dict[str, str]) -> dict[str, Any]:
    """Each listed model's profile (every one the proxy profiles), learned side by side
    within one probe deadline; a model whose profile is not in by then is left out
    (it is shown once it is)."""
    learnings = {model: app.profiles.learning(url, model, settings, headers)
                 for model in [m for m in models if isinstance(m, str)][:LISTED_MAX]}
    deadline = time.monotonic() + app.profiles.deadline
    for learning in learnings.values():
        learning.wait(deadline - time.monotonic())
    return {model: learning.result().record()
            for model, learning in learnings.items() if learning.settled}


def model_cards(app: Proxy, log: RequestLog) -> tuple[ModelCard, ...]:
    """Every upstream's models as cards (each upstream asked with this request's
    headers and its own key); what they say of context lengths is remembered. A request
    with the same headers as one answered in the last MODELS_SECONDS gets that answer
    (a client polling `/api/tags`, `/api/show`, `/api/ps` asked every upstream's
    `/v1/models` each time); a list some upstream failed to give is not kept."""
    key = hashlib.sha256(orjson.dumps(sorted(
        (name.lower(), value) for name, value in request.headers.items()
        if name.lower() not in _NOT_IN_MODELS_KEY))).digest()
    now = time.monotonic()
    kept = app.kept.cards.get(key)
    if kept is not None and now - kept[0] < MODELS_SECONDS:
        cards = kept[1]
    else:
        notes = len(log.notes)
        cards = cards_of_upstreams(app.upstreams, app.replicas, app.config, log,
                                   lambda settings: app.upstream_headers(settings,
                                                                         buffered=True))
        if len(log.notes) == notes:  # every upstream answered
            app.kept.cards.pop(key, None)
            app.kept.cards[key] = (now, cards)
            while len(app.kept.cards) > MODELS_KEPT:  # the oldest go first
                del app.kept.cards[next(iter(app.kept.cards))]
    app.contexts.learn(cards)
    return tuple(dataclasses.replace(card, reasons=True) if _reasons(app, card.id)
                 else card for card in cards)


def _reasons(app: Proxy, model: str) -> bool:
    """Whether `model` is known to reason: its settings say its template opens thinking,
    or this process saw it close a block its template opened."""
    return (app.config.for_model(model).thinking_opened_by_template == "true"
            or app.thinking.knows(model))


def ask(app: Proxy, asked: Ask, log: RequestLog) -> Reply:
    """A front's one upstream call (on the upstream of the model it names), and what the
    front makes of its answer."""
    log.model = asked.model
    config = app.config.for_model(asked.model)
    headers = app.upstream_headers(config, buffered=True)
    timeouts = Timeouts(config.connect_timeout_seconds, config.read_timeout_seconds)
    upstream = app.upstreams[app.replicas.choose(config, None)]
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


def handle(app: Proxy, request: FlaskRequest, routed: Routed | None, log: RequestLog,
           target: str, api_key: str | None = None) -> Response:
    """Any request that came in (`request`, Flask's current one): a front's turn (`routed`),
    or relayed (None). `api_key`: the key that let it in, whose answers it may continue and
    keep."""
    raw = read_body(request, app.config.max_body_bytes, app.config.body_timeout_seconds)
    if routed is None and request.method in ("GET", "HEAD"):
        raw = b""  # a GET's content has no meaning (RFC 9110): relayed, it sends none
    config = app.config
    environ = request.environ
    if routed is not None:
        front = routed.front
        log.front = front.name
        recalled: dict[str, Any] = {}  # what the store gave the front, for `log_bodies`
        recall_own = _recall(app, api_key)

        def recall(key: str) -> list[dict[str, Any]] | None:
            recalled[key] = items = recall_own(key)
            return items

        plan = front.parse(incoming_of(routed, raw, recall, request), app.config)
        if isinstance(plan, (Reply, Ask)):  # no turn: the front's answer, or one call's
            log.mode = "answered" if isinstance(plan, Reply) else "exchange"
            reply = plan if isinstance(plan, Reply) else ask(app, plan, log)
            log.status, log.bytes_out = reply.status, len(reply.body)
            return Response(reply.body, status=reply.status,
                            content_type=reply.content_type)
        log.mode, log.model, log.client_stream = plan.mode, plan.model, plan.client_stream
        log.rewrites = list(plan.rewrites)
        if isinstance(plan, TurnPlan):
            if front.storing is not None:
                _admit(app, front.storing.keeping(plan), api_key)
            log.tools = frozenset(plan.extraction.tools)
            above = app.contexts.above(plan, lambda: model_cards(app, log))
            if above is not None:
                app.logger.warning(
                    "model %s: a client asks for a context window of %d tokens; the "
                    "upstream's is %d (set where it runs, e.g. vLLM's --max-model-len)",
                    plan.model, *above)
            if plan.config.log_bodies:  # a capture `replay` reads: the store's part too
                log.bodies = {"request": orjson.loads(raw),
                              **({"recalled": recalled} if recalled else {})}
            path = target if front.upstream_path is None else front.upstream_path
            headers = app.upstream_headers(plan.config, buffered=True, request=request)
            return TurnResponse(app.turn_services, front, plan, log, path, headers, environ,
                                api_key=api_key).respond()
        raw, config = plan.upstream_body, plan.config
    elif len(app.upstreams) > 1:
        if request.method == "GET" and request.path.rstrip("/") == "/v1/models":
            return all_models(app.passthrough_services, app.config, log, target,
                              lambda settings: app.upstream_headers(settings,
                                                                    buffered=True))
        config = app.config.for_model(_model_of(raw))
    planned = plan if routed is not None and isinstance(plan, PassthroughPlan) else None
    return passthrough(app.passthrough_services, request.method, raw, log, target, config,
                       app.upstream_headers(config, buffered=False, request=request), environ,
                       None if planned is None else planned.affinity,
                       whole=planned is not None and not planned.client_stream)


def _recall(app: Proxy, api_key: str | None) -> Recall:
    """The store's recall for the requests of `api_key`: its own answers only, and no
    conversation larger than a request body may be (`max_body_bytes`)."""
    store = app.store
    return lambda response_id: store.recall(store.owner(api_key), response_id,
                                            app.config.max_body_bytes)


def _admit(app: Proxy, incoming: int | None, api_key: str | None) -> None:
    """Refuse (413) a turn whose answer the store would have no room for, before
    upstream is called: never an answer silently not kept."""
    if incoming is None:
        return
    limits = StoreLimits.of(app.config)
    store = app.store
    usage = store.usage(store.owner(api_key)) if limits.max_bytes else None
    error = refusal(usage, incoming, limits)
    if error is not None:
        raise error
