"""A request's header lines read by gunicorn's own rules, in one pass where the head is plain.

gunicorn's Python parser reads each header line in some fifteen steps (a decode, a pop from
the front of the list, a split, two regexes, a strip, a join, its header policy), some
15 K instructions a line, and parses the peer's address with `ipaddress` on every request
to see whether it may set forwarding headers (28 K). Here a block of plain lines (each a
token name with no `_`, a colon, a value of visible characters, spaces and tabs: no folded
line, no control character) is checked by one regex and split once; gunicorn's header
policy (`_apply_header_policy`) still judges each name it acts on (Host and Content-Type
once each, Expect, the secure-scheme headers), in the same order, with the same state.
Any other block, a trailer, too many or too long lines: gunicorn's own `parse_headers`,
whose errors are then its own (`strip_header_spaces` changes no plain line: no name has a
space). A peer's address is judged once, by gunicorn's own look (`SettledConfig.trusted_peer`
keeps the answer: a worker's settings never change), and a request line read by gunicorn is
kept for the next request that sends it (with the same settings).

It serves only the gunicorn it was made from (`MADE_FROM`: the sources of the four methods
it reads as they were, hashed), and only its Python parser (the proxy's setting).
"""

from __future__ import annotations

import re
from typing import Any

from gunicorn.http import message
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser

from .response import source_hashes

# One or more plain header lines, CRLF between them: a token name without `_` (a name with
# one goes through the header_map rule), a colon, then tab, space, visible ASCII or latin-1.
_PLAIN_BLOCK = re.compile(
    rb"[!#$%&'*+\-.^`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*"
    rb"(?:\r\n[!#$%&'*+\-.^`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*)*")
# Names gunicorn's header policy acts on whatever the settings (besides the secure-scheme
# headers the peer may set): the singleton fields and Expect.
# (gunicorn 27's set; an older gunicorn, which has none, is not served: `MADE_FROM`)
_POLICED = frozenset({*getattr(message, "RFC9110_5_3_SINGLETON_FIELDS", ()), "EXPECT"})

# Request lines read (their method, target, its parts and version, by the settings that
# judge them), at most; a line with a query (it may hold a key) or longer is never kept.
LINES_KEPT = 256
LINE_KEPT_MAX = 512
_LINES: dict[tuple[bytes, bool, bool, bool], tuple[Any, ...]] = {}

# The sha256 of the source of each gunicorn method this reads as it was (gunicorn 27.0.1):
# the line-by-line parse it stands in for, the policy whose other names it skips, and the
# peer's look and the request line's read it keeps the answers of (each a function of what
# it is given and the settings alone).
MADE_FROM = {
    "Message.parse_headers":
        "fe09a6b5e706bd6428820bbf168447fe58362906e2075a60bec02ae91a8d4611",
    "HeaderPolicy._apply_header_policy":
        "ac812cc2fe6b529cf53a97bff3dd6290d9c89c3387d43dd7162edb176042f1ec",
    "HeaderPolicy._peer_is_trusted_proxy":
        "4d98e07d3c7a90feff5bedd7b8ae4715cf3cf741765d8f4a7d7722c7f9da7656",
    "Request.parse_request_line":
        "77187ebabb46addbf8ecb253b6bdb19c74dfe9cc7bc23012cdaefb5b67bd691a",
}


class PlainHeadRequest(Request):
    """gunicorn's request, its header block read in one pass when it is plain lines."""

    def parse_headers(self, data: bytes, from_trailer: bool = False) -> list[tuple[str, str]]:
        own: Any = self  # (gunicorn 27's methods: the stubs know gunicorn 26)
        if from_trailer or _PLAIN_BLOCK.fullmatch(data) is None:
            return super().parse_headers(data, from_trailer)
        lines = data.decode("latin-1").split("\r\n")
        limit = self.limit_request_field_size
        if len(lines) > self.limit_request_fields or (
                limit > 0 and max(map(len, lines)) + 2 > limit):
            return super().parse_headers(data, from_trailer)
        secure_scheme_headers, forwarder_headers = own._peer_trusted_for_forwarded()
        scheme_state = [False]
        seen: set[str] = set()
        headers = []
        for line in lines:
            name, value = line.split(":", 1)
            name = name.upper()
            value = value.strip(" \t")
            if name in _POLICED or name in secure_scheme_headers:
                kept = own._apply_header_policy(name, value, scheme_state, seen,
                                                secure_scheme_headers, forwarder_headers)
                if kept is None:  # (never for a name without `_`: gunicorn's rule kept)
                    continue
                headers.append(kept)
            else:
                headers.append((name, value))
        return headers

    def parse_request_line(self, line_bytes: bytes) -> None:
        """gunicorn's own, its answer kept for the next request with the same line and
        settings (a client sends the same few: ~29 K instructions, `urlsplit` among them)."""
        cfg = self.cfg
        key = (line_bytes, cfg.permit_unconventional_http_method, cfg.casefold_http_method,
               cfg.permit_unconventional_http_version)
        kept = _LINES.get(key)
        if kept is not None:
            self.method, self.uri, self.path, self.query, self.fragment, self.version = kept
            return
        super().parse_request_line(line_bytes)
        if (len(_LINES) < LINES_KEPT and len(line_bytes) <= LINE_KEPT_MAX
                and b"?" not in line_bytes):
            _LINES[key] = (self.method, self.uri, self.path, self.query, self.fragment,
                           self.version)

    def _peer_is_trusted_proxy(self) -> bool:
        peer = self.peer_addr
        judge: Any = super()._peer_is_trusted_proxy  # type: ignore[misc]  # (27's; see above)
        kept = getattr(self.cfg, "trusted_peer", None)
        trusted: bool = judge() if kept is None or not isinstance(peer, tuple) else kept(
            peer[0], judge)
        return trusted


def copied_sources() -> dict[str, str]:
    """The sha256 of the source of each gunicorn method `PlainHeadRequest` reads as it was."""
    policy: Any = message.HeaderPolicy  # (gunicorn 27's: the stubs know gunicorn 26)
    methods = {"Message.parse_headers": message.Message.parse_headers,
               "HeaderPolicy._apply_header_policy": policy._apply_header_policy,
               "HeaderPolicy._peer_is_trusted_proxy": policy._peer_is_trusted_proxy,
               "Request.parse_request_line": Request.parse_request_line}
    return source_hashes(methods)


def can_install() -> bool:
    """Whether this gunicorn's request is the one `PlainHeadRequest` was made from, and its
    parser still makes gunicorn's own `Request`."""
    try:
        same = copied_sources() == MADE_FROM
    except (OSError, TypeError, AttributeError):  # (no source to read: not known to be it)
        return False
    return same and getattr(RequestParser, "mesg_class", None) is Request


def install() -> bool:
    """Have this worker's HTTP/1 parser make `PlainHeadRequest`s (its class attribute names
    the message class it makes); False, and gunicorn's own kept, where it cannot serve."""
    if not can_install():
        return False
    RequestParser.mesg_class = PlainHeadRequest
    return True
