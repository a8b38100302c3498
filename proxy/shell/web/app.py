"""The Flask app: each request through the door, then to what handles it (`handlers`): a
front's turn, the passthrough, one of the proxy's own endpoints. Request plumbing only (the log
record, the body a refused request still sends, CORS); decisions are the core's
(`proxy.turn`), wire formats the fronts' (`proxy.fronts`)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from functools import cached_property
from typing import Any

from flask import Flask
from flask import Request as FlaskRequest
from flask import Response as FlaskResponse
from flask.ctx import RequestContext
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from flask.signals import (
    appcontext_tearing_down,
    request_finished,
    request_started,
    request_tearing_down,
)
from werkzeug.exceptions import HTTPException
from werkzeug.routing import MapAdapter, Rule

from ...base.config import Config
from ...base.errors import ProxyError
from ...fronts import CATALOG, COUNT, EXCHANGE, TURN, Front
from ...fronts.registry import DEFAULT, route_for
from ...telemetry.request_log import RequestLog
from ...telemetry.status_page import CONTENT_SECURITY_POLICY, page
from ..driver.turns import error_response
from ..runtime.clients import client_socket
from ..runtime.wire import Response
from . import handlers
from .addressed import cors_headers, is_preflight, local_address, preflight
from .count_tokens import count_tokens
from .door import (
    body_unread,
    current_request,
    plain_path,
    read_body,
    request_context_var,
    request_target,
    shut_reading,
)
from .exchange import catalog, exchange
from .stored import stored
from .wiring import REQUEST_ID, Proxy

ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_CAPTURE_KEY = re.compile(r"\d{1,10}-\d{1,19}")  # a recorder's key: worker, sequence
# A browser asked for a key on the status page offers it as Basic auth's password.
_BASIC_CHALLENGE = 'Basic realm="toolcall-proxy", charset="UTF-8"'


def _http_error(exc: HTTPException, config: Config) -> ProxyError:
    """Werkzeug's own refusals (413, 400 on a malformed request) in OpenAI's envelope."""
    status = exc.code or 500
    if status == 413:
        return ProxyError(413, f"The request body is larger than max_body_bytes "
                               f"({config.max_body_bytes} bytes).", code="request_too_large")
    return ProxyError(status, exc.description or exc.name,
                      code=exc.name.lower().replace(" ", "_"))


class Views:
    """The app's views and hooks, around one `Proxy`."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.config = proxy.config

    def started(self, request: FlaskRequest) -> RequestLog:
        """The request's log record (its id: the client's X-Request-Id or a minted one)."""
        # (the header from the environ itself, as Werkzeug's headers read it, a call less)
        request_id = (request.environ.get("HTTP_X_REQUEST_ID", "")[:128]
                      or secrets.token_hex(8))
        request.environ[REQUEST_ID] = request_id
        self.proxy.metrics.started()
        return RequestLog(request_id, request.method, request.path)

    def settled(self, request: FlaskRequest, response: Response, front: Front | None = None,
                log: RequestLog | None = None) -> Response:
        """`response`, once the request's body, if still unread (the request was refused or
        needs none), has been read and dropped within body_timeout_seconds: a body that
        does not come in time turns the answer into a 408 and the connection is closed."""
        if not body_unread(request.environ):
            return response
        config = self.config
        try:
            read_body(request, config.max_body_bytes, config.body_timeout_seconds, keep=False)
        except ProxyError as error:
            return error_response(front or DEFAULT, error, log)
        except HTTPException:  # too large to be worth reading: the connection is closed
            shut_reading(request.environ)
        return response

    def finished(self, request: FlaskRequest, response: Response, log: RequestLog,
                 front: Front | None = None) -> Response:
        """The response on its way out: its body settled, its id, its log line at close."""
        response = self.settled(request, response, front, log)
        response.headers["X-Request-Id"] = log.request_id
        if self.config.server_timing:  # measured as the head goes out (a stream's too)
            response.headers.add("Server-Timing", log.server_timing())
        # Streams log at their end; this covers the rest, and a stream the client left
        # before it began (WSGI servers always close the response).
        response.call_on_close(lambda: self.proxy.emit(log))
        return response

    def own_endpoint(self, render: Callable[[str | None], Response], *, keyed: bool = False,
                     browser: bool = False) -> Response:
        """One of the proxy's own endpoints, keyed when `protect_proxy_endpoints` (or
        `keyed`) says so; `render` gets the key that was accepted (None: none was asked, or
        the proxy has no keys). A `browser` page's refusal asks the browser for the key."""
        request = current_request()
        try:
            api_key = None
            if keyed or self.config.protect_proxy_endpoints:
                api_key = self.proxy.door.authorize(request.method, request.headers)
            return self.settled(request, render(api_key))
        except ProxyError as error:
            response = self.settled(request, error_response(DEFAULT, error))
            if browser and error.status == 401:
                response.headers["WWW-Authenticate"] = _BASIC_CHALLENGE
            return response

    def status_page(self) -> Response:
        """`/proxy/status`: the page (it fetches `status.json` beside it). It shows the
        model names, errors and request ids clients caused: keyed when keys are set."""
        headers = {"Content-Security-Policy": CONTENT_SECURITY_POLICY,
                   "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                   "Referrer-Policy": "no-referrer"}
        return self.own_endpoint(lambda _key: Response(page(), headers=headers,
                                                       content_type="text/html; charset=utf-8"),
                                 keyed=True, browser=True)

    def status_json(self) -> Response:
        """`/proxy/status.json`: the whole server's status document, keyed like the page;
        only the asking key's own turns link their capture."""
        def render(api_key: str | None) -> Response:
            viewer = self.proxy.recorder.owner(api_key)
            return Response(handlers.status(self.proxy, viewer), content_type="application/json",
                            headers={"Cache-Control": "no-store",
                                     "X-Content-Type-Options": "nosniff"})
        return self.own_endpoint(render, keyed=True, browser=True)

    def status_capture(self, key: str) -> Response:
        """`/proxy/status/capture/KEY`: one turn's capture (log_bodies), for `replay`, to the
        key that made the turn only (it holds that key's prompt); any other key, and a key
        never kept, get the same 404."""
        def render(api_key: str | None) -> Response:
            owner = self.proxy.recorder.owner(api_key)
            capture = (self.proxy.recorder.capture(key, owner)
                       if self.config.log_bodies and _CAPTURE_KEY.fullmatch(key) else None)
            if capture is None:
                raise ProxyError(404, f"No capture {key!r} is kept for this key (log_bodies "
                                      "off, an older turn's, or another key's).",
                                 type_="invalid_request_error", code="capture_not_found")
            return Response(capture, content_type="application/json", headers={
                "Content-Disposition": f'attachment; filename="turn-{key}.json"',
                "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})
        return self.own_endpoint(render, keyed=True, browser=True)

    def health(self) -> Response:
        """`/proxy/health`; `?upstream=1` calls the upstreams, so it needs a key when keys
        are set."""
        request = current_request()
        check = request.args.get("upstream", "") not in ("", "0", "false")
        return self.own_endpoint(lambda _key: handlers.health(self.proxy, check), keyed=check)

    def metrics(self) -> Response:
        """`/proxy/metrics`: Prometheus text."""
        metrics = self.proxy.metrics
        return self.own_endpoint(lambda _key: Response(metrics.exposition(),
                                                       content_type=metrics.content_type))

    def admit(self) -> Response | None:
        """Before anything else, on every path and port: a request not addressed to this
        proxy (a Host it does not answer to, a page's Origin not allowed) is refused with
        a 403, in the envelope of the front the path belongs to; a CORS preflight is
        answered here, never relayed upstream."""
        request = current_request()
        refused = self.proxy.addressing.refusal(
            request.headers, local_address(client_socket(request.environ)))
        if refused is None and not is_preflight(request.method, request.headers):
            return None
        log = self.started(request)
        routed = route_for(request.method, request.path, self.config)
        envelope = routed.front if routed else DEFAULT
        log.mode = "refused" if refused is not None else "preflight"
        answer = refused or preflight(request.headers)
        if isinstance(answer, ProxyError):
            return self.finished(request, error_response(envelope, answer, log), log,
                                 envelope)
        log.status = 204
        return self.finished(request, Response(status=204, headers=answer), log)

    def allow_origin(self, response: Response) -> Response:
        """An answer a page from an allowed origin may read: one `admit` let in (listed in
        `allowed_origins`, or a desktop app's own), as its preflight was told. (A refused
        one's answer is `admit`'s 403, read by no page.)"""
        request = current_request()
        environ = request.environ  # (its headers, as Werkzeug's read them)
        origin = environ.get("HTTP_ORIGIN")
        if origin and self.proxy.addressing.origin_allowed(origin, environ.get("HTTP_HOST", "")):
            for name, value in cors_headers(origin).items():
                response.headers.setdefault(name, value)
        return response

    def dispatch(self, path: str = "") -> Response:
        """Every other request, dispatched: a front's turn, an answer the store keeps, a token
        count, or the passthrough; an error in the envelope of the API the client speaks."""
        request = current_request()
        proxy, config = self.proxy, self.config
        log = self.started(request)
        target = request_target(request.environ, request.path)
        routed = route_for(request.method, request.path, config)
        envelope = routed.front if routed else DEFAULT
        try:
            api_key = proxy.door_of(request.environ).authorize(request.method, request.headers)
            log.owner = proxy.recorder.owner(api_key)
            if not plain_path(target):
                raise ProxyError(400, "The request path must be a plain absolute path.",
                                 param="path", code="invalid_path")
            if routed is None:
                response = handlers.handle(proxy, request, None, log, target)
            elif routed.route.action == TURN:
                response = handlers.handle(proxy, request, routed, log, target, api_key)
            elif routed.route.action == COUNT:
                response = count_tokens(proxy, routed, log, read_body(
                    request, config.max_body_bytes, config.body_timeout_seconds))
            elif routed.route.action in (CATALOG, EXCHANGE):
                answer = catalog if routed.route.action == CATALOG else exchange
                response = answer(proxy, routed, log, read_body(
                    request, config.max_body_bytes, config.body_timeout_seconds))
            else:
                response = stored(proxy, routed, log, api_key)
        except ProxyError as error:
            response = error_response(envelope, error, log)
        except HTTPException as exc:
            response = error_response(envelope, _http_error(exc, config), log)
        except Exception:
            proxy.logger.exception("request %s failed", log.request_id)
            response = error_response(envelope, ProxyError(
                500, "The proxy failed to handle this request.", code="internal_error"), log)
        return self.finished(request, response, log, envelope)

    def http_error(self, exc: HTTPException) -> Response:
        """Refusals before any route ran (a method no route takes, a path the router cannot
        match): the same envelope, id and log line as every other request."""
        request = current_request()
        log = self.started(request)
        return self.finished(request, error_response(DEFAULT, _http_error(exc, self.config), log),
                             log)


class _Request(FlaskRequest):
    """Flask's request, whose `close` looks for uploaded files to close only when they were
    parsed (Werkzeug's walks an empty list's items through a generator each request)."""

    def close(self) -> None:
        if self.__dict__.get("files"):
            super().close()


_APP_ONLY = frozenset({None})  # the after-request hooks' key of the app's own
_NO_SESSION = object()


class _App(Flask):
    """Flask, each view and hook looked at once (Flask asks `inspect` whether it is a
    coroutine function on every call of each, three times per request), and without the
    per-request steps of what the proxy never uses, each kept when something is there to
    run: blinker's signals with no receiver, the url value preprocessors and blueprints'
    hooks, the teardown functions, the cookie session (no secret key: a fresh null session
    each request, never saved)."""

    response_class = Response
    request_class = _Request
    ADAPTERS = 256  # URL adapters kept
    ADAPTER_TEXT = 512  # the longest path and query string whose adapter is kept

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._synced: dict[Callable[..., Any], Callable[..., Any]] = {}
        self.session_interface = _Sessionless()
        # (rule, view args) by what Werkzeug matches on: domain part, path, method, websocket
        self.matches: dict[tuple[str | None, str, str, bool], tuple[Rule, dict[str, Any]]] = {}
        # (URL adapter, host) by every value of the environ Flask's own adapter is made of
        self.adapters: dict[tuple[Any, ...], tuple[MapAdapter, str]] = {}

    def request_context(self, environ: dict[str, Any]) -> RequestContext:
        return _Matched(self, environ)

    def create_url_adapter(self, request: FlaskRequest | None) -> MapAdapter | None:
        """Flask's URL adapter for `request`, made by Werkzeug once for the values of the
        environ it reads (its Host, server, scheme, upgrade, script, path, method and query:
        the adapter is a function of these, and read-only) and the request's host set as
        Flask sets it; only where Flask's settings bind to the environ alone (no
        SERVER_NAME, no TRUSTED_HOSTS, neither host nor subdomain matching), for a short
        path and query, at most `ADAPTERS` kept, then they start over."""
        config = self.config
        if (request is None or config["SERVER_NAME"] is not None
                or config["TRUSTED_HOSTS"] is not None or self.url_map.host_matching
                or self.subdomain_matching):
            return super().create_url_adapter(request)
        key = _adapter_key(request.environ)
        kept = self.adapters.get(key) if key is not None else None
        if kept is not None:
            request.host = kept[1]  # (a cached property, set as Flask sets it)
            return kept[0]
        adapter = super().create_url_adapter(request)
        if key is not None and adapter is not None:
            if len(self.adapters) >= self.ADAPTERS:
                self.adapters.clear()
            self.adapters[key] = (adapter, request.host)
        return adapter

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        synced = self._synced.get(func)
        if synced is None:
            synced = super().ensure_sync(func)
            if len(self._synced) < 256:  # (the app's own views and hooks: a few)
                self._synced[func] = synced
        return synced

    def full_dispatch_request(self) -> FlaskResponse:
        if request_started.receivers:
            return super().full_dispatch_request()
        self._got_first_request = True  # (as Flask's own: no setup after this)
        try:
            rv = self.preprocess_request()
            if rv is None:
                rv = self.dispatch_request()
        except Exception as e:
            rv = self.handle_user_exception(e)
        return self.finalize_request(rv)

    def finalize_request(self, rv: Any, from_error_handler: bool = False) -> FlaskResponse:
        if request_finished.receivers:
            return super().finalize_request(rv, from_error_handler)
        response = self.make_response(rv)
        try:
            response = self.process_response(response)
        except Exception:
            if not from_error_handler:
                raise
            self.logger.exception(
                "Request finalizing failed with an error while handling an error")
        return response

    def dispatch_request(self) -> Any:
        """Flask's, the request read from its context itself (Flask's proxy to it is three
        Python calls more)."""
        context = request_context_var.get(None) if request_context_var is not None else None
        if context is None:
            return super().dispatch_request()
        request = context.request
        if request.routing_exception is not None:
            self.raise_routing_exception(request)
        rule = request.url_rule
        if getattr(rule, "provide_automatic_options", False) and request.method == "OPTIONS":
            return self.make_default_options_response()
        return self.ensure_sync(self.view_functions[rule.endpoint])(**request.view_args)

    def process_response(self, response: FlaskResponse) -> FlaskResponse:
        """Flask's, for an app whose after-request hooks are all its own (no blueprint's):
        the request context's hooks, then the app's, last registered first; the null session
        never saved. (Flask finds the request's blueprints through its proxies first.)"""
        context = request_context_var.get(None) if request_context_var is not None else None
        funcs = self.after_request_funcs
        # (a Flask whose context keeps these otherwise is served by its own)
        hooks = getattr(context, "_after_request_functions", None)
        session: Any = getattr(context, "_session", _NO_SESSION)
        if (hooks is None or session is _NO_SESSION or self.blueprints
                or not funcs.keys() <= _APP_ONLY):
            return super().process_response(response)
        for func in hooks:
            response = self.ensure_sync(func)(response)
        for func in reversed(funcs.get(None, ())):
            response = self.ensure_sync(func)(response)
        if not self.session_interface.is_null_session(session):
            self.session_interface.save_session(self, session, response)
        return response

    def preprocess_request(self) -> Any:
        if self.url_value_preprocessors or self.blueprints:
            return super().preprocess_request()
        for before in self.before_request_funcs.get(None, ()):
            rv = self.ensure_sync(before)()
            if rv is not None:
                return rv
        return None

    def do_teardown_request(self, *exc: BaseException | None) -> None:
        if self.teardown_request_funcs or request_tearing_down.receivers:
            super().do_teardown_request(*exc)

    def do_teardown_appcontext(self, *exc: BaseException | None) -> None:
        if self.teardown_appcontext_funcs or appcontext_tearing_down.receivers:
            super().do_teardown_appcontext(*exc)


# What Werkzeug's bind_to_environ (and get_host in it) read of the environ.
_ADAPTER_KEYS = ("HTTP_HOST", "SERVER_NAME", "SERVER_PORT", "wsgi.url_scheme",
                 "HTTP_CONNECTION", "HTTP_UPGRADE", "SCRIPT_NAME", "PATH_INFO",
                 "REQUEST_METHOD", "QUERY_STRING")
_STR_OR_NONE = frozenset({str, type(None)})


def _adapter_key(environ: dict[str, Any]) -> tuple[Any, ...] | None:
    """The environ's values a URL adapter is made of, or None when one is not a string (or
    absent where Werkzeug needs it) or the path and query are too long to keep."""
    key = tuple(map(environ.get, _ADAPTER_KEYS))
    if not _STR_OR_NONE.issuperset(map(type, key)):
        return None
    if key[3] is None or key[8] is None:  # (Werkzeug's KeyError, as it raises it)
        return None
    if len(key[7] or "") + len(key[9] or "") > _App.ADAPTER_TEXT:
        return None
    return key


class _Matched(RequestContext):
    """Flask's request context, its URL matched by Werkzeug once for each domain part, path,
    method and websocket flag (what its match depends on, the rules being fixed once the
    app serves): a match that ends in an error or a redirect is never kept, and the view
    arguments are each request's own copy. At most `MATCHES` kept; then they start over."""

    MATCHES = 256

    def match_request(self) -> None:
        app, adapter, request = self.app, self.url_adapter, self.request
        if not isinstance(app, _App) or adapter is None:
            super().match_request()
            return
        domain = (adapter.subdomain if not adapter.map.host_matching
                  and adapter.subdomain is not None else adapter.server_name)
        key = (domain, adapter.path_info, adapter.default_method.upper(), adapter.websocket)
        kept = app.matches.get(key)
        if kept is not None:
            request.url_rule, request.view_args = kept[0], dict(kept[1])
            return
        super().match_request()
        if request.routing_exception is None and request.url_rule is not None:
            if len(app.matches) >= self.MATCHES:
                app.matches.clear()
            app.matches[key] = (request.url_rule, dict(request.view_args or {}))


class _Sessionless(SecureCookieSessionInterface):
    """Flask's cookie session; without a secret key (the proxy sets none), one null session
    for every request rather than a fresh one each (it holds nothing, and is never saved)."""

    def open_session(self, app: Flask, request: FlaskRequest) -> SecureCookieSession | None:
        if app.secret_key:
            return super().open_session(app, request)
        return self.null

    @cached_property
    def null(self) -> SecureCookieSession:
        return self.null_session_class()


def create_app(config: Config) -> Flask:
    """The WSGI app for `config`: the proxy's own endpoints under /proxy/, the rest relayed."""
    app = _App("toolcall_proxy")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes or None
    proxy = Proxy(config)
    app.extensions["toolcall_proxy"] = proxy
    views = Views(proxy)
    app.get("/proxy/health")(views.health)
    app.get("/proxy/metrics")(views.metrics)
    app.get("/proxy/status")(views.status_page)
    app.get("/proxy/status.json")(views.status_json)
    app.get("/proxy/status/capture/<key>")(views.status_capture)
    app.before_request(views.admit)
    app.after_request(views.allow_origin)
    app.route("/", defaults={"path": ""}, methods=ALL_METHODS)(views.dispatch)
    app.route("/<path:path>", methods=ALL_METHODS, endpoint="dispatch_path")(views.dispatch)
    app.errorhandler(HTTPException)(views.http_error)
    return app
