"""The captures `replay` reads: the client's request and the upstream's answer, side by side
(one JSON object, a JSON list of them, or JSONL, such as the proxy's log lines written with
`log_bodies`), checked for shape and read into `Exchange`s. Pure: bytes in, data out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

# The most `replay` reads of a capture file: a day of log lines with bodies is far less; an
# endless input (/dev/zero, a pipe that never closes its end) is refused at this size.
MAX_CAPTURE_BYTES = 256 * 1024 * 1024


class ReplayError(ValueError):
    """An input that cannot be replayed; the message is one line for a person."""


@dataclass(frozen=True)
class Exchange:
    """One captured exchange and where it came from (`file`, or `file:line` for JSONL).

    `response` is the upstream's body: decoded JSON, its raw text (a string), or None when
    none was captured. `logged` holds a proxy log line's `status`, `error` and
    `upstream_status` (an upstream status >= 400 makes the response an upstream error)."""

    request: dict[str, Any]
    response: Any
    where: str
    logged: dict[str, Any] | None = None
    front: str | None = None  # the front's name, as the log line has it
    path: str | None = None  # the path the request came to (None with `front`: chat)
    recalled: dict[str, Any] | None = None  # what the store gave the front, by answer id

    @property
    def upstream_status(self) -> int | None:
        """The upstream's HTTP status as the log line recorded it (None: not known)."""
        status = (self.logged or {}).get("upstream_status")
        return status if isinstance(status, int) and not isinstance(status, bool) else None


def _error_message(response: dict[str, Any]) -> str | None:
    """The message of an error envelope (OpenAI's or vLLM's flat one), or None."""
    inner = response.get("error")
    if isinstance(inner, dict):
        return str(inner.get("message") or "no message")
    if isinstance(inner, str):
        return inner
    if response.get("object") == "error":
        return str(response.get("message") or "no message")
    return None


LOGGED_FACTS = ("status", "error", "upstream_status")


def _named(value: dict[str, Any], key: str, where: str) -> str | None:
    """A capture's `front` or `path`: a string, or None when it names none."""
    named = value.get(key)
    if named is not None and not isinstance(named, str):
        raise ReplayError(f"{where}: '{key}' must be a string")
    return named


def _exchange(value: Any, where: str) -> Exchange:
    """Check one decoded capture's shape (a proxy log line written with `log_bodies` is one;
    its `response` may be missing, when the proxy got none)."""
    logged = None
    outer = value if isinstance(value, dict) else {}
    if isinstance(value, dict) and isinstance(value.get("bodies"), dict):
        logged = {key: value.get(key) for key in LOGGED_FACTS}
        value = value["bodies"]
    if not isinstance(value, dict) or "request" not in value or (
            "response" not in value and logged is None):
        raise ReplayError(f'{where}: expected an object {{"request": {{…}}, "response": {{…}}}}')
    request, response = value["request"], value.get("response")
    front, path = _named(outer, "front", where), _named(outer, "path", where)
    if not isinstance(request, dict):
        body = "request" if front or path else "chat completion"
        raise ReplayError(f"{where}: 'request' must be the client's {body} body "
                          "(a JSON object)")
    recalled = value.get("recalled")
    if recalled is not None and not isinstance(recalled, dict):
        raise ReplayError(f"{where}: 'recalled' must be an object (answer id → items)")
    if not isinstance(response, (dict, str)) and not (response is None and logged is not None):
        raise ReplayError(f"{where}: 'response' must be the upstream's chat completion "
                          "(a JSON object)")
    exchange = Exchange(request, response, where, logged, front, path, recalled)
    message = _error_message(response) if isinstance(response, dict) else None
    if message is not None and exchange.upstream_status is None:
        raise ReplayError(f"{where}: 'response' is an error envelope, not a completion "
                          f"(upstream said: {' '.join(message.split())[:200]})")
    return exchange


def parse_exchanges(data: bytes, label: str) -> list[Exchange]:
    """The exchanges in a capture's bytes: one JSON object, a JSON list, or JSONL."""
    data = data.removeprefix(b"\xef\xbb\xbf")  # a BOM some editors write
    if not data.strip():
        raise ReplayError(f"{label}: the file is empty")
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError as whole_error:
        exchanges: list[Exchange] = []
        for number, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                if not exchanges:  # not JSONL either: the whole file's error says more
                    raise ReplayError(f"{label}: not valid JSON or JSONL "
                                      f"({whole_error})") from None
                raise ReplayError(f"{label}:{number}: not valid JSON ({exc})") from None
            exchanges.append(_exchange(value, f"{label}:{number}"))
        return exchanges
    if isinstance(whole, list):
        if not whole:
            raise ReplayError(f"{label}: the list holds no exchange")
        return [_exchange(value, f"{label}[{i}]") for i, value in enumerate(whole)]
    return [_exchange(whole, label)]


def read_exchanges(path: str) -> list[Exchange]:
    """The exchanges in the capture file at `path`."""
    try:
        with Path(path).open("rb") as capture:
            data = capture.read(MAX_CAPTURE_BYTES + 1)
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CAPTURE_BYTES:
        raise ReplayError(f"{path} is larger than {MAX_CAPTURE_BYTES // (1024 * 1024)} MiB: "
                          "replay a part of it (the lines of one request id, say)")
    return parse_exchanges(data, path)
