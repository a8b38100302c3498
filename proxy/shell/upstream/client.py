"""The HTTP client side: one urllib3 connection pool to the upstream (and, for the calls
that read a whole answer from a plain-HTTP one, `direct`'s connections), timeouts, and
cancellable buffered calls. Upstream failures become `ProxyError`s.

urllib3 directly, not `requests`: the Session's per-request preparation (URL requoting, hooks,
cookie and environment merging, a 10 KB `iter_content` loop) cost about as much CPU as the
whole HTTP exchange, and the proxy uses none of it.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar
from urllib.parse import unquote

import urllib3
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ReadTimeoutError
from urllib3.util import SKIP_HEADER, make_headers, parse_url

from ...base.errors import ProxyError
from ...base.sse import SseDecoder, SseEventTooLarge
from ...turn.core import UpstreamReply
from ...turn.machine.events import StreamEnd as StreamEnd  # the outcome's types, named
from ...turn.machine.events import Unreached as Unreached  # where the turn reads them
from ...turn.machine.events import UpstreamOutcome
from ..runtime.background import new_event, readable_now, run_beside, watch_silence
from . import head  # noqa: F401 (answers' header blocks read without the email package)
from .chunked import chunk_reader
from .direct import DirectPool, Framing, Relayed, framing
from .hygiene import HOP_BY_HOP as HOP_BY_HOP  # the header hygiene, importable from here
from .hygiene import request_headers as request_headers
from .hygiene import response_headers as response_headers
from .options import NO_RETRIES, pool_timeout
from .options import Timeouts as Timeouts  # still importable from here, as before
from .tracking import ConnectionTracker

T = TypeVar("T")
_ConnectionTracker = ConnectionTracker  # its name before it had a module, used from here


def _ca_bundle() -> str | None:
    """The CA bundle HTTPS upstreams are verified against: certifi's, as `requests` did."""
    try:
        import certifi
    except ImportError:  # the system's default store
        return None
    return certifi.where()


class Upstream:
    """One upstream server, reached through one pool of kept-alive connections."""

    def __init__(self, base: str, pool_size: int = 64) -> None:
        self.base = base.rstrip("/")
        self._local = threading.local()
        parsed = parse_url(self.base)
        if parsed.host is None:  # (the settings' check refuses such a URL before)
            raise ValueError("an upstream base URL must name a host")
        self._prefix = parsed.path or ""  # a base URL may carry a path: /prefix/v1/...
        self._auth: dict[str, str] = {}
        if parsed.auth:  # `user:password@` in the URL, percent-decoded as `requests` did
            user, _, password = parsed.auth.partition(":")
            self._auth = make_headers(basic_auth=f"{unquote(user)}:{unquote(password)}")
        plain, secure = self._tracked_pools()
        options: dict[str, Any] = {"maxsize": pool_size, "block": False, "retries": False}
        if parsed.scheme == "https":
            self.pool: HTTPConnectionPool = secure(
                parsed.host, parsed.port or 443, cert_reqs="CERT_REQUIRED",
                ca_certs=_ca_bundle(), **options)
        else:
            self.pool = plain(parsed.host, parsed.port or 80, **options)
        # The calls that read the whole answer go on http.client's connections straight, for
        # a plain-HTTP upstream (HTTPS, and a host named with its root's dot, stay urllib3's).
        self._direct = (DirectPool(self.pool.host, self.pool.port or 80, pool_size)
                        if parsed.scheme == "http" and not self.pool.host.endswith(".")
                        else None)

    def _tracked_pools(self) -> tuple[type[HTTPConnectionPool], type[HTTPSConnectionPool]]:
        """Connection pools whose connections report themselves to the calling thread's
        tracker when a request starts on them (pooled connections are reused)."""
        local = self._local

        def tracked(base: type) -> type:
            class Connection(base):  # type: ignore[misc]  # a base mypy cannot follow
                def request(self, *args: Any, **kwargs: Any) -> Any:
                    tracker = getattr(local, "tracker", None)
                    if tracker is not None:
                        tracker.attach(self)
                    return super().request(*args, **kwargs)

                def putheader(self, header: str, *values: str) -> None:
                    """http.client's own, straight (urllib3's looks at each value for its
                    SKIP_HEADER first, a generator a header: kept for a value that is it)."""
                    if SKIP_HEADER in values:
                        super().putheader(header, *values)
                    else:
                        http.client.HTTPConnection.putheader(self, header, *values)

                @property
                def is_connected(self) -> bool:
                    """The pool's check before reusing a kept-alive connection (urllib3's
                    own goes through the patched poll under gevent: a hub round trip)."""
                    return self.sock is not None and not readable_now(self.sock)
            return Connection

        class Pool(HTTPConnectionPool):
            ConnectionCls = tracked(HTTPConnectionPool.ConnectionCls)

        class SecurePool(HTTPSConnectionPool):
            ConnectionCls = tracked(HTTPSConnectionPool.ConnectionCls)

        return Pool, SecurePool

    def url(self, path_and_query: str) -> str:
        """The upstream URL for a request path (the path is always relative to the base)."""
        return self.base + path_and_query

    def _failure(self, exc: Exception, timeouts: Timeouts) -> ProxyError:
        host = parse_url(self.base).netloc
        if isinstance(exc, ConnectTimeoutError) and not isinstance(exc, NewConnectionError):
            unreached = Unreached(504, f"The upstream at {host} did not accept a connection "
                                  f"within {timeouts.connect:g} s.",
                                  type_="upstream_error", code="upstream_timeout")
            unreached.connecting = True
            return unreached
        if isinstance(exc, (ReadTimeoutError, socket.timeout)):
            return ProxyError(504, f"The upstream at {host} did not answer within "
                                   f"{timeouts.read:g} s.",
                              type_="upstream_error", code="upstream_timeout")
        # A header value http.client refuses to send is this request's fault, not the
        # upstream's: no other replica would take it either.
        kind = ProxyError if isinstance(exc, ValueError) else Unreached
        failure = kind(502, f"The upstream at {host} could not be reached: "
                            f"{type(exc).__name__}.",
                       type_="upstream_error", code="upstream_unreachable")
        if isinstance(failure, Unreached):
            failure.connecting = isinstance(exc, NewConnectionError)
        return failure

    def _request(self, method: str, path: str, body: bytes | None, headers: dict[str, str],
                 timeouts: Timeouts, *, preload: bool) -> urllib3.BaseHTTPResponse:
        """One request on a pooled connection: no retries, no redirects followed."""
        headers = self._with_auth(headers)
        return self.pool.urlopen(method, self._prefix + path, body=body, headers=headers,
                                 timeout=pool_timeout(timeouts),
                                 retries=NO_RETRIES, redirect=False, assert_same_host=False,
                                 preload_content=preload, decode_content=preload)

    def _with_auth(self, headers: dict[str, str]) -> dict[str, str]:
        """`headers` with the credentials of the upstream URL, which win, as `requests` made
        them."""
        if not self._auth:
            return headers
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        headers.update(self._auth)
        return headers

    def _direct_for(self, headers: dict[str, str],
                    ) -> tuple[DirectPool, dict[str, str], Framing] | None:
        """The direct pool, the headers sent on it and how; None: urllib3's way (an HTTPS
        upstream, or headers the direct path leaves to urllib3)."""
        direct = self._direct
        if direct is None:
            return None
        sent = self._with_auth(headers)
        framed = framing(sent)
        return None if framed is None else (direct, sent, framed)

    def complete(self, path: str, body: bytes, headers: dict[str, str], timeouts: Timeouts,
                 tracker: _ConnectionTracker | None = None, max_bytes: int = 0,
                 ) -> UpstreamReply:
        """POST and read the whole answer, at most `max_bytes` of it (0: no limit);
        ProxyError when the upstream cannot be reached or answers too much."""
        chosen = self._direct_for(headers)
        if chosen is None:
            response = self.open("POST", path, body, headers, timeouts, tracker)
            try:
                return UpstreamReply(response.status, dict(response.headers),
                                     self._read_all(response, max_bytes))
            except _FAILURES as exc:
                raise self._cut(exc, timeouts, tracker) from None
        direct, sent, framed = chosen
        try:
            answer = direct.send("POST", self._prefix + path, body or None, sent, framed,
                                 timeouts, tracker)
        except _FAILURES as exc:
            raise self._unanswered(exc, timeouts, tracker) from None
        try:
            return UpstreamReply(answer.status, answer.headers,
                                 direct.read_all(answer, max_bytes))
        except _FAILURES as exc:
            raise self._cut(exc, timeouts, tracker) from None

    def _unanswered(self, exc: Exception, timeouts: Timeouts,
                    tracker: _ConnectionTracker | None) -> ProxyError:
        """Why a request got no answer: cut by `tracker` (the turn's time, the client gone),
        else the upstream's failure."""
        if tracker is not None and tracker.cancelled:
            return tracker.cancelled_error()
        return self._failure(exc, timeouts)

    def _cut(self, exc: Exception, timeouts: Timeouts,
             tracker: _ConnectionTracker | None) -> ProxyError:
        """Why a buffered answer's body stopped before its end."""
        if (tracker is not None and tracker.cancelled) or isinstance(
                exc, (ReadTimeoutError, socket.timeout)):
            return self._unanswered(exc, timeouts, tracker)
        return ProxyError(502, "The upstream's answer broke off before its end "
                          f"({type(exc).__name__}).", type_="upstream_error",
                          code="upstream_cut")

    @staticmethod
    def _read_all(response: urllib3.BaseHTTPResponse, max_bytes: int) -> bytes:
        """The body, read in pieces that let other requests run between them (an upstream
        that never pauses would otherwise hold the worker), refused past `max_bytes`."""
        pieces = []
        size = 0
        decode = _encoded(response)
        try:
            while data := response.read(_PIECE, decode_content=decode):
                size += len(data)
                if max_bytes and size > max_bytes:
                    raise ProxyError(502, f"The upstream's answer is larger than "
                                     f"max_upstream_body_bytes ({max_bytes} bytes).",
                                     type_="upstream_error", code="upstream_too_large")
                pieces.append(data)
                time.sleep(0)  # a yield to the other greenlets (or threads)
        except BaseException:
            response.close()  # the rest is not wanted: the connection is not reused
            raise
        response.release_conn()
        return b"".join(pieces)

    def complete_get(self, path: str, headers: dict[str, str], timeouts: Timeouts,
                     max_bytes: int) -> UpstreamReply:
        """GET and read the whole answer, at most `max_bytes` of it (0: no limit), for the
        proxy's own look at model lists and health; an endless answer is refused."""
        chosen = self._direct_for(headers)
        try:
            if chosen is not None:
                direct, sent, framed = chosen
                answer = direct.send("GET", self._prefix + path, None, sent, framed, timeouts)
                return UpstreamReply(answer.status, answer.headers,
                                     direct.read_all(answer, max_bytes))
            response = self._request("GET", path, None, headers, timeouts, preload=False)
            return UpstreamReply(response.status, dict(response.headers),
                                 self._read_all(response, max_bytes))
        except _FAILURES as exc:
            raise self._failure(exc, timeouts) from None

    def open(self, method: str, path: str, body: bytes, headers: dict[str, str],
             timeouts: Timeouts, tracker: _ConnectionTracker | None = None,
             ) -> urllib3.BaseHTTPResponse:
        """Send a request and return the response with its body unread, for relaying."""
        self._local.tracker = tracker
        try:
            return self._request(method, path, body or None, headers, timeouts, preload=False)
        except _FAILURES as exc:
            raise self._unanswered(exc, timeouts, tracker) from None
        finally:
            self._local.tracker = None

    def open_whole(self, method: str, path: str, body: bytes, headers: dict[str, str],
                   timeouts: Timeouts, tracker: _ConnectionTracker | None = None) -> Any:
        """`open` for a request whose answer is not asked to stream (a JSON passthrough): on
        the direct pool where it can go, its response read by `relay_body` the same way."""
        chosen = self._direct_for(headers)
        if chosen is None:
            return self.open(method, path, body, headers, timeouts, tracker)
        direct, sent, framed = chosen
        try:
            return Relayed(direct, direct.send(method, self._prefix + path, body or None,
                                               sent, framed, timeouts, tracker))
        except _FAILURES as exc:
            raise self._unanswered(exc, timeouts, tracker) from None

    @staticmethod
    def relay_body(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
        """The raw body bytes as they arrive (no decoding), closing the connection at the end
        or when the client goes away."""
        unwatch = watch_silence(response)
        try:
            while True:
                data = response.read1(65536, decode_content=False)
                if not data:
                    break
                yield data
        finally:
            unwatch()
            response.close()  # a body read to its end has given its connection back already
            response.release_conn()


_PIECE = 256 * 1024


def _encoded(response: urllib3.BaseHTTPResponse) -> bool:
    """Whether the body is content-encoded (gzip, …); one that is not is read as sent:
    urllib3's decoding path queues and copies each piece through a buffer even with no
    decoder to run."""
    return response.headers.get("Content-Encoding", "").strip().lower() not in ("", "identity")

# What a failed exchange raises: urllib3's errors, socket errors, and http.client's refusal
# of a header value it cannot send.
_FAILURES = (urllib3.exceptions.HTTPError, OSError, ValueError)


def disconnect(response: urllib3.BaseHTTPResponse) -> None:
    """Shut the connection a relayed response is read from, from any thread: the read
    returns, and the upstream sees its client leave (vLLM then aborts the generation)."""
    connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
    _ConnectionTracker._shutdown(connection)


class UpstreamCall(Generic[T]):
    """An upstream call running beside the request, which the request can wait on in slices
    (to send heartbeats, to notice the client leaving) and cancel, cutting the connection so
    that the server stops generating."""

    def __init__(self, work: Callable[[_ConnectionTracker], T]) -> None:
        self._tracker = _ConnectionTracker()
        self._work = work
        self._value: T | None = None
        self._error: ProxyError | None = None
        self._done = new_event(one_waiter=True)
        self._ended = False

    @classmethod
    def complete(cls, upstream: Upstream, path: str, body: bytes, headers: dict[str, str],
                 timeouts: Timeouts, max_bytes: int = 0) -> UpstreamCall[UpstreamReply]:
        """A buffered POST, started."""
        return UpstreamCall(lambda t: upstream.complete(path, body, headers, timeouts, t,
                                                        max_bytes)).start()

    @classmethod
    def open(cls, upstream: Upstream, method: str, path: str, body: bytes,
             headers: dict[str, str], timeouts: Timeouts) -> UpstreamCall[Any]:
        """A relayed request up to its response headers, started."""
        return UpstreamCall(lambda t: upstream.open(method, path, body, headers, timeouts,
                                                    t)).start()

    def start(self) -> UpstreamCall[T]:
        """Begin the call in the background (see `run_beside`)."""
        run_beside(self._run, "upstream-call")
        return self

    def _run(self) -> None:
        try:
            self._value = self._work(self._tracker)
        except ProxyError as exc:
            self._error = exc
        except Exception as exc:
            self._error = ProxyError(502, f"Upstream call failed: {type(exc).__name__}.",
                                     type_="upstream_error", code="upstream_error")
        finally:
            self._tracker.detach()
            self._ended = True
            self._done.set()

    def wait(self, timeout: float | None) -> bool:
        """True once the call has finished (within `timeout` seconds)."""
        return self._done.wait(timeout)

    def outcome(self) -> T | ProxyError:
        """The value, or the ProxyError the call ended with (once it has finished)."""
        if self._error is not None:
            return self._error
        return self._value  # type: ignore[return-value]  # set: it ended without error

    def cancel(self, why: ProxyError | None = None) -> None:
        """Cut the upstream connection, so that the server stops generating; `why`: what
        the call then ends with (the turn's time ran out), when it is not the client
        leaving."""
        self._tracker.cancel(why)


def _piece_reader(response: urllib3.BaseHTTPResponse) -> Callable[[int], bytes]:
    """A stream's reads: http.client's for a chunked, unencoded body, whole chunks at once
    (`chunk_reader`; urllib3's add its error catcher and tallies), else urllib3's."""
    raw, decode = getattr(response, "_fp", None), _encoded(response)
    if isinstance(raw, http.client.HTTPResponse) and raw.chunked and not decode:
        return chunk_reader(raw)
    return lambda size: response.read1(size, decode_content=decode)


class UpstreamStream(UpstreamCall[StreamEnd | UpstreamReply]):
    """A streamed upstream POST read beside the request (the streamed mode): the data of each
    SSE event is queued as it arrives, for the request to `take` between its looks at the
    client; `wait` returns as soon as there is some. Ends with `StreamEnd`, with the whole
    reply when upstream did not stream (an error status, or a server that answered with
    JSON), or with a ProxyError."""

    def __init__(self, via: Upstream | Callable[..., StreamEnd | UpstreamReply], path: str,
                 body: bytes, headers: dict[str, str], timeouts: Timeouts,
                 max_bytes: int = 0) -> None:
        super().__init__(self._read)
        # One upstream, or a replica placement's `run` (another replica once, when the first is
        # not there before the stream's first event).
        self._via = via
        self._request = (path, body, headers)
        self._timeouts = timeouts
        self._max_bytes = max_bytes
        self._events: deque[bytes] = deque()
        self._begun = False  # an event has been queued: the stream is never asked again

    def _read(self, tracker: _ConnectionTracker) -> StreamEnd | UpstreamReply:
        via = self._via
        if isinstance(via, Upstream):
            return self._read_from(via, tracker)
        return via(lambda upstream: self._read_from(upstream, tracker), self._not_begun,
                   lambda: tracker.cancelled)

    def _not_begun(self, outcome: UpstreamOutcome) -> bool:
        """An outcome another replica may do better with: nothing was streamed yet."""
        if self._begun:
            return False
        if isinstance(outcome, ProxyError):
            return isinstance(outcome, Unreached) or outcome.code == "upstream_stream_cut"
        return isinstance(outcome, UpstreamReply) and outcome.status in (502, 503, 504)

    def _read_from(self, upstream: Upstream, tracker: _ConnectionTracker,
                   ) -> StreamEnd | UpstreamReply:
        path, body, headers = self._request
        timeouts = self._timeouts
        response = upstream.open("POST", path, body, headers, timeouts, tracker)
        kind = response.headers.get("Content-Type", "")
        if response.status != 200 or not kind.startswith("text/event-stream"):
            try:
                data = upstream._read_all(response, self._max_bytes)
            except _FAILURES as exc:
                raise self._broken(exc) from None
            return UpstreamReply(response.status, dict(response.headers), data)
        # One event may not outgrow the answer's limit either: refused as soon as it does,
        # not once it has all been read.
        decoder = SseDecoder(max_event=self._max_bytes)
        size = 0
        read = _piece_reader(response)
        unwatch = watch_silence(response)
        try:
            while data := read(_PIECE):
                size += len(data)
                try:
                    events = decoder.feed(data)
                except SseEventTooLarge:
                    raise self._too_large("One event of the upstream's stream") from None
                if self._max_bytes and size > self._max_bytes:
                    raise self._too_large("The upstream's answer")
                if events:
                    self._begun = True
                    self._events.extend(events)
                    self._done.set()
        except (*_FAILURES, http.client.HTTPException) as exc:
            response.close()
            raise self._broken(exc) from None
        except BaseException:
            response.close()
            raise
        finally:
            unwatch()
        response.release_conn()
        return StreamEnd(cut=bool(decoder.pending.strip()))

    def _too_large(self, what: str) -> ProxyError:
        """`what` has grown past max_upstream_body_bytes."""
        return ProxyError(502, f"{what} is larger than max_upstream_body_bytes "
                          f"({self._max_bytes} bytes).", type_="upstream_error",
                          code="upstream_too_large")

    def _broken(self, exc: Exception) -> ProxyError:
        """Why the stream stopped before its end."""
        if self._tracker.cancelled:
            return self._tracker.cancelled_error()
        if isinstance(exc, (ReadTimeoutError, socket.timeout)):
            return ProxyError(504, "The upstream went silent for longer than "
                                   f"{self._timeouts.read:g} s.",
                              type_="upstream_error", code="upstream_timeout")
        return ProxyError(502, "The upstream's stream broke off before its end "
                          f"({type(exc).__name__}).", type_="upstream_error",
                          code="upstream_stream_cut")

    def take(self) -> list[bytes]:
        """The data of the events that arrived since the last take, in order."""
        self._done.clear()
        events = self._events
        taken = list(events)
        events.clear()
        if self._ended:
            self._done.set()  # the end stays seen
        return taken

    @property
    def finished(self) -> bool:
        """The call has ended and every event has been taken."""
        return self._ended and not self._events
