"""Requests the proxy does not answer itself, relayed: the body upstream as it came (or with
the compat rewrites), the answer back byte for byte as it arrives. Plus `/v1/models` across
several upstreams, so one proxy lists every model it routes to."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from urllib3.exceptions import ReadTimeoutError

from ...base.config import Config
from ...base.errors import ProxyError, client_disconnected, proxy_restarting
from ...base.sse import SseEvents
from ...fronts.chat import DONE, error_event
from ...telemetry.request_log import RequestLog
from ...turn import waiting
from ..runtime.clients import ClientWatcher, Watch, abort_connection, client_gone
from ..runtime.wire import Response, checked_headers
from ..upstream.catalog import model_entries
from ..upstream.client import (
    Timeouts,
    Unreached,
    Upstream,
    UpstreamCall,
    disconnect,
    response_headers,
)
from ..upstream.replicas import RETRY_STATUSES, Placement, Replicas, affinity_key
from .turns import StreamedResponse


@dataclass(frozen=True)
class PassthroughServices:
    """What a relayed request uses of the app, handed over by name: the replicas and their
    clients (by URL), the watcher of clients that leave mid-body, the writer of its log line,
    and whether the server is stopping."""

    replicas: Replicas
    upstreams: Mapping[str, Upstream]
    client_watcher: ClientWatcher
    emit: Callable[[RequestLog], None]
    draining: Callable[[], bool]


def _json_response(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status=status, content_type="application/json")


def _relay_failure(exc: Exception, drained: bool, read_timeout: float) -> ProxyError:
    """Why a relayed stream ended before its end, as the error event that ends it."""
    if drained:
        return proxy_restarting()
    if isinstance(exc, ReadTimeoutError):
        return ProxyError(504, f"The upstream went silent for longer than {read_timeout:g} s.",
                          type_="upstream_error", code="upstream_timeout")
    return ProxyError(502, "The upstream closed the stream before its end.",
                      type_="upstream_error", code="upstream_stream_cut")


def _opened(placement: Placement, method: str, target: str, body: bytes, headers: dict[str, str],
            timeouts: Timeouts, whole: bool = False) -> UpstreamCall[Any]:
    """The relayed request up to its response headers, on the placement's replica (and on
    another, once, when that one is not there or answers 502/503/504: nothing has gone to
    the client yet), started. `whole`: its answer is not asked to stream (the upstream
    client's direct connections take it)."""
    def work(tracker: Any) -> Any:
        return placement.run(lambda upstream: (upstream.open_whole if whole else upstream.open)(
                                 method, target, body, headers, timeouts, tracker),
                         worth_another=_gateway_failure,
                         cancelled=lambda: tracker.cancelled, discard=_discard, hold=True)
    return UpstreamCall(work).start()


def _gateway_failure(outcome: Any) -> bool:
    """A relayed request's outcome that another replica may do better with."""
    if isinstance(outcome, ProxyError):
        return isinstance(outcome, Unreached)
    return outcome.status in RETRY_STATUSES


def _discard(outcome: Any) -> None:
    """A response that will not be relayed: its connection closed."""
    if not isinstance(outcome, ProxyError):
        outcome.close()


def _headers_awaited(state: waiting.Waiting, call: UpstreamCall[Any], environ: dict[str, Any],
                     draining: Callable[[], bool]) -> ProxyError | None:
    """Wait on a relayed request's headers as the waiting machine says (a look at the client
    and the server between waits); None once they are in, else why it ended (the call cut)."""
    def look() -> waiting.Tick:
        return waiting.Tick(time.monotonic(), client_gone(environ), draining())

    state, queue = waiting.step(state, look())
    while queue:
        action = queue.pop(0)
        if isinstance(action, waiting.Wait):
            event: waiting.Event = (waiting.UpstreamDone(time.monotonic())
                                    if call.wait(action.seconds) else look())
            state, more = waiting.step(state, event)
            queue += more
        elif isinstance(action, waiting.Fail):
            call.cancel(action.error if action.error.code == "upstream_timeout" else None)
            return action.error
        elif isinstance(action, waiting.Abandon):
            call.cancel()
            return client_disconnected()
        elif isinstance(action, waiting.Collect):
            return None
    raise AssertionError("the waiting machine ended without an outcome")


def passthrough(services: PassthroughServices, method: str, body: bytes, log: RequestLog,
                target: str, config: Config, headers: dict[str, str], environ: dict[str, Any],
                affinity: str | None = None, whole: bool = False) -> Response:
    """Relay the request; the answer streams back as upstream sends it. `whole`: a request
    that does not ask for a stream (a front's plan says so)."""
    placement = Placement(services.replicas, config, affinity_key(config, headers, affinity), log)
    timeouts = Timeouts(config.connect_timeout_seconds, config.read_timeout_seconds)
    limit = config.connect_timeout_seconds + config.read_timeout_seconds
    # Until the headers come, only a silent client can be noticed: the machine looks for it.
    call = _opened(placement, method, target, body, headers, timeouts, whole)
    ended = _headers_awaited(waiting.start(log.started, limit), call, environ,
                             services.draining)
    if ended is not None:
        placement.done()
        raise ended
    response_in = call.outcome()
    if isinstance(response_in, ProxyError):
        raise response_in
    upstream = services.upstreams[placement.url]
    log.upstream_status = log.status = response_in.status
    log.upstream_ms = round((time.monotonic() - log.started) * 1000, 1)
    is_sse = (response_in.headers.get("Content-Type", "").startswith("text/event-stream")
              and not response_in.headers.get("Content-Encoding"))

    def relayed() -> Iterator[bytes]:
        watch: Watch | None = None
        events = SseEvents() if is_sse else None
        try:
            if is_sse:
                yield b""  # the head goes out now, before upstream's first event
            watch = services.client_watcher.watch(environ, lambda: disconnect(response_in))
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
                failure = _relay_failure(exc, watch is not None and watch.drained,
                                         timeouts.read)
                log.error = failure.code
                yield error_event(failure.body()) + DONE
            else:  # the head promised a body that will not come: the client must see
                abort_connection(environ)  # it cut short, not wait on a kept-alive socket
        finally:
            placement.done(response_in)
            if watch is not None:
                watch.stop()
                if watch.fired:
                    log.error = "client_disconnected"
            services.emit(log)

    response = StreamedResponse(relayed(), status=response_in.status,
                                headers=checked_headers(response_headers(response_in.headers,
                                                                       keep_length=True)))
    if "Content-Type" not in response_in.headers:
        del response.headers["Content-Type"]
    if is_sse:
        response.headers["X-Accel-Buffering"] = "no"
    response.call_on_close(lambda: placement.done(response_in))  # a body never read, too
    return response


def all_models(services: PassthroughServices, config: Config, log: RequestLog, target: str,
               headers_for: Callable[[Config], dict[str, str]]) -> Response:
    """`/v1/models` across every upstream (each asked with its own key), so one proxy lists
    every model it routes to (`model_entries`: one that fails leaves its models out, not the
    others')."""
    models = model_entries(services.upstreams, services.replicas, config, log, target,
                           headers_for)
    log.status = log.upstream_status = 200
    response = _json_response({"object": "list", "data": models})
    log.bytes_out = response.content_length or 0
    return response
