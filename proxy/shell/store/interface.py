"""The store of kept answers (the Responses API's `store: true`) as an interface: what every
backend does (`ResponseStore`) and the limits it keeps (the package's `open_store` picks a
backend from `responses_store_url`). Only the shell does store I/O; the front says what to keep
(`fronts.StoredResponse`) and reads conversations through the `Recall` the shell binds for it.

Every call names an owner: the keyed hash of the API key that authorised the request
(`ResponseStore.owner`). An answer is seen, continued and deleted only by its owner;
another owner's id answers exactly as an id that was never kept.

Adding a backend: a module beside this one with a class of these methods and its
`BACKEND = StoreBackend(...)` (URL schemes, the URL check, the constructor), one line in the
package's `BACKENDS`, and one fixture param in `tests/shell/store/test_store_contract.py`. The
settings check a store URL through its backend's declaration; nothing else names a backend.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ...base.config import Config
from ...base.errors import ProxyError
from ...fronts import StoredResponse

NO_KEY_OWNER = "-"  # the one owner of every answer when the proxy has no api_keys
# Upstream profiles a store keeps at most (those expiring soonest go first), and the bytes
# of one (a larger one is not kept): the profile area stays a few MB whatever upstreams say.
MAX_PROFILES = 1024
MAX_PROFILE_BYTES = 8192
MAX_CHAIN = 100_000  # links followed back through `previous` before giving up (a cycle)


@dataclass(frozen=True)
class StoreLimits:
    """What a store holds at most: by age, and per owner by count and bytes; in all, by
    bytes (0: no limit, for each)."""

    max_age_seconds: float = 30 * 24 * 3600.0
    max_responses: int = 10_000  # per owner
    max_bytes_per_key: int = 256 * 1024 * 1024
    max_bytes: int = 1024 * 1024 * 1024  # every owner's together

    @classmethod
    def of(cls, config: Config) -> StoreLimits:
        """The limits the settings say."""
        return cls(config.responses_store_max_age_seconds,
                   config.responses_store_max_responses,
                   config.responses_store_max_bytes_per_key,
                   config.responses_store_max_bytes)


@dataclass(frozen=True)
class Usage:
    """What an owner holds, and what every owner holds together (unexpired answers)."""

    count: int
    bytes: int
    total_bytes: int


class ResponseStore(Protocol):
    """Kept answers by owner and id. Reads that fail raise a 503 ProxyError
    (`store_unavailable`); a write that fails is logged and answers False, or None when its
    outcome is unknown (the client has its answer already)."""

    backend: str  # the URL scheme: "sqlite", …

    def owner(self, api_key: str | None) -> str:
        """The owner for the API key that authorised a request (None: the proxy has no
        keys, and every answer has one owner): a keyed hash, never the key itself."""
        ...

    def put(self, owner: str, kept: StoredResponse) -> bool | None:
        """Keep an answer, then let the owner's oldest go past its count and byte caps
        (never another owner's); False when the store could not be written, None when it
        was sent the write and did not answer in time (it may have kept it)."""
        ...

    def get(self, owner: str, response_id: str) -> bytes | None:
        """The kept answer as `GET /v1/responses/{id}` returns it, or None."""
        ...

    def recall(self, owner: str, response_id: str,
               max_bytes: int = 0) -> list[dict[str, Any]] | None:
        """The conversation through the answer: the items of every answer it continued,
        oldest first, then its own, read in one round trip; None when it, or one before it,
        is not kept. A conversation of more than `max_bytes` (0: any size) is a 413
        (`conversation_too_large`), refused before its items are loaded."""
        ...

    def delete(self, owner: str, response_id: str) -> bool:
        """Forget an answer; False when the owner has no such answer."""
        ...

    def expire(self) -> int:
        """Let go of the answers past the age limit; how many went."""
        ...

    def usage(self, owner: str) -> Usage:
        """What the owner holds, and every owner together."""
        ...

    def check(self) -> None:
        """A cheap check that the store can be read (a store not yet created can);
        raises the 503 ProxyError otherwise."""
        ...

    def put_profile(self, key: str, profile: bytes, ttl_seconds: float) -> bool:
        """Keep what an upstream is (`key`: a fixed-size hash of its URL and model) for
        every worker and instance, `ttl_seconds` at most, letting go of expired profiles
        and of those past MAX_PROFILES (soonest to expire first); False when it could not
        be written or is larger than MAX_PROFILE_BYTES."""
        ...

    def get_profile(self, key: str) -> bytes | None:
        """The upstream profile kept under `key` and not yet expired, or None (also when
        the store cannot be read: a profile is learned again, never a failed turn)."""
        ...


def owner_hash(secret: bytes, api_key: str | None) -> str:
    """The owner for a key: HMAC-SHA256 under the store's own secret (so the stored owner is
    neither the key nor a hash anyone could match against a list of keys)."""
    if api_key is None:
        return NO_KEY_OWNER
    return hmac.new(secret, api_key.encode(), hashlib.sha256).hexdigest()


def store_unavailable(reason: str) -> ProxyError:
    """The error for a store that cannot be read: retryable, never a 500. `reason` is said
    to the client: what went wrong, never where the store lives (its host, its path)."""
    return ProxyError(503, f"The response store cannot be read: {reason}.",
                      type_="server_error", code="store_unavailable",
                      headers={"Retry-After": "1"})


def conversation_too_large(size: int, limit: int) -> ProxyError:
    """A `previous_response_id` whose conversation could never be sent upstream."""
    return ProxyError(413, f"The conversation through previous_response_id holds {size} bytes, "
                           f"more than max_body_bytes ({limit}) lets through; start a new "
                           "conversation.", param="previous_response_id",
                      code="conversation_too_large")


def refusal(usage: Usage | None, incoming: int, limits: StoreLimits) -> ProxyError | None:
    """Why a turn that will keep `incoming` bytes (before its answer) cannot be kept, or None.
    An owner's own cap is kept by letting its oldest answers go; the total by letting go of
    the owner's own too, so only what other owners hold can leave no room. (`usage` None:
    not read, for no limit needs it.)"""
    per_key, total = limits.max_bytes_per_key, limits.max_bytes
    if per_key and incoming > per_key:
        return ProxyError(413, f"This request's input ({incoming} bytes) is larger than one API "
                               f"key may keep (responses_store_max_bytes_per_key, {per_key}); "
                               "send it with store: false.", param="store",
                          code="store_budget_exceeded")
    if total and usage is not None and usage.total_bytes - usage.bytes + incoming > total:
        return ProxyError(413, "The response store is full (responses_store_max_bytes, "
                               f"{total} bytes, held by other keys); send the request with "
                               "store: false.", param="store", code="store_full")
    return None


@dataclass(frozen=True)
class StoreBackend:
    """One kind of store, declared beside its code (as a format declares its spec): the URL
    schemes it serves, the check of such a URL (None: usable; else why not, worded to follow
    the setting's name), and how a store is opened from one (lazily: nothing is created or
    connected before first use)."""

    schemes: tuple[str, ...]
    check_url: Callable[[str], str | None]
    open: Callable[[str, StoreLimits, logging.Logger], ResponseStore]
