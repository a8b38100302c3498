"""The door: what a request must be to come in (a key, a plain path, a body within its limit),
and which of its headers go on upstream."""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from werkzeug.exceptions import RequestEntityTooLarge

from ..config import Config
from ..errors import ProxyError
from .upstream import request_headers

_CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")


class Door:
    """The proxy's own API keys (`api_keys`): with none set, every request comes in."""

    def __init__(self, api_keys: Iterable[str]) -> None:
        self._keys = [key.encode() for key in api_keys]

    @property
    def locked(self) -> bool:
        """Whether requests need a key."""
        return bool(self._keys)

    def authorize(self, method: str, headers: Mapping[str, str]) -> None:
        """With `api_keys` set, the request must carry one of them (compared in constant
        time, every key tried): `Authorization: Bearer KEY` or `api-key`/`x-api-key`. A CORS
        preflight carries no key (browsers never send one) and is let through, as vLLM does.
        Raises a 401 ProxyError otherwise."""
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

    def upstream_headers(self, incoming: Iterable[tuple[str, str]], config: Config,
                         request_id: str | None, *, buffered: bool) -> dict[str, str]:
        """The client's headers as sent upstream: its credentials replaced by the configured
        upstream key if any, and dropped when they were the proxy's own key (`api_keys`:
        that key is for the proxy, never for vLLM); the request id always, so that vLLM's
        logs and the proxy's line can be matched."""
        headers = request_headers(incoming, buffered=buffered)
        if config.upstream_api_key or self._keys:
            for name in [n for n in headers if n.lower() in _CREDENTIAL_HEADERS]:
                del headers[name]
        if config.upstream_api_key:
            headers["Authorization"] = f"Bearer {config.upstream_api_key}"
        if request_id:
            headers = {k: v for k, v in headers.items() if k.lower() != "x-request-id"}
            headers["X-Request-Id"] = request_id
        return headers


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
            and not any(s in (".", "..") for s in segments)
            and "\\" not in path and not any(ord(char) < 32 or ord(char) == 127 for char in path))


def read_body(request: Any, max_bytes: int) -> bytes:
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
