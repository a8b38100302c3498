"""The buffered calls' own connections: a small pool of kept-alive http.client connections to
one plain-HTTP upstream, for the calls that read the whole answer (a tool turn, a JSON
exchange, the proxy's own looks at model lists and health).

urllib3's layers over http.client (its pool queue and Timeout clones, the response wrapper,
its error catcher around every read) cost about as much as the exchange itself. This sends
the bytes urllib3 sends (its request line, framing and default headers, in its order) and
fails with the exceptions urllib3 raises, in the same cases, so the client maps them to the
same errors: refused and unresolved hosts `NewConnectionError`, a connect timeout
`ConnectTimeoutError`, a silent upstream `ReadTimeoutError`, a reset or a cut `ProtocolError`,
a header value http.client refuses its `ValueError`. No retry: a kept-alive connection found
closed (or with bytes waiting) before its reuse is replaced, as urllib3's pool does; one that
fails afterwards fails the request. A connection goes back to the pool only once its answer
was read to the end and did not close it (`Connection: close`, HTTP/1.0).
"""

from __future__ import annotations

import errno
import functools
import http.client
import re
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.connection import _get_default_user_agent
from urllib3.exceptions import (
    ConnectTimeoutError,
    IncompleteRead,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)
from urllib3.util import SKIP_HEADER
from urllib3.util.connection import create_connection
from urllib3.util.url import _encode_target

from ...base.errors import ProxyError
from ..runtime.background import readable_now
from .head import encoded, expected_length, joined
from .options import Timeouts
from .tracking import ConnectionTracker

PIECE = 256 * 1024  # read at a time, other requests running between pieces
# urllib3's own: its User-Agent, Nagle off, a bodiless method's missing Content-Length.
USER_AGENT = _get_default_user_agent()
_SOCKET_OPTIONS: list[tuple[int, int, int | bytes]] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
_NO_BODY_EXPECTED = frozenset({"GET", "HEAD", "DELETE", "TRACE", "OPTIONS", "CONNECT"})
# Request headers this path leaves to urllib3 (framing and Host set by the caller).
_LEFT_TO_URLLIB3 = frozenset({"host", "content-length", "transfer-encoding"})


@dataclass(frozen=True)
class Framing:
    """What a request's own headers change in what is sent besides them."""

    skip_accept_encoding: bool  # it names its own Accept-Encoding (http.client's: identity)
    user_agent: bool  # it names its own User-Agent (urllib3's otherwise)


_FRAMINGS = {(a, u): Framing(a, u) for a in (False, True) for u in (False, True)}


def framing(headers: Mapping[str, str]) -> Framing | None:
    """How `headers` are sent on this path; None for those it leaves to urllib3: a Host or
    framing header of the caller's, or urllib3's SKIP_HEADER marker as a value."""
    accept_encoding = user_agent = False
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in _LEFT_TO_URLLIB3 or value == SKIP_HEADER:
            return None
        if lowered == "accept-encoding":
            accept_encoding = True
        elif lowered == "user-agent":
            user_agent = True
    return _FRAMINGS[accept_encoding, user_agent]


# http.client's `_is_legal_header_name`, for a name known to be ASCII
_LEGAL_NAME = re.compile(r"[^:\s][^:\r\n]*", re.ASCII)
_NAMES_KEPT = 512
_legal_names: set[str] = set()  # names found legal (a bounded set: clients choose them)


def _legal_name(name: str) -> bool:
    """Whether http.client's `putheader` takes `name` (ASCII, of a legal name's form)."""
    if name in _legal_names:
        return True
    if not (name.isascii() and _LEGAL_NAME.fullmatch(name)):
        return False
    if len(_legal_names) < _NAMES_KEPT:
        _legal_names.add(name)
    return True


def header_block(first: Iterable[tuple[str, str]], headers: Mapping[str, str],
                 ) -> bytes | None:
    """The header lines `first`, then `headers`, as http.client's `putheader` writes them one
    at a time (`Name: value`, the name ASCII, the value latin-1), in one piece of its
    buffer (whose pieces it joins with CRLF); None when one would not be written so: a
    name or value it refuses (a value with a CR or LF that does not continue the line),
    or writes its own way (a continued line, a value not a string), or that latin-1
    cannot encode. `putheader` then writes them, or raises its own error."""
    lines = []
    legal = _legal_names
    for name, value in (*first, *headers.items()):
        if type(name) is not str or type(value) is not str or (
                name not in legal and not _legal_name(name)):
            return None
        lines.append(f"{name}: {value}")
    text = "\r\n".join(lines)
    joints = max(len(lines) - 1, 0)  # no name or value holds a CR or LF of its own
    if text.count("\r") != joints or text.count("\n") != joints:
        return None
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return None


@functools.lru_cache(maxsize=64)
def standard_lines(host: str, port: int) -> tuple[bytes, bytes]:
    """What http.client's `putrequest` writes after the request line for a path on a
    connection to `host` and `port`: its Host line; and that line and its Accept-Encoding
    line, in one piece (as `_send_output` joins them). Written by a `putrequest` of its own,
    once per upstream."""
    probe = http.client.HTTPConnection(host, port)
    probe.putrequest("GET", "/")
    host_line, accept_encoding = probe._buffer[1:]  # type: ignore[attr-defined]  # (private)
    return host_line, host_line + b"\r\n" + accept_encoding


@functools.lru_cache(maxsize=256)
def request_target(url: str) -> str:
    """The request target as urllib3 sends it: characters a path or query may not hold
    percent-encoded, a fragment dropped (LocationParseError, a ValueError, for no target)."""
    return str(_encode_target(url))


class Connection(http.client.HTTPConnection):
    """http.client's connection, connecting as urllib3 does (every address tried, Nagle off)
    and failing as it does."""

    def connect(self) -> None:
        try:
            self.sock = create_connection((self.host, self.port), self.timeout,
                                          socket_options=_SOCKET_OPTIONS)
        except socket.gaierror as exc:
            # (urllib3 types its own connection class here; only the message is read)
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[arg-type]  # see above
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out. "
                                            f"(connect timeout={self.timeout})") from exc
        except OSError as exc:
            raise NewConnectionError(self,  # type: ignore[arg-type]  # (as above)
                                     f"Failed to establish a new connection: {exc}") from exc

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        """The request's head and its body (bytes) in one write, where http.client (and
        urllib3) make two: the same bytes, one segment, one trip through the hub. On a
        connection in use already, one `send` (its last answer read whole, nothing of ours
        waits in its send buffer: the kernel takes a request of some KB at once), the rest,
        if any, `sendall`'s; http.client's `send` (it connects a fresh connection first)
        goes through gevent's `sendall`, five Python calls and a getsockopt(2) a write."""
        buffer = self._buffer  # type: ignore[attr-defined]  # http.client's, private
        buffer.extend((b"", b""))
        head = b"\r\n".join(buffer)
        del buffer[:]
        data = head + message_body if message_body else head
        sock = self.sock
        if sock is None or self.debuglevel > 0:
            self.send(data)
            return
        sys.audit("http.client.send", self, data)  # (as http.client's `send`)
        sent = sock.send(data)
        if sent < len(data):
            sock.sendall(memoryview(data)[sent:])


@dataclass
class Answer:
    """An answer's head, its body still to read, and the connection it came on."""

    status: int
    headers: dict[str, str]  # as urllib3 hands them on
    by_lowered: dict[str, str]
    lines: list[tuple[str, str]]  # each header line, as read
    raw: http.client.HTTPResponse
    connection: Connection
    length: int | None  # the body's bytes still expected (urllib3's length_remaining)
    method: str
    target: str


def read_timeout(target: str | None, message: str) -> ReadTimeoutError:
    """urllib3's error for a read that ran out of time (no pool of urllib3's to name)."""
    return ReadTimeoutError(None, target, message)  # type: ignore[arg-type]  # (its pool: unread)


def _timed_out(exc: OSError) -> bool:
    """A read that ran out of time, as urllib3 tells one (`_raise_timeout`)."""
    return isinstance(exc, TimeoutError) or exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK)


class DirectPool:
    """Kept-alive connections to one host, at most `maxsize` of them idle (more are opened
    when all are busy, as urllib3's non-blocking pool does, and closed when given back)."""

    def __init__(self, host: str, port: int, maxsize: int) -> None:
        self.host, self.port, self.maxsize = host, port, maxsize
        self._idle: list[Connection] = []

    def _take(self) -> Connection:
        """The most recently used idle connection (a fresh one when none is idle); one the
        upstream closed, or that has bytes waiting, is closed, to connect again."""
        try:
            connection = self._idle.pop()
        except IndexError:
            return Connection(self.host, self.port)
        sock = connection.sock
        if sock is None or readable_now(sock):
            connection.close()
        return connection

    def give_back(self, connection: Connection) -> None:
        """A connection whose answer was read to its end, kept for the next request."""
        if connection.sock is not None and len(self._idle) < self.maxsize:
            self._idle.append(connection)
        else:
            connection.close()

    def send(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str],
             framed: Framing, timeouts: Timeouts, tracker: ConnectionTracker | None = None,
             ) -> Answer:
        """Send one request and read its answer's head, as urllib3's `urlopen` does with no
        retries and no redirects; its exceptions when the exchange fails."""
        target = request_target(url)
        connection = self._take()
        try:
            if tracker is not None:
                tracker.attach(connection)
            self._write(connection, method, target, body, headers, framed, timeouts.connect)
            if connection.sock is not None:
                if timeouts.read == 0:
                    raise read_timeout(target, "Read timed out. (read timeout=0)")
                connection.sock.settimeout(timeouts.read)
            raw = self._head(connection, target, timeouts.read)
            lines = raw.msg.items()
            headers_in, by_lowered = joined(lines)
            length = expected_length(by_lowered, raw.status, method)
        except BaseException:
            connection.close()
            raise
        return Answer(raw.status, headers_in, by_lowered, lines, raw, connection, length,
                      method, target)

    @staticmethod
    def _write(connection: Connection, method: str, target: str, body: bytes | None,
               headers: Mapping[str, str], framed: Framing, connect_timeout: float) -> None:
        """The request, as urllib3's connection writes it (a reused socket given the connect
        timeout to write under); a reset or broken pipe while writing is left for the
        answer's read to tell, as urllib3 leaves it (an upstream may answer, then close)."""
        connection.timeout = connect_timeout
        if connection.sock is not None:
            connection.sock.settimeout(connect_timeout)
        # (a target naming a host, an absolute URL's, has http.client write its Host line)
        own_host = target.startswith("http")
        connection.putrequest(method, target, skip_host=not own_host,
                              skip_accept_encoding=framed.skip_accept_encoding or not own_host)
        framing_lines = []
        if body is not None:
            framing_lines.append(("Content-Length", str(len(body))))
        elif method.upper() not in _NO_BODY_EXPECTED:
            framing_lines.append(("Content-Length", "0"))
        if not framed.user_agent:
            framing_lines.append(("User-Agent", USER_AGENT))
        block = header_block(framing_lines, headers)
        buffer = connection._buffer  # type: ignore[attr-defined]  # (putheader's own)
        if not own_host:  # the lines putrequest would have written after its first
            host, accept_encoding = standard_lines(connection.host, connection.port)
            buffer.append(host if framed.skip_accept_encoding else accept_encoding)
        if block is None:  # a name or value http.client refuses, or writes its own way
            for name, value in framing_lines:
                connection.putheader(name, value)
            for name, value in headers.items():
                connection.putheader(name, value)
        elif block:
            buffer.append(block)
        try:
            connection.endheaders(body or None)
        except BrokenPipeError:
            pass
        except OSError as exc:  # (connect's failures are urllib3's, not OSErrors)
            if exc.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                raise ProtocolError("Connection aborted.", exc) from exc

    @staticmethod
    def _head(connection: Connection, target: str, seconds: float,
              ) -> http.client.HTTPResponse:
        """The answer's status line and headers."""
        try:
            return connection.getresponse()
        except OSError as exc:
            if _timed_out(exc):
                raise read_timeout(target, f"Read timed out. (read timeout={seconds})"
                                   ) from exc
            raise ProtocolError("Connection aborted.", exc) from exc
        except http.client.HTTPException as exc:
            raise ProtocolError("Connection aborted.", exc) from exc

    def read_all(self, answer: Answer, max_bytes: int) -> bytes:
        """The body, read in pieces that let other requests run between them, refused past
        `max_bytes` (0: no limit); its connection given back once read to its end, closed
        when the read fails."""
        pieces = []
        size = 0
        read = _decoding_reader(answer) if encoded(answer.by_lowered) else _reader(answer)
        raw = answer.raw
        try:
            while data := read(PIECE):
                size += len(data)
                if max_bytes and size > max_bytes:
                    raise too_large(max_bytes)
                pieces.append(data)
                # a yield to the other greenlets (or threads) between two pieces; none after
                # the last (http.client closes the answer as it reads the body's end: the
                # next read is b"" at once, and a 1 KB answer is one piece)
                if not raw.isclosed():
                    time.sleep(0)
        except BaseException:
            answer.raw.close()
            answer.connection.close()
            raise
        if answer.raw.isclosed():
            self.give_back(answer.connection)
        else:  # (a decoder done before the body's end)
            answer.raw.close()
            answer.connection.close()
        return b"".join(pieces)


def too_large(max_bytes: int) -> ProxyError:
    """An answer grown past max_upstream_body_bytes."""
    return ProxyError(502, f"The upstream's answer is larger than max_upstream_body_bytes "
                      f"({max_bytes} bytes).", type_="upstream_error", code="upstream_too_large")


def _reader(answer: Answer, one: bool = False) -> Callable[[int], bytes]:
    """The body's next piece as sent (at most the given size; `one`: what one read of the
    socket gives, as `read1`), b"" at its end, the answer closed once its Content-Length is
    read; a body shorter than that, a reset or a broken chunk `ProtocolError`, a silence
    `ReadTimeoutError` (urllib3's)."""
    raw = answer.raw
    read_raw = raw.read1 if one else raw.read
    remaining = [answer.length]
    read = [0]

    def piece(size: int) -> bytes:
        try:
            data = read_raw(size)
        except TimeoutError as exc:
            raise read_timeout(None, "Read timed out.") from exc
        except (http.client.HTTPException, OSError) as exc:
            raise ProtocolError(f"Connection broken: {exc!r}", exc) from exc
        left = remaining[0]
        if not data:
            raw.close()
            if left:
                cut = IncompleteRead(read[0], left)
                raise ProtocolError(f"Connection broken: {cut!r}", cut)
            return data
        read[0] += len(data)
        if left is not None:
            remaining[0] = left = left - len(data)
            if not left:
                raw.close()  # (read1 leaves it open at its end: CPython issue 113199)
        return data
    return piece


class HeaderLines:
    """An answer's header lines as the relay reads urllib3's `HTTPHeaderDict` of them: a
    name's value whatever its case (`[]`, `get`: its lines' values joined by ", "), `in`,
    and `items()`: each line, those of one name together, the names in the order they first
    came, each under its first spelling. (Made of what `joined` read already: urllib3's
    dict is some twenty Python calls to build and read for an answer of a few lines.)"""

    __slots__ = ("_by_lowered", "_lines")

    def __init__(self, lines: list[tuple[str, str]], by_lowered: dict[str, str]) -> None:
        self._lines, self._by_lowered = lines, by_lowered

    def __getitem__(self, name: str) -> str:
        return self._by_lowered[name.lower()]

    def get(self, name: str, default: Any = None) -> Any:
        return self._by_lowered.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_lowered

    def items(self) -> list[tuple[str, str]]:
        lines = self._lines
        if len(lines) == len(self._by_lowered):  # no name twice: the lines as they came
            return list(lines)
        grouped: dict[str, list[tuple[str, str]]] = {}
        for name, value in lines:
            group = grouped.setdefault(name.lower(), [])
            group.append((group[0][0] if group else name, value))
        return [line for group in grouped.values() for line in group]


class Relayed:
    """An answer relayed as it arrives (a passthrough's), with the part of urllib3's response
    the relay reads: `status`, `headers` (read as urllib3's HTTPHeaderDict: each line kept,
    looked up whatever the case), `read1(size, decode_content=False)` (the bytes as sent),
    `close`, `release_conn` and `connection` (None once given back: a late disconnect must not
    cut it under the request that uses it next)."""

    def __init__(self, pool: DirectPool, answer: Answer) -> None:
        self.status = answer.status
        self.headers = HeaderLines(answer.lines, answer.by_lowered)
        self._pool, self._answer = pool, answer
        self._piece = _reader(answer, one=True)
        self._held: Connection | None = answer.connection

    @property
    def connection(self) -> Connection | None:
        return self._held

    def read1(self, size: int = PIECE, decode_content: bool = False) -> bytes:
        if self._held is None:
            return b""
        try:
            data = self._piece(size)
        except BaseException:
            self.close()
            raise
        if self._answer.raw.isclosed():  # read to its end: the connection goes back
            held, self._held = self._held, None
            self._pool.give_back(held)
        return data

    def close(self) -> None:
        """The rest is not wanted: the connection is closed (not when given back already)."""
        held, self._held = self._held, None
        if held is not None:
            self._answer.raw.close()
            held.close()

    def release_conn(self) -> None:
        """(Given back as the body's end is read.)"""


def _decoding_reader(answer: Answer) -> Callable[[int], bytes]:
    """A content-encoded body's next decoded piece, read through urllib3's own response (its
    decoders, its errors)."""
    raw = answer.raw
    response = urllib3.HTTPResponse(
        body=raw, headers=urllib3.HTTPHeaderDict(raw.msg.items()), status=raw.status,
        version=raw.version, reason=raw.reason, preload_content=False, decode_content=True,
        original_response=raw, enforce_content_length=True, request_method=answer.method,
        request_url=answer.target)
    return lambda size: response.read(size, decode_content=True)
