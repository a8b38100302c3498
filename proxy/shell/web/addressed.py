"""Whether a request is addressed to this proxy: its `Host` one of the proxy's own names or
addresses (a DNS name nobody configured is how DNS rebinding lets a web page reach a
loopback or LAN server), and its `Origin`, when a browser sent one, the proxy's own or one
allowed (a page on another site must neither drive the proxy nor read it), or a desktop
app's own. Also the CORS
answers for the origins allowed.

Ollama's rules are the model (server/routes.go `allowedHostsMiddleware`, envconfig
`AllowedOrigins`), made stricter where they leave a door open: Ollama checks `Host` only
when bound to loopback and takes every `*.local` and `*.internal` name, and it lets every
`http://localhost:*` page in. Here the `Host` check holds on every address the proxy is
bound to, names are this machine's own or listed (`allowed_hosts`), and a web origin is the
proxy's own or listed (`allowed_origins`); file pages are not let in.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...base.errors import ProxyError
from ...fronts import HeaderLookup

# A Host header: a name or an IPv4 literal, or an IPv6 literal in brackets; then a port.
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+(?:%[\w.~-]+)?)\]|(?P<name>[^\s:\[\]/@?#]+))"
                   r"(?::\d{1,5})?")
# The origins of desktop apps' and browser extensions' own pages, which no web page can
# send (a browser sets Origin itself): Cursor and VS Code (`vscode-file://vscode-app`),
# Electron and Tauri apps, extensions such as Page Assist. Ollama lets them in by default
# too; a file opened from disk is `null` (or `file://`) and is not among them.
APP_ORIGINS = ("app://*", "tauri://*", "vscode-webview://*", "vscode-file://*",
               "chrome-extension://*", "moz-extension://*", "safari-web-extension://*")
# Names that only ever mean this machine: browsers resolve *.localhost to loopback themselves
# (RFC 6761), and no public DNS answers for them.
_LOOPBACK_NAMES = ("localhost",)


def _own_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `ip` is an address of one of this machine's interfaces: the kernel lets a
    socket bind to it (no descriptor stays open, nothing is sent)."""
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(ip), 0))
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=256)
def _ip_literal(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address `text` spells, or None for a name (read once per Host a client sends:
    `ipaddress` parses in Python, octet by octet, on every request otherwise)."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Addressing:
    """What the proxy answers to: the names it was told (`allowed_hosts`: exact names,
    `*.suffix` patterns, `*` for any Host), this machine's names, the address it is bound
    to, and the origins it was told (`allowed_origins`: exact, `*`-patterns, `*` for any)."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]
    bound: str = ""
    machine: tuple[str, ...] = ()
    own_address: Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address], bool] = _own_address

    @classmethod
    def of(cls, allowed_hosts: Iterable[str], allowed_origins: Iterable[str],
           bound: str) -> Addressing:
        """The addressing of a proxy bound to `bound`, on this machine (its host name, and
        its first label alone and on mDNS)."""
        name = socket.gethostname().lower().rstrip(".")
        short = name.split(".")[0]
        machine = (name, short, f"{short}.local") if name else ()
        return cls(tuple(h.strip().lower().rstrip(".") for h in allowed_hosts),
                   tuple(o.strip().lower().rstrip("/") for o in allowed_origins),
                   bound.strip("[]").lower(), machine)

    def host_allowed(self, host: str, local_address: str = "") -> bool:
        """Whether a request whose Host header is `host` is addressed to this proxy, when it
        came in on `local_address` (the address the client reached, "" unknown). A missing
        Host (HTTP/1.0) is: no browser sends one without it. An IP literal is (a browser
        that sends it reached that address itself, so no name was rebound) when it is not
        a public address, or is this machine's or listed; a name only when it is loopback's,
        this machine's, the bound one or listed."""
        if not host:
            return True
        found = _HOST.fullmatch(host)
        if found is None:
            return False
        name = (found["v6"] or found["name"]).lower().rstrip(".")
        if "*" in self.hosts or name in self.hosts or any(
                entry.startswith("*.") and name.endswith(entry[1:]) for entry in self.hosts):
            return True
        ip = _ip_literal(name.split("%")[0])
        if ip is None:
            return (name in _LOOPBACK_NAMES or name.endswith(".localhost")
                    or name in self.machine or name == self.bound)
        if found["v6"] and ip.version != 6:
            return False  # brackets hold an IPv6 literal only
        if not ip.is_global or name in (self.bound, local_address.lower()):
            return True
        return self.own_address(ip)

    def origin_allowed(self, origin: str, host: str) -> bool:
        """Whether a page of `origin` may send this request (whose Host is `host`): the
        proxy's own pages (same origin: http or https on the very Host), desktop apps' and
        browser extensions' own (`APP_ORIGINS`), and the listed origins. `null` (a sandboxed
        frame, a file) only when listed."""
        origin = origin.strip().lower()
        scheme, sep, netloc = origin.partition("://")
        if sep and scheme in ("http", "https") and host and netloc == host.lower():
            return True
        return listed(origin, self.origins) or listed(origin, APP_ORIGINS)

    def refusal(self, headers: HeaderLookup, local_address: str = "") -> ProxyError | None:
        """The 403 for a request not addressed to this proxy, or None: its Host first, then
        its Origin."""
        host = headers.get("Host", "")
        if not self.host_allowed(host, local_address):
            name = host if len(host) <= 100 else host[:100] + "…"
            return ProxyError(403, f"This proxy does not answer to the Host {name!r}: add it "
                                   "to allowed_hosts if clients reach the proxy by that name.",
                              type_="invalid_request_error", code="host_not_allowed")
        origin = headers.get("Origin")
        if origin is not None and not self.origin_allowed(origin, host):
            name = origin if len(origin) <= 100 else origin[:100] + "…"
            return ProxyError(403, f"Requests from pages of {name!r} are not allowed here: "
                                   "add the origin to allowed_origins to let them in.",
                              type_="invalid_request_error", code="origin_not_allowed")
        return None


def listed(origin: str, allowed: Iterable[str]) -> bool:
    """Whether `origin` is on a list of origins: exact, a `*` pattern
    (`http://localhost:*`), or `*` for any."""
    origin = origin.strip().lower()
    return bool(origin) and any(
        entry == "*" or entry == origin or ("*" in entry and fnmatch.fnmatchcase(origin, entry))
        for entry in allowed)


def local_address(sock: Any) -> str:
    """The address a client reached on this machine, as its socket says ("" unknown)."""
    with contextlib.suppress(AttributeError, OSError, TypeError, IndexError):
        address = sock.getsockname()
        return str(address[0]) if isinstance(address, tuple) else ""
    return ""


def local_port(sock: Any) -> int | None:
    """The port a client reached on this machine, as its socket says (None unknown)."""
    with contextlib.suppress(AttributeError, OSError, TypeError, IndexError):
        address = sock.getsockname()
        return int(address[1]) if isinstance(address, tuple) else None
    return None


# What a preflight may ask for: any method a client sends, and the headers it sends them with.
_CORS_METHODS = "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"
_CORS_MAX_AGE = "600"


def is_preflight(method: str, headers: HeaderLookup) -> bool:
    """A CORS preflight: OPTIONS asking for a method (a browser's, before a cross-origin
    request)."""
    return method == "OPTIONS" and "Access-Control-Request-Method" in headers


def preflight(headers: HeaderLookup) -> ProxyError | dict[str, str]:
    """The proxy's answer to a preflight whose origin is allowed (`Addressing.refusal`
    refused the others): the CORS headers that let the browser go on. Never relayed
    upstream. One without an Origin is no browser's: 403."""
    origin = headers.get("Origin")
    if not origin:
        return ProxyError(403, "A CORS preflight without an Origin is not answered here.",
                          type_="invalid_request_error", code="origin_not_allowed")
    return {**cors_headers(origin),
            "Access-Control-Allow-Methods": _CORS_METHODS,
            "Access-Control-Allow-Headers": headers.get("Access-Control-Request-Headers", ""),
            "Access-Control-Max-Age": _CORS_MAX_AGE}


def cors_headers(origin: str) -> dict[str, str]:
    """The headers that let a page from an allowed `origin` read an answer."""
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin",
            "Access-Control-Expose-Headers": "X-Request-Id, Retry-After"}
