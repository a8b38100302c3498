"""The door: what a request must be to come in (a key, a plain path, a body within its limit),
and which of its headers go on upstream."""

from __future__ import annotations

import base64
import contextlib
import hmac
import re
import socket
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from flask import Request as FlaskRequest
from flask import globals as flask_globals
from flask import request as request_proxy
from gunicorn.http.errors import ParseException
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge
from werkzeug.sansio.utils import get_content_length
from werkzeug.wrappers import Request

from ...base.config import Config
from ...base.errors import ProxyError
from ...fronts import HeaderLookup
from ..runtime.background import call_later
from ..runtime.clients import client_socket
from ..upstream.client import request_headers

_KEY_HEADERS = ("Authorization", "X-Api-Key", "Api-Key")  # without the fronts' own list
_BODY_READ = "toolcall_proxy.body_read"
# The context variable behind Flask's `request` (Flask 2.3 to 3.1), or None.
request_context_var: Any = getattr(flask_globals, "_cv_request", None)
# What a plain path never holds, decoded: a control character (C0, DEL) or a backslash.
_NOT_PLAIN = re.compile(r"[\x00-\x1f\x7f\\]")


class Door:
    """One port's API keys (`api_keys`; the Ollama port's may be `ollama_api_keys`): with
    none set, every request to that port comes in."""

    def __init__(self, api_keys: Iterable[str],
                 key_headers: Iterable[str] = _KEY_HEADERS) -> None:
        self._keys = [key.encode() for key in api_keys]
        # Where a key may come (the fronts declare theirs), Authorization first.
        self._key_headers = tuple(key_headers)
        self._credential_headers = frozenset(name.lower() for name in self._key_headers)
        # The names `upstream_headers` drops: by (credentials replaced, request id set).
        self._dropped = {(credentials, request_id): frozenset(
            (self._credential_headers if credentials else set())
            | ({"x-request-id"} if request_id else set()))
            for credentials in (False, True) for request_id in (False, True)}

    @property
    def locked(self) -> bool:
        """Whether requests need a key."""
        return bool(self._keys)

    def authorize(self, method: str, headers: HeaderLookup) -> str | None:
        """With `api_keys` set, the request must carry one of them (compared in constant
        time, every key tried): `Authorization: Bearer KEY`, `api-key`/`x-api-key`, or
        Basic auth with the key as its password (what a browser asked for one sends).
        Raises a 401 ProxyError otherwise. The key that matched (None without `api_keys`)
        says whose the request is: the owner of what it keeps. (CORS preflights, which carry
        no key, never get here: the proxy answers them itself, see `addressed.preflight`.)"""
        if not self._keys:
            return None
        offered = ""
        for name in self._key_headers:
            value = headers.get(name, "")
            offered = _offered_key(value) if name.lower() == "authorization" else value
            if offered:
                break
        candidate = offered.strip().encode()
        matched: bytes | None = None
        for key in self._keys:
            if hmac.compare_digest(candidate, key):
                matched = key
        if matched is None:
            raise ProxyError(401, "Incorrect or missing API key for this proxy.",
                             type_="invalid_request_error", code="invalid_api_key",
                             headers={"WWW-Authenticate": "Bearer"})
        return matched.decode()

    def upstream_headers(self, incoming: Iterable[tuple[str, str]], config: Config,
                         request_id: str | None, *, buffered: bool) -> dict[str, str]:
        """The client's headers as sent upstream: its credentials replaced by the configured
        upstream key if any, and dropped when they were the proxy's own key (`api_keys`:
        that key is for the proxy, never for vLLM); the request id always, so that vLLM's
        logs and the proxy's line can be matched."""
        headers = request_headers(incoming, buffered=buffered)
        credentials = bool(config.upstream_api_key or self._keys)
        dropped = self._dropped[credentials, bool(request_id)]
        if dropped:  # (one pass for both: the names it drops, then those it sets, last)
            headers = {k: v for k, v in headers.items() if k.lower() not in dropped}
        if config.upstream_api_key:
            headers["Authorization"] = f"Bearer {config.upstream_api_key}"
        if request_id:
            headers["X-Request-Id"] = request_id
        return headers


def _offered_key(authorization: str) -> str:
    """The key an Authorization header offers: Bearer's token, or Basic's password."""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return value
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
    except (ValueError, UnicodeDecodeError):
        return ""


_BODY_HEADERS = {"CONTENT_TYPE": "Content-Type", "CONTENT_LENGTH": "Content-Length"}


def header_items(environ: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The request's headers as (name, value), as Werkzeug's `request.headers.items()` gives
    them (the same names, values and order), in one pass over the environ (Werkzeug's goes
    through two generators for each header)."""
    items = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            if key != "HTTP_CONTENT_TYPE" and key != "HTTP_CONTENT_LENGTH":
                items.append((key[5:].replace("_", "-").title(), value))
        elif key in _BODY_HEADERS and value:
            items.append((_BODY_HEADERS[key], value))
    return items


def request_target(environ: Mapping[str, Any], path: str) -> str:
    """The request's path and query as the client wrote them (still percent-encoded)."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if not raw:
        query = environ.get("QUERY_STRING", "")
        raw = path + (f"?{query}" if query else "")
    return raw


def plain_path(target: str) -> bool:
    """An origin-form path (one leading slash) without dot segments, backslashes or control
    characters, encoded or not: the upstream is fixed, and what reaches it is a plain path."""
    path = unquote(target.split("?", 1)[0])
    segments = path.split("/")
    return (target.startswith("/") and not target.startswith("//")
            and "." not in segments and ".." not in segments
            and _NOT_PLAIN.search(path) is None)


def _body_refused(expired: bool) -> ProxyError:
    """The error for a body that broke off (its framing bad, or shorter than announced), or
    that did not arrive in time (`expired`)."""
    if expired:
        return ProxyError(408, "The request body did not arrive within body_timeout_seconds.",
                          code="request_timeout")
    return ProxyError(400, "The request body is malformed: its chunked framing is invalid, "
                           "or it ended before its Content-Length.", code="malformed_body")


def shut_reading(environ: Mapping[str, Any]) -> None:
    """Shut the client connection's reading side: the server reads an end there, answers,
    and closes the connection instead of waiting on (or draining) the rest of a body."""
    sock = client_socket(environ)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RD)


def current_request() -> FlaskRequest:
    """The request being handled, itself rather than Flask's proxy to it: each use of the
    proxy is three Python calls, and handling a request used it some forty times. Read
    from Flask's context variable where it has one (the proxy's own lookup is a call more
    each time); outside a request, the proxy's own error."""
    if request_context_var is not None:
        context = request_context_var.get(None)
        if context is not None:
            return context.request  # type: ignore[no-any-return]  # a RequestContext's
    # flask types its proxy as the Request it stands for, without LocalProxy's own methods
    return request_proxy._get_current_object()  # type: ignore[attr-defined, no-any-return]  # see above


def read_body(request: Request, max_bytes: int, timeout: float, *, keep: bool = True) -> bytes:
    """The request body, whole, within `timeout` seconds (0: no limit); with `keep` false it
    is read and dropped (a refused request's, so that the connection can go on).

    A body without Content-Length (chunked) is read to its end and refused past `max_bytes`
    (Werkzeug's own limit would cut it there silently); one shorter than its Content-Length,
    or with broken chunked framing, is a 400; one that has not arrived when the time is up is
    a 408, and the connection's reading side is shut so that the server closes it rather
    than wait on the rest."""
    environ = request.environ
    if not body_unread(environ):  # read already, or there is none: no timer to set
        environ[_BODY_READ] = True
        return b""
    environ[_BODY_READ] = True
    expired: list[bool] = []

    def expire() -> None:
        expired.append(True)
        shut_reading(environ)

    length = content_length(environ)
    cancel = call_later(timeout, expire) if timeout else None
    try:
        data = _read(request, length, max_bytes, keep)
    except (OSError, ClientDisconnected, ParseException):
        shut_reading(environ)
        raise _body_refused(bool(expired)) from None
    finally:
        if cancel is not None:
            cancel()
    if expired or (length is not None and len(data) < length and keep):
        shut_reading(environ)
        raise _body_refused(bool(expired))
    return data


def content_length(environ: Mapping[str, Any]) -> int | None:
    """Werkzeug's `Request.content_length`, read from the environ itself (the property reads
    both headers through the headers' key translation, and is a Python descriptor each time
    it is read again): None for a chunked body or none announced, 0 for a bad value."""
    return get_content_length(environ.get("CONTENT_LENGTH"),
                              environ.get("HTTP_TRANSFER_ENCODING"))


def _read(request: Request, length: int | None, max_bytes: int, keep: bool) -> bytes:
    environ = request.environ
    if length is not None and max_bytes and length > max_bytes:
        raise RequestEntityTooLarge()  # not worth reading, even to drop it
    if keep and length is not None:  # the server's own stream, read to its length at once
        return environ["wsgi.input"].read(length)  # type: ignore[no-any-return]  # a stream
    if keep and "wsgi.input_terminated" not in environ:
        return request.get_data(cache=False)  # (none: Werkzeug reads nothing)
    stream = environ["wsgi.input"] if length is None else request.stream
    pieces = []
    size = 0
    while data := stream.read(65536):
        size += len(data)
        if max_bytes and size > max_bytes:
            raise RequestEntityTooLarge()
        if keep:
            pieces.append(data)
    return b"".join(pieces)


def body_unread(environ: Mapping[str, Any]) -> bool:
    """Whether the request's body, if it has one, is still to be read."""
    return not environ.get(_BODY_READ) and (
        environ.get("CONTENT_LENGTH", "0") not in ("", "0")
        or "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower())
