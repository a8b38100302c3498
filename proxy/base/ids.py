"""Random identifiers (`chatcmpl-…`, `call_…`): letters and digits from one urandom read."""

from __future__ import annotations

import secrets
import string

ALPHABET = string.ascii_letters + string.digits
# Byte b < 248 (= 4 × 62) maps to ALPHABET[b % 62], uniformly; bytes 248..255 are dropped.
_KEPT = 4 * len(ALPHABET)
_TABLE = bytes(ord(ALPHABET[b % len(ALPHABET)]) for b in range(_KEPT)) + bytes(256 - _KEPT)
_DROPPED = bytes(range(_KEPT, 256))


def random_alnum(n: int) -> str:
    """`n` letters and digits, uniformly random (as n × `secrets.choice`, in one syscall)."""
    out = b""
    while len(out) < n:
        out += secrets.token_bytes(n + 8).translate(_TABLE, _DROPPED)
    return out[:n].decode("ascii")
