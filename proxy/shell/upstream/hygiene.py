"""Header hygiene: which of a client's headers go upstream, and which of an upstream's answer
go back to the client (no hop-by-hop ones, none a relay recomputes)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# RFC 9110 §7.6.1 hop-by-hop headers, plus the ones a relay must recompute itself.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "trailers", "transfer-encoding", "upgrade",
})
_NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "proxy"}  # `Proxy:`: httpoxy
_NOT_RETURNED = HOP_BY_HOP | {"content-length", "date", "server"}


def request_headers(incoming: Iterable[tuple[str, str]], *, buffered: bool) -> dict[str, str]:
    """The client's headers as sent upstream: no hop-by-hop ones, no Host (set by the
    client library to the upstream's), and for a buffered call no content negotiation."""
    headers: dict[str, str] = {}
    listed = set()
    for name, value in incoming:
        lowered = name.lower()
        if lowered == "connection":
            listed |= {token.strip().lower() for token in value.split(",")}
        if lowered in _NOT_FORWARDED or lowered.startswith("proxy-"):
            continue
        if buffered and lowered in ("accept-encoding", "accept", "content-type"):
            continue
        headers[name] = value
    if listed:
        headers = {k: v for k, v in headers.items() if k.lower() not in listed}
    if buffered:
        headers["Content-Type"] = "application/json"
        headers["Accept"] = "application/json"
    return headers


def response_headers(upstream: Any, *, keep_length: bool) -> list[tuple[str, str]]:
    """An upstream response's headers as relayed to the client."""
    drop = _NOT_RETURNED if not keep_length else _NOT_RETURNED - {"content-length"}
    listed = {token.strip().lower() for token in upstream.get("Connection", "").split(",")}
    lines = upstream.items()  # each header line on its own: Set-Cookie values never joined
    return [(k, v) for k, v in lines if k.lower() not in drop and k.lower() not in listed]
