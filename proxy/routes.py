"""The Flask shell: parse the request, call the core, write the response."""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

import orjson
from flask import Flask, Response, request
from urllib3.exceptions import ReadTimeoutError
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from . import __version__
from .clients import CHECK_SECONDS, ClientWatcher, Watch, abort_connection, client_gone
from .compat import keep_first_call
from .config import Config, mask_url
from .errors import (
    ProxyError,
    answer_empty,
    answer_not_completion,
    answer_not_json,
    from_upstream,
)
from .metrics import Metrics
from .normalize import EmptyAnswerError, UpstreamShapeError, normalize_completion
from .observe import RequestLog, make_logger
from .plan import Plan, plan_chat
from .sse import (
    DONE,
    SseEvents,
    StreamIdentity,
    completion_chunks,
    error_event,
    heartbeat,
    role_chunks,
)
from .upstream import (
    Timeouts,
    Upstream,
    UpstreamCall,
    UpstreamReply,
    cut,
    request_headers,
    response_headers,
)

ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")
_REQUEST_ID = "toolcall_proxy.request_id"
_NOT_JSON = object()


def _restarting() -> ProxyError:
    """The error for a request the stopping server ends: retryable, as OpenAI's 503s are."""
    return ProxyError(503, "The proxy is restarting; send the request again.",
                      type_="server_error", code="proxy_restarting", headers={"Retry-After": "1"})
CHAT_PATH = "/v1/chat/completions"
SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


def _json_response(payload: Any, status: int = 200,
                   headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(payload), status=status, headers=headers,
                    content_type="application/json")


def _error_response(error: ProxyError, log: RequestLog | None = None) -> Response:
    response = _json_response(error.body(), error.status, error.headers)
    if log is not None:
        log.status = error.status
        log.error = (error.code or error.type)[:64]  # upstream's own code may be anything
        log.bytes_out = response.content_length or 0
    return response


class Proxy:
    """The app's objects: settings, upstream client and logger, and the request handlers."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.upstreams = {url: Upstream(url) for url in config.upstreams()}
        self.logger = make_logger(config.log_level)
        self.metrics = Metrics()
        self.client_watcher = ClientWatcher(self._draining)
        self._keys = [key.encode() for key in config.api_keys]
        # Set when the server stops (gunicorn's graceful shutdown or reload): requests still
        # waiting on upstream then are ended, retryably, before the server would cut them.
        self.drain_at: float | None = None

    def drain(self, seconds: float) -> None:
        """The server is stopping: what still waits on upstream in `seconds` is ended with a
        503 (in the stream, for one that has started), never cut mid-stream without [DONE]."""
        self.drain_at = time.monotonic() + max(0.0, seconds)

    def _draining(self) -> bool:
        return self.drain_at is not None and time.monotonic() >= self.drain_at

    # -- helpers -------------------------------------------------------------------------

    def _finish(self, plan: Plan, reply: UpstreamReply, log: RequestLog) -> dict[str, Any]:
        """The upstream's reply as the client's normalised completion, or ProxyError."""
        log.upstream_status = reply.status
        try:
            body: Any = orjson.loads(reply.body)
        except orjson.JSONDecodeError:
            body = _NOT_JSON
        if log.bodies is not None:  # log_bodies: a replayable capture, whatever came back
            log.bodies["response"] = body if body is not _NOT_JSON else reply.body.decode(
                "utf-8", "replace")
        if reply.status >= 400:
            raise from_upstream(reply.status, reply.body, reply.headers)
        if body is _NOT_JSON:
            raise answer_not_json()
        assert plan.extraction is not None
        try:
            completion, outcome = normalize_completion(body, plan.extraction)
        except EmptyAnswerError as exc:
            log.outcome = exc.outcome
            raise answer_empty(str(exc)) from None
        except UpstreamShapeError as exc:
            raise answer_not_completion(exc) from None
        log.outcome = outcome
        if log.bodies is not None:  # what was sent, beside the capture (see above)
            log.bodies["sent"] = completion
        if not plan.parallel_tool_calls and keep_first_call(completion, outcome):
            log.notes.append("parallel_tool_calls_false:kept_first_call")
        if plan.tool_call_required and not outcome.tool_calls:
            log.notes.append("tool_call_required_but_none_found")
            raise RequiredCallMissing(
                502, "tool_choice asked for a tool call and the model answered without one"
                + (f" (asked {plan.config.required_call_retries + 1} times)."
                   if plan.config.required_call_retries else "."),
                type_="upstream_error", code="tool_call_required_unmet")
        return completion

    def emit(self, log: RequestLog) -> None:
        """Write the request's log line and count it (once per request)."""
        if log.emitted:
            return
        log.emit(self.logger, self.config.log_format)
        self.metrics.finished(log, time.monotonic() - log.started)

    def authorize(self, method: str, headers: Any) -> None:
        """With `api_keys` set, the request must carry one of them (compared in constant
        time, every key tried): `Authorization: Bearer KEY` or `api-key`/`x-api-key`. A CORS
        preflight carries no key (browsers never send one) and is let through, as vLLM does."""
        if not self._keys:
            return
        if method == "OPTIONS" and "Access-Control-Request-Method" in headers:
            return
        offered = headers.get("Authorization", "")
        offered = offered[7:] if offered[:7].lower() == "bearer " else ""
        offered = offered or headers.get("X-Api-Key", "") or headers.get("Api-Key", "")
        candidate = offered.strip().encode()
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(candidate, key)
        if not matched:
            raise ProxyError(401, "Incorrect or missing API key for this proxy.",
                             type_="invalid_request_error", code="invalid_api_key",
                             headers={"WWW-Authenticate": "Bearer"})

    def upstream_headers(self, config: Config, *, buffered: bool) -> dict[str, str]:
        """The client's headers as sent upstream: its credentials replaced by the configured
        upstream key if any, and dropped when they were the proxy's own key (`api_keys`:
        that key is for the proxy, never for vLLM); the request id always, so that vLLM's
        logs and the proxy's line can be matched."""
        headers = request_headers(request.headers.items(), buffered=buffered)
        if config.upstream_api_key or self._keys:
            for name in [n for n in headers if n.lower() in _CREDENTIAL_HEADERS]:
                del headers[name]
        if config.upstream_api_key:
            headers["Authorization"] = f"Bearer {config.upstream_api_key}"
        request_id = request.environ.get(_REQUEST_ID)
        if request_id:
            headers = {k: v for k, v in headers.items() if k.lower() != "x-request-id"}
            headers["X-Request-Id"] = request_id
        return headers

    # -- routes --------------------------------------------------------------------------

    def health(self, check_upstream: bool) -> Response:
        """The proxy's status, version and settings (no secrets); with `check_upstream`, each
        upstream's reachability and models too (503 when one is down)."""
        body: dict[str, Any] = {"status": "ok", "version": __version__,
                                "upstream": mask_url(self.config.upstream),
                                "config": self.config.summary()}
        if not check_upstream:
            return _json_response(body)
        reports = []
        for url, settings in self.config.upstream_settings().items():
            started = time.monotonic()
            report: dict[str, Any] = {"url": mask_url(url), "reachable": False, "ok": False}
            timeouts = Timeouts(settings.connect_timeout_seconds,
                                min(settings.read_timeout_seconds, 10.0))
            headers = self.upstream_headers(settings, buffered=True)
            try:
                reply = self.upstreams[url].complete_get("/v1/models", headers, timeouts)
                report.update(status=reply.status, reachable=True)
                report["models"] = _model_ids(reply)
                # Reachable but refusing (a wrong key, a base URL ending in /v1): not healthy.
                report["ok"] = reply.status == 200 and report["models"] is not None
            except ProxyError as exc:
                report["error"] = exc.message
            report["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
            reports.append(report)
        body["upstreams"] = reports
        if not all(r["ok"] for r in reports):
            body["status"] = "degraded"
            return _json_response(body, 503)
        return _json_response(body)

    def handle(self, log: RequestLog, target: str) -> Response:
        """Any request: chat completions are planned, everything else is relayed."""
        raw = _request_body(self.config.max_body_bytes)
        config = self.config
        if request.method == "POST" and request.path.rstrip("/") == CHAT_PATH:
            plan = plan_chat(raw, self.config)
            log.mode, log.model, log.client_stream = plan.mode, plan.model, plan.client_stream
            log.rewrites = list(plan.rewrites)
            if plan.mode == "buffered":
                log.tools = frozenset(plan.extraction.tools if plan.extraction else ())
                if plan.config.log_bodies:
                    log.bodies = {"request": orjson.loads(raw)}
                return self._buffered(plan, log, target)
            raw, config = plan.upstream_body, plan.config
        elif len(self.upstreams) > 1:
            if request.method == "GET" and request.path.rstrip("/") == "/v1/models":
                return self._all_models(log, target)
            config = self.config.for_model(_model_of(raw))
        return self._passthrough(raw, log, target, config)

    def _passthrough(self, body: bytes, log: RequestLog, target: str,
                     config: Config) -> Response:
        headers = self.upstream_headers(config, buffered=False)
        upstream = self.upstreams[config.upstream]
        timeouts = Timeouts(config.connect_timeout_seconds, config.read_timeout_seconds)
        call = UpstreamCall.open(upstream, request.method, target, body, headers, timeouts)
        # Until the headers come, only a silent client can be noticed: poll for it.
        self._wait_quietly(call, log, config.connect_timeout_seconds + config.read_timeout_seconds)
        response_in = call.result()
        log.upstream_status = log.status = response_in.status
        log.upstream_ms = round((time.monotonic() - log.started) * 1000, 1)

        is_sse = (response_in.headers.get("Content-Type", "").startswith("text/event-stream")
                  and not response_in.headers.get("Content-Encoding"))
        environ = request.environ
        watch: Watch | None = None

        def relay() -> Iterator[bytes]:
            nonlocal watch
            events = SseEvents() if is_sse else None
            try:
                if is_sse:
                    yield b""  # the head goes out now, before upstream's first event
                watch = self.client_watcher.watch(environ, lambda: cut(response_in))
                for data in upstream.relay_body(response_in):
                    if events is not None:
                        data = events.complete(data)
                    log.bytes_out += len(data)
                    yield data
                if watch.drained:  # cut by the server stopping: an end, not the end
                    raise ConnectionAbortedError("the proxy is restarting")
                if events is not None and events.pending:
                    yield events.pending  # upstream ended without a last blank line: as is
            except GeneratorExit:
                log.error = "client_disconnected"
                raise
            except Exception as exc:
                if watch is not None and watch.fired:
                    log.error = "client_disconnected"
                    return
                log.error = f"relay_interrupted:{type(exc).__name__}"
                if is_sse:  # the stream has started: end it with the error, in-band; a half
                    # event is dropped, so that the client can parse what it has
                    failure = (_restarting() if watch is not None and watch.drained else
                               ProxyError(504, "The upstream went silent for longer than "
                                          f"{timeouts.read:g} s.", type_="upstream_error",
                                          code="upstream_timeout")
                               if isinstance(exc, ReadTimeoutError) else
                               ProxyError(502, "The upstream closed the stream before its end.",
                                          type_="upstream_error", code="upstream_stream_cut"))
                    log.error = failure.code
                    yield error_event(failure.body()) + DONE
                else:  # the head promised a body that will not come: the client must see
                    abort_connection(environ)  # it cut short, not wait on a kept-alive socket
            finally:
                if watch is not None:
                    watch.stop()
                    if watch.fired:
                        log.error = "client_disconnected"
                self.emit(log)

        response = Response(relay(), status=response_in.status,
                            headers=response_headers(response_in.headers, keep_length=True))
        if "Content-Type" not in response_in.headers:
            del response.headers["Content-Type"]
        if is_sse:
            response.headers["X-Accel-Buffering"] = "no"
        return response

    def _all_models(self, log: RequestLog, target: str) -> Response:
        """`/v1/models` across every upstream (each asked with its own key), so one proxy
        fronts several servers; one that fails leaves its models out, not the others'."""
        models: list[Any] = []
        seen: set[str] = set()
        failures: list[ProxyError] = []
        for url, settings in self.config.upstream_settings().items():
            timeouts = Timeouts(settings.connect_timeout_seconds, settings.read_timeout_seconds)
            try:
                reply = self.upstreams[url].complete_get(
                    target, self.upstream_headers(settings, buffered=True), timeouts)
                if reply.status >= 400:
                    raise from_upstream(reply.status, reply.body, reply.headers)
                ids = _model_ids(reply)
                if ids is None:
                    raise ProxyError(502, f"{mask_url(url)}/v1/models is not a model list.",
                                     type_="upstream_error", code="upstream_bad_shape")
            except ProxyError as exc:
                failures.append(exc)
                log.notes.append(f"models_unavailable:{exc.code or exc.status}")
                continue
            for model in orjson.loads(reply.body)["data"]:
                if isinstance(model, dict) and model.get("id") not in seen:
                    seen.add(model.get("id"))
                    models.append(model)
        if failures and not models:
            raise failures[0]
        log.status = log.upstream_status = 200
        response = _json_response({"object": "list", "data": models})
        log.bytes_out = response.content_length or 0
        return response

    def _buffered(self, plan: Plan, log: RequestLog, target: str) -> Response:
        config = plan.config
        headers = self.upstream_headers(config, buffered=True)
        timeouts = Timeouts(config.connect_timeout_seconds, config.buffered_timeout_seconds)
        upstream = self.upstreams[config.upstream]
        turn = Turn(lambda: UpstreamCall.complete(upstream, target, plan.upstream_body, headers,
                                                  timeouts, config.max_upstream_body_bytes),
                    config.required_call_retries if plan.tool_call_required else 0)
        while True:
            if plan.client_stream:
                if not turn.call.wait(config.commit_window_seconds):
                    return self._stream(plan, log, turn)
            else:
                self._wait_quietly(turn.call, log, config.buffered_timeout_seconds)
            log.upstream_ms = round((time.monotonic() - log.started) * 1000, 1)
            try:
                completion = self._finish(plan, turn.call.result(), log)
                break
            except RequiredCallMissing:
                if not turn.retry(log):
                    raise
        log.status = 200
        if not plan.client_stream:
            body = orjson.dumps(completion)
            log.bytes_out = len(body)
            return Response(body, status=200, content_type="application/json")
        return self._stream(plan, log, completion=completion)

    def _wait_quietly(self, call: UpstreamCall[UpstreamReply], log: RequestLog,
                      limit: float) -> None:
        """Wait for a non-streaming client's answer, cutting the upstream call when the
        client leaves, the limit passes or the server stops."""
        deadline = log.started + limit
        while not call.wait(max(0.0, min(deadline - time.monotonic(), CHECK_SECONDS))):
            if time.monotonic() >= deadline:
                call.cancel()
                raise ProxyError(504, f"The upstream did not answer within {limit:g} s.",
                                 type_="upstream_error", code="upstream_timeout")
            if client_gone(request.environ):
                call.cancel()
                raise ProxyError(499, "The client went away.", code="client_disconnected")
            if self._draining():
                call.cancel()
                raise _restarting()

    def _stream(self, plan: Plan, log: RequestLog, turn: Turn | None = None,
                completion: dict[str, Any] | None = None) -> Response:
        """The SSE response: role chunk at once, heartbeats while the turn's upstream call
        runs, then the completion; an error after the start is reported in the stream, which
        still ends."""
        ident = StreamIdentity.new(plan.model)
        config = plan.config
        environ = request.environ
        log.status = 200

        def frames() -> Iterator[bytes]:
            # Bytes not written yet: once upstream has answered, the rest of the stream goes
            # out in one write (one chunk, one send), not one per SSE event.
            pending = role_chunks(ident)
            finished = False
            try:
                result = completion
                if result is None:
                    assert turn is not None
                    yield pending
                    pending = b""
                    deadline = log.started + config.buffered_timeout_seconds
                    beat = config.heartbeat_seconds or None
                    next_beat = time.monotonic() + (beat or 0)
                    while result is None:
                        now = time.monotonic()
                        wake = min(deadline, now + CHECK_SECONDS,
                                   next_beat if beat else deadline)
                        if turn.call.wait(max(0.0, wake - now)):
                            log.upstream_ms = round((time.monotonic() - log.started) * 1000, 1)
                            try:
                                result = self._finish(plan, turn.call.result(), log)
                            except RequiredCallMissing:
                                if not turn.retry(log):
                                    raise
                            continue
                        now = time.monotonic()
                        if now >= deadline:
                            turn.call.cancel()
                            raise ProxyError(
                                504, f"The upstream did not answer within "
                                f"{config.buffered_timeout_seconds:g} s.",
                                type_="upstream_error", code="upstream_timeout")
                        if client_gone(environ):
                            return  # `finally` cuts the upstream call
                        if self._draining():
                            turn.call.cancel()
                            raise _restarting()
                        if beat and now >= next_beat:
                            next_beat = now + beat
                            log.heartbeats += 1
                            yield heartbeat(ident, config.heartbeat_mode)
                yield b"".join([pending, *completion_chunks(ident, result, plan.include_usage)])
                finished = True
            except ProxyError as exc:
                log.error = exc.code or exc.type
                yield pending + error_event(exc.body()) + DONE
                finished = True
            except Exception:
                self.logger.exception("buffered stream failed (request %s)", log.request_id)
                log.error = "internal_error"
                yield pending + error_event(ProxyError(
                    500, "The proxy failed to render this answer.",
                    code="internal_error").body()) + DONE
                finished = True
            finally:
                if turn is not None and not finished:
                    turn.call.cancel()
                    log.error = log.error or "client_disconnected"

        def counted() -> Iterator[bytes]:
            inner = frames()
            try:
                for data in inner:
                    log.bytes_out += len(data)
                    yield data
            finally:
                inner.close()  # cuts the upstream call if the client left
                self.emit(log)

        return Response(counted(), status=200, headers=SSE_HEADERS)


def _model_ids(reply: UpstreamReply) -> list[Any] | None:
    """The model ids of a `/v1/models` answer, or None when it is not a model list."""
    if reply.status != 200:
        return None
    try:
        data = orjson.loads(reply.body).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [model.get("id") for model in data if isinstance(model, dict)]


def _request_body(max_bytes: int) -> bytes:
    """The request body. A body without Content-Length (chunked) is read to its end and
    refused past `max_bytes`; Werkzeug's own limit would cut it there silently."""
    environ = request.environ
    if request.content_length is not None or "wsgi.input_terminated" not in environ:
        return request.get_data(cache=False)  # Content-Length is checked against the limit
    stream = environ["wsgi.input"]
    pieces = []
    size = 0
    while data := stream.read(65536):
        size += len(data)
        if max_bytes and size > max_bytes:
            raise RequestEntityTooLarge()
        pieces.append(data)
    return b"".join(pieces)


def _model_of(raw: bytes) -> str:
    """The `model` of a JSON request body, or "" (routing by model only)."""
    if not raw.lstrip().startswith(b"{"):
        return ""
    try:
        model = orjson.loads(raw).get("model")
    except orjson.JSONDecodeError:
        return ""
    return model if isinstance(model, str) else ""


class RequiredCallMissing(ProxyError):
    """tool_choice required a call (`required`, or a named function) and none came."""


class Turn:
    """The upstream calls of one buffered tool turn: the first, and the ones a required call
    that did not come earns (`required_call_retries`): a model that may not call (vLLM without
    a tool parser cannot force it) is asked again rather than the client's contract broken."""

    def __init__(self, start: Callable[[], UpstreamCall[UpstreamReply]], retries: int) -> None:
        self._start = start
        self.retries_left = retries
        self.call = start()

    def retry(self, log: RequestLog) -> bool:
        """Ask upstream again, if a retry is left."""
        if self.retries_left <= 0:
            return False
        self.retries_left -= 1
        log.notes.append("tool_call_required:asked_again")
        self.call = self._start()
        return True


def _target(environ: dict[str, Any]) -> str:
    """The request's path and query as the client wrote them (still percent-encoded)."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if not raw:
        query = environ.get("QUERY_STRING", "")
        raw = request.path + (f"?{query}" if query else "")
    return raw


def _plain_path(target: str) -> bool:
    """An origin-form path (one leading slash) without dot segments, backslashes or control
    characters, encoded or not: the upstream is fixed, and what reaches it is a plain path."""
    path = unquote(target.split("?", 1)[0])
    segments = path.split("/")
    return (target.startswith("/") and not target.startswith("//")
            and not any(s in (".", "..") for s in segments)
            and "\\" not in path and not any(ord(char) < 32 or ord(char) == 127 for char in path))


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

    def own_endpoint(render: Callable[[], Response]) -> Response:
        try:
            if config.protect_proxy_endpoints:
                proxy.authorize(request.method, request.headers)
            return render()
        except ProxyError as error:
            return _error_response(error)

    @app.get("/proxy/health")
    def health() -> Response:
        check = request.args.get("upstream", "") not in ("", "0", "false")
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

    def finished(response: Response, log: RequestLog) -> Response:
        response.headers["X-Request-Id"] = log.request_id
        # Streams log at their end; this covers the rest, and a stream the client left
        # before it began (WSGI servers always close the response).
        response.call_on_close(lambda: proxy.emit(log))
        return response

    @app.route("/", defaults={"path": ""}, methods=ALL_METHODS)
    @app.route("/<path:path>", methods=ALL_METHODS)
    def relay(path: str) -> Response:
        log = started()
        request_id = log.request_id
        target = _target(request.environ)
        try:
            proxy.authorize(request.method, request.headers)
            if not _plain_path(target):
                raise ProxyError(400, "The request path must be a plain absolute path.",
                                 param="path", code="invalid_path")
            response = proxy.handle(log, target)
        except ProxyError as error:
            response = _error_response(error, log)
        except HTTPException as exc:
            response = _error_response(_http_error(exc, config), log)
        except Exception:
            proxy.logger.exception("request %s failed", request_id)
            response = _error_response(
                ProxyError(500, "The proxy failed to handle this request.",
                           code="internal_error"), log)
        return finished(response, log)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        """Refusals before any route ran (a method no route takes, a path the router cannot
        match): the same envelope, id and log line as every other request."""
        log = started()
        return finished(_error_response(_http_error(exc, config), log), log)

    return app
