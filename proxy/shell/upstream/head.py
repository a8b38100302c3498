"""An upstream answer's header lines read without the `email` package, where that gives the
same message.

http.client (under urllib3) hands every response's header block to `email.parser`, a
feed parser written for mail: some 60 Python calls per header line, about 4 % of a relayed
request's instructions. A block of plain `Name: value` lines (no folded line, no line
without a colon, no multipart body to look for) parses here to the same `HTTPMessage`,
header for header; any other block goes to the email parser as before.
"""

from __future__ import annotations

import email.parser
import email.policy
import http.client
import re
from typing import Any

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
