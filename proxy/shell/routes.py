"""The Flask app: each request through the door, then to its front's turn, to the relay, or
to one of the proxy's own endpoints. Routing and response writing only: decisions are the
core's (`proxy.turn`), wire formats the fronts' (`proxy.fronts`)."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from .. import __version__
from ..config import Config, mask_url
from ..errors import ProxyError
from ..fronts import Front
from ..fronts.chat import FRONT as CHAT
from ..fronts.messages import COUNT_TOKENS_PATH
from ..fronts.messages import FRONT as MESSAGES
from ..fronts.registry import front_for, kept_for
from ..metrics import Metrics
from ..observe import RequestLog, make_logger
from ..turn.plan import TurnPlan
from .clients import ClientWatcher
from .count_tokens import count_tokens
from .door import (
    Door,
    body_unread,
    cors_headers,
    is_preflight,
    origin_allowed,
    plain_path,
    preflight,
    read_body,
    request_target,
    shut_reading,
)
from .relay import all_models, model_ids, passthrough
from .store import KeptStore
from .turns import TurnResponse, error_response
from .upstream import Timeouts, Upstream

ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_REQUEST_ID = "toolcall_proxy.request_id"
HEALTH_PROBE_SECONDS = 5.0  # /proxy/health?upstream=1 asks the upstreams at most this often


def _json_response(payload: Any, status: int = 200) -> Response:
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


class Proxy:
    """The app's objects: settings, upstream clients, the door, logger and metrics, and what
    the server's stopping means for requests still waiting."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.upstreams = {url: Upstream(url) for url in config.upstreams()}
        self.logger = make_logger(config.log_level)
        self.metrics = Metrics()
        self.door = Door(config.api_keys)
        self.client_watcher = ClientWatcher(self.draining)
        self.store = KeptStore(config.responses_store_path,
                               config.responses_store_max_age_seconds,
                               config.responses_store_max_responses, self.logger)
        # Set when the server stops (gunicorn's graceful shutdown or reload): requests still
        # waiting on upstream then are ended, retryably, before the server would cut them.
        self.drain_at: float | None = None
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
        """Write the request's log line and count it (once per request)."""
        if log.emitted:
            return
        log.emit(self.logger, self.config.log_format)
        self.metrics.finished(log, time.monotonic() - log.started)

    def upstream_headers(self, config: Config, *, buffered: bool) -> dict[str, str]:
        """This request's headers as they go upstream (see `Door.upstream_headers`)."""
        return self.door.upstream_headers(request.headers.items(), config,
                                          request.environ.get(_REQUEST_ID), buffered=buffered)

    def health(self, check_upstream: bool) -> Response:
        """The proxy's status, version and settings (no secrets); with `check_upstream`, each
        upstream's reachability and models too (503 when one is down)."""
        body: dict[str, Any] = {"status": "ok", "version": __version__,
                                "upstream": mask_url(self.config.upstream),
                                "config": self.config.summary()}
        if not check_upstream:
            return _json_response(body)
        body["upstreams"] = reports = self._upstream_reports()
        if not all(r["ok"] for r in reports):
            body["status"] = "degraded"
            return _json_response(body, 503)
        return _json_response(body)

    def _upstream_reports(self) -> list[dict[str, Any]]:
        """Every upstream's report, asked anew at most every HEALTH_PROBE_SECONDS (a burst
        of health checks costs the upstreams one round of probes)."""
        with self._probing:
            if self._probed is None or time.monotonic() - self._probed[0] >= HEALTH_PROBE_SECONDS:
                reports = [self._upstream_report(url, settings)
                           for url, settings in self.config.upstream_settings().items()]
                self._probed = (time.monotonic(), reports)
            return self._probed[1]

    def _upstream_report(self, url: str, settings: Config) -> dict[str, Any]:
        """One upstream's reachability, status and models, as /proxy/health reports them."""
        started = time.monotonic()
        report: dict[str, Any] = {"url": mask_url(url), "reachable": False, "ok": False}
        timeouts = Timeouts(settings.connect_timeout_seconds,
                            min(settings.read_timeout_seconds, 10.0))
        try:
            reply = self.upstreams[url].complete_get(
                "/v1/models", self.upstream_headers(settings, buffered=True), timeouts)
            report.update(status=reply.status, reachable=True)
            report["models"] = model_ids(reply)
            # Reachable but refusing (a wrong key, a base URL ending in /v1): not healthy.
            report["ok"] = reply.status == 200 and report["models"] is not None
        except ProxyError as exc:
            report["error"] = exc.message
        report["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
        return report

    def handle(self, front: Front | None, log: RequestLog, target: str) -> Response:
        """Any request that came in: a front's turn, or relayed."""
        raw = read_body(request, self.config.max_body_bytes, self.config.body_timeout_seconds)
        config = self.config
        environ = request.environ
        if front is not None:
            log.front = front.name
            keeper = front.keeper
            plan = (keeper.parse(raw, self.config, self.store.recall) if keeper is not None
                    else front.parse(raw, self.config))
            log.mode, log.model, log.client_stream = plan.mode, plan.model, plan.client_stream
            log.rewrites = list(plan.rewrites)
            if isinstance(plan, TurnPlan):
                log.tools = frozenset(plan.extraction.tools)
                if plan.config.log_bodies:
                    log.bodies = {"request": orjson.loads(raw)}
                path = target if front.upstream_path is None else front.upstream_path
                headers = self.upstream_headers(plan.config, buffered=True)
                return TurnResponse(self, front, plan, log, path, headers, environ).respond()
            raw, config = plan.upstream_body, plan.config
        elif len(self.upstreams) > 1:
            if request.method == "GET" and request.path.rstrip("/") == "/v1/models":
                return all_models(self, log, target,
                                  lambda settings: self.upstream_headers(settings,
                                                                         buffered=True))
            config = self.config.for_model(_model_of(raw))
        return passthrough(self, request.method, raw, log, target, config,
                           self.upstream_headers(config, buffered=False), environ)

    def kept(self, front: Front, key: str, log: RequestLog) -> Response:
        """`GET` or `DELETE` of an answer the store keeps, in its front's shapes."""
        keeper = front.keeper
        assert keeper is not None
        log.front, log.mode = front.name, "store"
        if request.method == "GET":
            body = self.store.body(key)
        else:
            body = keeper.deleted(key) if self.store.delete(key) else None
        if body is None:
            raise keeper.missing(key)
        log.status, log.bytes_out = 200, len(body)
        return Response(body, status=200, content_type="application/json")


def _http_error(exc: HTTPException, config: Config) -> ProxyError:
    """Werkzeug's own refusals (413, 400 on a malformed request) in OpenAI's envelope."""
    status = exc.code or 500
    if status == 413:
        return ProxyError(413, f"The request body is larger than max_body_bytes "
                               f"({config.max_body_bytes} bytes).", code="request_too_large")
    return ProxyError(status, exc.description or exc.name,
                      code=exc.name.lower().replace(" ", "_"))


def create_app(config: Config) -> Flask:
    """The WSGI app for `config`: the proxy's own endpoints under /proxy/, the rest relayed."""
    app = Flask("toolcall_proxy")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes or None
    proxy = Proxy(config)
    app.extensions["toolcall_proxy"] = proxy

    def settled(response: Response, front: Front | None = None,
                log: RequestLog | None = None) -> Response:
        """`response`, once the request's body, if still unread (the request was refused or
        needs none), has been read and dropped within body_timeout_seconds: a body that
        does not come in time turns the answer into a 408 and the connection is closed."""
        if not body_unread(request.environ):
            return response
        try:
            read_body(request, config.max_body_bytes, config.body_timeout_seconds, keep=False)
        except ProxyError as error:
            return error_response(front or CHAT, error, log)
        except HTTPException:  # too large to be worth reading: the connection is closed
            shut_reading(request.environ)
        return response

    def own_endpoint(render: Callable[[], Response]) -> Response:
        try:
            if config.protect_proxy_endpoints:
                proxy.door.authorize(request.method, request.headers)
            return settled(render())
        except ProxyError as error:
            return settled(error_response(CHAT, error))

    @app.get("/proxy/health")
    def health() -> Response:
        check = request.args.get("upstream", "") not in ("", "0", "false")
        if check and not config.protect_proxy_endpoints:  # it calls the upstreams: keyed
            try:
                proxy.door.authorize(request.method, request.headers)
            except ProxyError as error:
                return settled(error_response(CHAT, error))
        return own_endpoint(lambda: proxy.health(check))

    @app.get("/proxy/metrics")
    def metrics() -> Response:
        return own_endpoint(lambda: Response(proxy.metrics.exposition(),
                                             content_type=proxy.metrics.content_type))

    def started() -> RequestLog:
        """The request's log record (its id: the client's X-Request-Id or a minted one)."""
        request_id = request.headers.get("X-Request-Id", "")[:128] or secrets.token_hex(8)
        request.environ[_REQUEST_ID] = request_id
        proxy.metrics.started()
        return RequestLog(request_id, request.method, request.path)

    def finished(response: Response, log: RequestLog, front: Front | None = None) -> Response:
        response = settled(response, front, log)
        response.headers["X-Request-Id"] = log.request_id
        # Streams log at their end; this covers the rest, and a stream the client left
        # before it began (WSGI servers always close the response).
        response.call_on_close(lambda: proxy.emit(log))
        return response

    @app.before_request
    def answer_preflight() -> Response | None:
        """A CORS preflight is answered here, on any path, never relayed upstream."""
        if not is_preflight(request.method, request.headers):
            return None
        log = started()
        log.mode = "preflight"
        answer = preflight(request.headers, config.cors_allow_origins)
        if isinstance(answer, ProxyError):
            return finished(error_response(CHAT, answer, log), log)
        log.status = 204
        return finished(Response(status=204, headers=answer), log)

    @app.after_request
    def allow_origin(response: Response) -> Response:
        """An answer a page from an allowed origin may read (`cors_allow_origins`)."""
        origin = request.headers.get("Origin")
        if origin and origin_allowed(origin, config.cors_allow_origins):
            for name, value in cors_headers(origin).items():
                response.headers.setdefault(name, value)
        return response

    @app.route("/", defaults={"path": ""}, methods=ALL_METHODS)
    @app.route("/<path:path>", methods=ALL_METHODS)
    def relay(path: str) -> Response:
        log = started()
        target = request_target(request.environ, request.path)
        kept = kept_for(request.method, request.path, config)
        front = kept[0] if kept else front_for(request.method, request.path)
        counting = (request.method == "POST"
                    and request.path.rstrip("/") == COUNT_TOKENS_PATH)
        envelope = MESSAGES if counting else front or CHAT
        try:
            proxy.door.authorize(request.method, request.headers)
            if not plain_path(target):
                raise ProxyError(400, "The request path must be a plain absolute path.",
                                 param="path", code="invalid_path")
            if kept:
                response = proxy.kept(*kept, log)
            elif counting:
                response = count_tokens(proxy, log, read_body(
                    request, config.max_body_bytes, config.body_timeout_seconds))
            else:
                response = proxy.handle(front, log, target)
        except ProxyError as error:
            response = error_response(envelope, error, log)
        except HTTPException as exc:
            response = error_response(envelope, _http_error(exc, config), log)
        except Exception:
            proxy.logger.exception("request %s failed", log.request_id)
            response = error_response(envelope, ProxyError(
                500, "The proxy failed to handle this request.", code="internal_error"), log)
        return finished(response, log, envelope)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        """Refusals before any route ran (a method no route takes, a path the router cannot
        match): the same envelope, id and log line as every other request."""
        log = started()
        return finished(error_response(CHAT, _http_error(exc, config), log), log)

    return app
