"""The gevent worker's HTTP/1 response: its head in the same send as the body's first bytes.

gunicorn's `Response` writes the head in a send of its own the moment the body's first
bytes come, then those bytes in another, and (chunked) the terminator in a third at close:
every send is a system call, and on loopback the sender pays the receiver's whole TCP path
and wakes the client each time; gevent's `sendall` adds a `getsockopt` to each. Here the
head goes with the first body bytes, framed as gunicorn frames them, in one send: the same
bytes on the wire, in the same order, at the same moment (gunicorn sends the head only when
the first body write comes, or at close); and each write is one `send` where the socket
takes it whole (`sendall` for what it did not). An empty first write still sends the head
alone at once (a stream's head, before its first event); a response without a body (HEAD,
1xx, 204, 304) and the file path are gunicorn's own; a chunked response closed before any
body write sends its head and terminator together.
"""

from __future__ import annotations

import hashlib
import inspect
import socket
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gunicorn import util
from gunicorn.http import wsgi
from gunicorn.http.wsgi import Response

# Past this size the first body bytes of a sized response are sent after the head, not
# copied behind it: a copy of more costs more than the send it saves.
JOIN_MAX = 64 * 1024

# Header names gunicorn's `process_headers` keeps as they are (a token, not hop-by-hop, not
# Content-Length), found so once each: an app sends the same few. At most NAMES_KEPT.
NAMES_KEPT = 256
_KEPT_NAMES: set[str] = set()
_WSGI: Any = wsgi  # (gunicorn 27's names: the stubs know gunicorn 26)

# The last second a Date value was made for, and that value.
_DATED: list[Any] = [None, ""]


def http_date(now: float) -> str:
    """gunicorn's `util.http_date(now)`, made once a second: the email package formats it in
    some 26 K instructions, and every response has one. The second is the one gunicorn's
    formatting reads (datetime rounds to the microsecond, half to even, so a time half a
    microsecond before the next second is already in it)."""
    whole = int(now)
    second = whole + 1 if round((now - whole) * 1e6) >= 1_000_000 else whole
    if second != _DATED[0]:
        _DATED[:] = second, util.http_date(second)
    date: str = _DATED[1]
    return date


class OneSendResponse(Response):
    """gunicorn's response, its head sent together with the body's first bytes, and each
    write one `send` where the socket takes it whole."""

    def default_headers(self) -> list[str]:
        """gunicorn 27.0.1's `Response.default_headers` (`MADE_FROM`), its Date made once a
        second (`http_date`)."""
        # set the connection header
        if self.upgrade:
            connection = "upgrade"
        elif self.should_close():
            connection = "close"
        else:
            connection = "keep-alive"

        version: Any = self.req.version  # (a request's, set once its line is read)
        headers = [
            "HTTP/%s.%s %s\r\n" % (version[0], version[1], self.status),  # noqa: UP031
            "Server: %s\r\n" % self.version,  # noqa: UP031
            "Date: %s\r\n" % http_date(time.time()),  # noqa: UP031
            "Connection: %s\r\n" % connection  # noqa: UP031
        ]
        if self.chunked:
            headers.append("Transfer-Encoding: chunked\r\n")
        return headers

    def process_headers(self, headers: Any) -> None:
        """gunicorn 27.0.1's `Response.process_headers` (`MADE_FROM`), a name it keeps as it
        is looked at once (its token regex, its case, its hop-by-hop look: some 4 K
        instructions a header); each value still checked and stripped as gunicorn does. Any
        other header (a name not yet seen, hop-by-hop, Content-Length, a name or value not
        a str, a value it refuses) goes through gunicorn's own, alone, in its turn: its
        rules read one header at a time."""
        kept: Any = self.headers
        value_ok = wsgi.HEADER_VALUE_RE.fullmatch
        for name, value in headers:
            if (name.__class__ is str and value.__class__ is str and name in _KEPT_NAMES
                    and value_ok(value)):
                kept.append((name, value.strip(" \t")))
                continue
            if (name.__class__ is str and len(_KEPT_NAMES) < NAMES_KEPT
                    and _WSGI.TOKEN_RE.fullmatch(name)
                    and name.lower() != "content-length" and not util.is_hoppish(name)):
                _KEPT_NAMES.add(name)
            super().process_headers([(name, value)])  # (its refusal, or its own rule)

    def head_bytes(self) -> bytes:
        """The head, as gunicorn's `send_headers` writes it."""
        tosend = self.default_headers()
        tosend.extend(["%s: %s\r\n" % (k, v) for k, v in self.headers])  # noqa: UP031
        return util.to_bytestring("%s\r\n" % "".join(tosend), "latin-1")  # noqa: UP031

    def _send(self, data: bytes) -> None:
        """`sock.sendall(data)`, one `send` first: gevent's `sendall` asks the socket for
        its buffer's size (getsockopt) before every write, a system call a frame; the
        rest, when the socket took part only, by `sendall`. The same errors, raised here."""
        sent = self.sock.send(data)
        if sent < len(data):
            self.sock.sendall(memoryview(data)[sent:])

    def send_headers(self) -> None:
        if self.headers_sent:
            return
        self._send(self.head_bytes())
        self.headers_sent = True

    def _emit_body(self, data: bytes) -> None:
        if self.chunked:
            self._send(b"".join((b"%X\r\n" % len(data), data, b"\r\n")))
        else:
            self._send(data)

    def write(self, arg: Any) -> None:
        if (self.headers_sent or arg.__class__ is not bytes or not arg
                or self._omits_body  # type: ignore[attr-defined]  # (gunicorn 27's; no stub)
                or self.response_length == 0):
            super().write(arg)  # (gunicorn's: the head alone first, if not yet sent)
            return
        if self.response_length is not None and len(arg) > self.response_length:
            arg = arg[:self.response_length]  # (never more than Content-Length)
        head = self.head_bytes()
        self.headers_sent = True  # (a send cut part-way leaves no room for another head)
        self.sent += len(arg)
        if self.chunked:
            self._send(b"".join((head, b"%X\r\n" % len(arg), arg, b"\r\n")))
        elif len(arg) <= JOIN_MAX:
            self._send(head + arg)
        else:
            self._send(head)
            self._send(arg)

    def close(self) -> None:
        if self.chunked:
            if self.headers_sent:
                self._send(b"0\r\n\r\n")
            else:
                head = self.head_bytes()
                self.headers_sent = True
                self._send(head + b"0\r\n\r\n")
            return
        super().close()


if TYPE_CHECKING:  # what it is mixed into: the methods it extends are that worker's
    from gunicorn.workers.ggevent import GeventWorker as _Worker
else:
    _Worker = object


# What `OneSendResponses.handle_request` and `OneSendResponse.default_headers` were made
# from: the sha256 of the source of each gunicorn method they copy (gunicorn 27.0.1).
# Another gunicorn (the requirements allow any 27.x, and each may mend these) is served by
# its own methods, until ours is compared with its and these are moved to it
# (tests/shell/server/test_response_worker.py says so).
MADE_FROM = {
    "AsyncWorker.handle_request":
        "913e17a9542aa70de504548c11064a2bbaef5bccca1a756f722606c4a493a2c0",
    "GeventWorker.handle_request":
        "46750b15c6e4d4b4062b9320a2365f79db2d0113c680560b108f803ecab75869",
    "Response.default_headers":
        "cb490cea5d6f54089293c2adf46190cf3b5fb92335e620bb93710412aa26c6c6",
    "Response.process_headers":
        "496d84a357b028ae5bfbb30fd4d2a6c1403d569255ffaab9a6474075c5ad028e",
}


def copied_sources() -> dict[str, str]:
    """The sha256 of the source of each gunicorn method `OneSendResponses` and its response
    copy, as this gunicorn has them."""
    from gunicorn.workers.base_async import AsyncWorker
    from gunicorn.workers.ggevent import GeventWorker

    methods: dict[str, Any] = {f"{kind.__name__}.handle_request": kind.handle_request
                               for kind in (AsyncWorker, GeventWorker)}
    methods["Response.default_headers"] = Response.default_headers
    methods["Response.process_headers"] = Response.process_headers
    return source_hashes(methods)


def source_hashes(methods: dict[str, Any]) -> dict[str, str]:
    """The sha256 of each method's source, by name: what a copy of gunicorn's methods, or a
    fast path over them, is held to (its `MADE_FROM`)."""
    return {name: hashlib.sha256(inspect.getsource(method).encode()).hexdigest()
            for name, method in methods.items()}


def can_choose() -> bool:
    """Whether this gunicorn's gevent worker is the one `OneSendResponses` copies (its
    `handle_request` and its async worker's, its response's `default_headers` and
    `process_headers`, source for source) and builds a response through `wsgi.create` with
    a class to name (gunicorn 27)."""
    try:
        same = copied_sources() == MADE_FROM
    except (OSError, TypeError, ImportError):  # (no source to read: not known to be it)
        return False
    return same and "response_class" in inspect.signature(wsgi.create).parameters


class OneSendResponses(_Worker):
    """Mixed into gunicorn's gevent worker, last before it: its HTTP/1 requests answered
    through `OneSendResponse`. gunicorn's worker builds its own `Response` and lets no one
    name another (`wsgi.create`'s class serves its HTTP/2): so this is its gevent worker's
    `handle_request` (a killed greenlet ends quietly) over its async worker's, as gunicorn
    27.0 has them (tests/shell/server/test_response_worker.py holds their source to that),
    the response class the one change."""

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> bool:
        import gevent

        try:
            return self._handle_request(listener_name, req, sock, addr)
        except gevent.GreenletExit:
            return False
        except SystemExit:
            return False

    def _handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> bool:
        request_start = datetime.now()
        environ: Any = {}
        resp = None
        try:
            self.cfg.pre_request(self, req)
            resp, environ = wsgi.create(req, sock, addr, listener_name, self.cfg,
                                        response_class=OneSendResponse)
            environ["wsgi.multithread"] = True
            self.nr += 1
            if self.nr >= self.max_requests and self.alive:
                self.log.info("Autorestarting worker after current request.")
                self.alive = False

            if not self.alive or not self.cfg.keepalive:
                resp.force_close()

            # (gunicorn's start_response is not the WSGI protocol's type to mypy)
            respiter = self.wsgi(environ, resp.start_response)  # type: ignore[arg-type]
            if self.is_already_handled(respiter):
                return False
            try:
                if isinstance(respiter, environ["wsgi.file_wrapper"]):
                    resp.write_file(respiter)
                else:
                    for item in respiter:
                        resp.write(item)
                resp.close()
            finally:
                request_time = datetime.now() - request_start
                self.log.access(resp, req, environ, request_time)
                if hasattr(respiter, "close"):
                    respiter.close()
            if resp.should_close():
                raise StopIteration()
        except StopIteration:
            raise
        except OSError:
            # a socket's error is the caller's (handle() may ignore it)
            util.reraise(*sys.exc_info())
        except (Exception, SystemExit):
            if resp and resp.headers_sent:
                # (a timeout's abort is SystemExit: a 500 now would corrupt the response)
                self.log.exception("Error handling request")
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
                except OSError:
                    pass
                raise StopIteration() from None
            raise
        finally:
            try:
                self.cfg.post_request(self, req, environ, resp)
            except Exception:
                self.log.exception("Exception in post_request hook")
        return True
