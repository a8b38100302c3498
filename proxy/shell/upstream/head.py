"""An upstream answer's header lines read without the `email` package, where that gives the
same message.

http.client (under urllib3) hands every response's header block to `email.parser`, a
feed parser written for mail: some 60 Python calls per header line, about 4 % of a relayed
request's instructions. A block of plain `Name: value` lines (no folded line, no line
without a colon, no multipart body to look for) parses here to the same `HTTPMessage`,
header for header; any other block goes to the email parser as before. And what the direct
path reads of those lines as urllib3 would (`joined`, `expected_length`, `encoded`).
"""

from __future__ import annotations

import email.parser
import email.policy
import http.client
import re
from collections.abc import Iterable, Mapping
from typing import Any

from urllib3.exceptions import InvalidHeader

# One field line as the email parser (compat32) takes it whole: a name of printable
# characters but the colon and space, the colon, a value with no CR or LF inside.
_PLAIN_FIELD = re.compile(rb"[!-9;-~]+:[^\r\n]*\r?\n")
_END = (b"\r\n", b"\n")
# Content types whose (empty) body the email parser looks into, noting defects urllib3 reads.
_NESTED = ("multipart/", "message/")


def fields(lines: list[bytes]) -> list[tuple[str, str]] | None:
    """The (name, value) pairs of a header block (its lines, the blank one ending it last),
    as the email parser would store them; None when the block is not plain lines."""
    if not lines or lines[-1] not in _END:
        return None
    pairs = []
    for line in lines[:-1]:
        if _PLAIN_FIELD.fullmatch(line) is None:
            return None
        name, _, value = line.decode("iso-8859-1").partition(":")
        value = value.lstrip(" \t").rstrip("\r\n")
        if name.lower() == "content-type" and value.lower().lstrip().startswith(_NESTED):
            return None
        pairs.append((name, value))
    return pairs


class _Latin1Fields(email.policy.Compat32):
    """The email package's own policy (compat32) for a message whose values were decoded
    from latin-1 here: a value read back is the value stored. Compat32 looks at each for
    the surrogates a bytes-decoded value may hold and wraps those in a `Header`; latin-1
    decoding makes none, and the look was three Python calls each time a field was read
    (http.client reads four, urllib3 every one)."""

    def header_fetch_parse(self, name: str, value: str) -> str:
        return value


_LATIN1_FIELDS = _Latin1Fields()


def parse_headers(fp: Any, _class: type = http.client.HTTPMessage) -> Any:
    """`http.client.parse_headers`, the same message, read without the email parser when the
    block is plain lines."""
    lines = http.client._read_headers(fp)  # type: ignore[attr-defined]  # private: not in typeshed
    pairs = fields(lines)
    if pairs is None:
        return email.parser.Parser(_class=_class).parsestr(
            b"".join(lines).decode("iso-8859-1"))
    message = _class(policy=_LATIN1_FIELDS)
    message._headers.extend(pairs)
    message.set_payload("")
    return message


def install() -> None:
    """Have http.client read header blocks with `parse_headers` (its `begin` looks the
    function up by name at each response): done as the upstream client is imported. A
    Python whose http.client reads its lines otherwise (no `_read_headers`, a private name
    3.11 to 3.14 share) keeps its own parser."""
    if not callable(getattr(http.client, "_read_headers", None)):
        return
    http.client.parse_headers = parse_headers  # type: ignore[assignment]  # typeshed: a def, not a slot


install()


def joined(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, str], dict[str, str]]:
    """An answer's header lines as urllib3 hands them on (`dict(HTTPHeaderDict)`): one entry a
    name whatever its case, under its first spelling, repeated values joined by ", "; and the
    same values by lowercased name."""
    headers: dict[str, str] = {}
    by_lowered: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for name, value in pairs:
        lowered = name.lower()
        first = spelled.get(lowered)
        if first is None:
            spelled[lowered] = name
            headers[name] = by_lowered[lowered] = value
        else:
            headers[first] = by_lowered[lowered] = by_lowered[lowered] + ", " + value
    return headers, by_lowered


def expected_length(by_lowered: Mapping[str, str], status: int, method: str) -> int | None:
    """The body length urllib3 holds an answer to (its `_init_length`): Content-Length's when
    the answer is not chunked (InvalidHeader when it lists two), none for a bodiless status."""
    length: int | None = None
    given = by_lowered.get("content-length")
    encoding = by_lowered.get("transfer-encoding")  # (most answers: none, no parts to look at)
    chunked = encoding is not None and "chunked" in (
        part.strip() for part in encoding.lower().split(","))
    if given is not None:
        if chunked:
            return None
        try:
            if "," in given:
                lengths = {int(part) for part in given.split(",")}
                if len(lengths) > 1:
                    raise InvalidHeader(
                        f"Content-Length contained multiple unmatching values ({given})")
                length = lengths.pop()
            else:  # (one value: the set of one)
                length = int(given)
        except ValueError:
            length = None
        else:
            if length < 0:
                length = None
    if status in (204, 304) or 100 <= status < 200 or method == "HEAD":
        return 0
    return length


def encoded(by_lowered: Mapping[str, str]) -> bool:
    """Whether the body is content-encoded (gzip, …): read through urllib3's decoders then."""
    return by_lowered.get("content-encoding", "").strip().lower() not in ("", "identity")
