"""The Redis `ResponseStore`: one Redis that every proxy instance shares, so an answer kept
through one instance is continued, read and deleted through any other. Each operation is one
round trip (a Lua script where it reads and writes several keys, atomically).

Keys, under the prefix `toolcall-proxy:`:

* `secret`: the owners' HMAC secret, set once (SET NX) by whichever instance comes first,
  so every instance names an API key's owner alike (each reads it again every 10 s).
* `answer:{owner}:{id}`: a hash (`previous`, `created`, `size`, `bytes`, `items`, `body`)
  that Redis itself expires `max_age_seconds` after it was kept.
* `owner:{owner}`: the owner's answers (`{bytes}|{id}`) by the time they were kept, and
  `owner-bytes:{owner}` their bytes: the per-owner count and byte caps trim the oldest.
* `profile:{key}`: an upstream's profile (`key`: a hash of its URL and model), expired by
  Redis itself; `profiles` their expiry times, `profile-sizes` their bytes, summed in
  `profile-bytes` (counted in the total cap): the expired and those past MAX_PROFILES
  are let go of as one is kept.
* `all`: every answer (`{owner}|{bytes}|{id}`) by time, and `all-bytes`: the total cap's
  count, and the index by which answers past the age limit are let go of (with their entries
  in the owner's set) before any write.

Times are the proxy's clock (`time.time()`), as in SQLite: instances keep theirs in step
(NTP). Redis Cluster is not supported (the scripts name keys they compute).
"""

from __future__ import annotations

import importlib.util
import logging
import re
import secrets
import time
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from ...base.config import mask_url
from ...fronts import StoredResponse
from .interface import (
    MAX_CHAIN,
    MAX_PROFILE_BYTES,
    MAX_PROFILES,
    NO_KEY_OWNER,
    StoreBackend,
    StoreLimits,
    Usage,
    conversation_too_large,
    owner_hash,
    store_unavailable,
)


def _redis() -> Any:
    """The `redis` package, imported when a Redis store is opened (a proxy on SQLite never
    loads it); None in a deployment without it (`check_url` refuses redis:// URLs then)."""
    try:
        import redis
    except ImportError:
        return None
    return redis

PREFIX = "toolcall-proxy:"
CONNECT_TIMEOUT = 0.5  # seconds: a Redis that does not answer is a quick 503, never a hang
SOCKET_TIMEOUT = 1.0
SECRET_SECONDS = 10.0  # the owners' secret is read again this often
TRIM_BATCH = 1000  # expired answers let go of per script call (the rest on the next)

# Let go of every answer past the age limit (ARGV[1]: the cutoff time; 0: no limit), at
# most TRIM_BATCH of them, with their entries in their owner's set and the byte counters.
_TRIM = """
local P = KEYS[1]
local function forget(owner, bytes, id)
  redis.call('ZREM', P .. 'owner:' .. owner, bytes .. '|' .. id)
  redis.call('ZREM', P .. 'all', owner .. '|' .. bytes .. '|' .. id)
  redis.call('DEL', P .. 'answer:' .. owner .. ':' .. id)
  if redis.call('DECRBY', P .. 'owner-bytes:' .. owner, bytes) <= 0 then
    redis.call('DEL', P .. 'owner-bytes:' .. owner)
  end
  redis.call('DECRBY', P .. 'all-bytes', bytes)
end
local function split(member)
  local owner, bytes, id = string.match(member, '^([^|]*)|(%d+)|(.*)$')
  return owner, tonumber(bytes), id
end
local function trim(cutoff)
  if cutoff == 0 then return 0 end
  local gone = redis.call('ZRANGEBYSCORE', P .. 'all', '-inf', '(' .. cutoff, 'LIMIT', 0, BATCH)
  for _, member in ipairs(gone) do
    local owner, bytes, id = split(member)
    forget(owner, bytes, id)
  end
  return #gone
end
""".replace("BATCH", str(TRIM_BATCH))

# ARGV: cutoff, owner, id, previous ("" for none), created, size, bytes, items, body,
# max_age_ms (0: none), max_responses, max_bytes_per_key, max_bytes (0: no limit, each).
_PUT = _TRIM + """
local cutoff, owner, id = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local bytes, ttl = tonumber(ARGV[7]), tonumber(ARGV[10])
local count_cap, key_cap, all_cap = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
trim(cutoff)
local key = P .. 'answer:' .. owner .. ':' .. id
local old = redis.call('HGET', key, 'bytes')
if old then forget(owner, tonumber(old), id) end
redis.call('HSET', key, 'previous', ARGV[4], 'created', ARGV[5], 'size', ARGV[6],
           'bytes', ARGV[7], 'items', ARGV[8], 'body', ARGV[9])
local mine, owned = bytes .. '|' .. id, P .. 'owner:' .. owner
redis.call('ZADD', owned, ARGV[5], mine)
redis.call('ZADD', P .. 'all', ARGV[5], owner .. '|' .. mine)
local held = redis.call('INCRBY', P .. 'owner-bytes:' .. owner, bytes)
local total = redis.call('INCRBY', P .. 'all-bytes', bytes)
  + tonumber(redis.call('GET', P .. 'profile-bytes') or '0')
local cap = key_cap
if all_cap > 0 then
  local room = math.max(0, all_cap - (total - held))
  if cap == 0 or room < cap then cap = room end
end
while true do
  local count = redis.call('ZCARD', owned)
  if not ((count_cap > 0 and count > count_cap) or (cap > 0 and held > cap)) then break end
  local oldest = redis.call('ZRANGE', owned, 0, 1)
  local victim = oldest[1]
  if victim == mine then victim = oldest[2] end
  if not victim then break end
  local vbytes, vid = string.match(victim, '^(%d+)|(.*)$')
  forget(owner, tonumber(vbytes), vid)
  held = held - tonumber(vbytes)
end
if ttl > 0 then
  redis.call('PEXPIRE', key, ttl)
  redis.call('PEXPIRE', owned, ttl)
  redis.call('PEXPIRE', P .. 'owner-bytes:' .. owner, ttl)
end
return 1
"""

# ARGV: owner, id, fresh (answers kept before it have expired), max bytes (0: any), depth.
# Walks `previous` from the answer back, summing sizes; refuses past the limit before any
# item is read. Returns {"missing"} | {"large", bytes} | {"ok", bytes, items oldest first...}.
_RECALL = """
local P, owner, id = KEYS[1], ARGV[1], ARGV[2]
local fresh, limit, depth = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local chain, total = {}, 0
while id ~= '' do
  if #chain > depth then return {'missing'} end
  local key = P .. 'answer:' .. owner .. ':' .. id
  local row = redis.call('HMGET', key, 'previous', 'created', 'size')
  if not row[2] or tonumber(row[2]) < fresh then return {'missing'} end
  total = total + tonumber(row[3])
  chain[#chain + 1] = key
  id = row[1]
end
if limit > 0 and total > limit then return {'large', tostring(total)} end
local out = {'ok', tostring(total)}
for i = #chain, 1, -1 do out[#out + 1] = redis.call('HGET', chain[i], 'items') end
return out
"""

# ARGV: owner, id, fresh. 1 when the owner's unexpired answer was forgotten, else 0.
_DELETE = _TRIM + """
local owner, id, fresh = ARGV[1], ARGV[2], tonumber(ARGV[3])
local row = redis.call('HMGET', P .. 'answer:' .. owner .. ':' .. id, 'created', 'bytes')
if not row[1] or tonumber(row[1]) < fresh then return 0 end
forget(owner, tonumber(row[2]), id)
return 1
"""

# ARGV: cutoff (0: no age limit). How many answers past the age limit went.
_EXPIRE = _TRIM + """
local cutoff, gone, step = tonumber(ARGV[1]), 0, 0
repeat step = trim(cutoff); gone = gone + step until step < BATCH
return gone
""".replace("BATCH", str(TRIM_BATCH))

# ARGV: owner, fresh. {count, bytes, total bytes} of unexpired answers (the expired let go).
_USAGE = _TRIM + """
local owner, fresh = ARGV[1], tonumber(ARGV[2])
if fresh > 0 then trim(fresh) end
return {redis.call('ZCARD', P .. 'owner:' .. owner),
        tonumber(redis.call('GET', P .. 'owner-bytes:' .. owner) or '0'),
        tonumber(redis.call('GET', P .. 'all-bytes') or '0')
          + tonumber(redis.call('GET', P .. 'profile-bytes') or '0')}
"""

# KEYS[1]: the prefix; ARGV: key, profile, ttl_ms, now_ms, max_profiles. An upstream's
# profile, its expiry in `profiles` (by time) and its bytes in `profile-sizes` (summed in
# `profile-bytes`, which the total cap counts); the expired and those past the cap let go.
_PROFILE = """
local P = KEYS[1]
local index, sizes = P .. 'profiles', P .. 'profile-sizes'
local function forget(key)
  local size = redis.call('HGET', sizes, key)
  if size then
    redis.call('DECRBY', P .. 'profile-bytes', tonumber(size))
    redis.call('HDEL', sizes, key)
  end
  redis.call('ZREM', index, key)
  redis.call('DEL', P .. 'profile:' .. key)
end
local key, ttl, now = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now)) do forget(gone) end
forget(key)
redis.call('SET', P .. 'profile:' .. key, ARGV[2], 'PX', ttl)
redis.call('ZADD', index, now + ttl, key)
redis.call('HSET', sizes, key, #ARGV[2])
redis.call('INCRBY', P .. 'profile-bytes', #ARGV[2])
local over = redis.call('ZCARD', index) - tonumber(ARGV[5])
if over > 0 then
  for _, victim in ipairs(redis.call('ZRANGE', index, 0, over - 1)) do forget(victim) end
end
return 1
"""

# ARGV: a new secret. The owners' secret: the one set, else this one, set now.
_SECRET = """
redis.call('SET', KEYS[1] .. 'secret', ARGV[1], 'NX')
return redis.call('GET', KEYS[1] .. 'secret')
"""


def _timeouts(url: str) -> dict[str, Any]:
    """The client's timeouts unless the URL's query sets its own (`?socket_timeout=2`)."""
    query = parse_qs(urlsplit(url).query)
    out: dict[str, Any] = {}
    if "socket_connect_timeout" not in query:
        out["socket_connect_timeout"] = CONNECT_TIMEOUT
    if "socket_timeout" not in query:
        out["socket_timeout"] = SOCKET_TIMEOUT
    return out


def _without_timeouts(url: str) -> str:
    """`url` without the timeouts its query may set (the URL's options win over the
    client's arguments)."""
    parts = urlsplit(url)
    query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
             if name not in ("socket_timeout", "socket_connect_timeout")]
    return urlunsplit(parts._replace(query=urlencode(query)))


class RedisStore:
    """Kept answers in Redis, by owner and id, shared by every instance that names it. The
    client connects on first use (a proxy that never keeps anything never connects)."""

    backend = "redis"

    def __init__(self, url: str, limits: StoreLimits,
                 logger: logging.Logger | None = None) -> None:
        redis = _redis()
        if redis is None:
            raise RuntimeError("responses_store_url is a redis:// URL but the 'redis' package "
                               "is not installed: pip install redis")
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self._failed = redis.RedisError  # what a Redis down, slow or refusing raises
        self._redis = redis  # its error classes, for what the client is told
        self.limits = limits
        self.logger = logger or logging.getLogger(__name__)
        # One quick retry on a connection that broke (Redis restarted), none on a timeout.
        retry = Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
        self.client = redis.Redis.from_url(url, retry=retry,
                                           health_check_interval=30, **_timeouts(url))
        # The health check's own client: quick whatever timeouts the URL gives the turns.
        self._probe = redis.Redis.from_url(_without_timeouts(url), retry=Retry(NoBackoff(), 0),
                                           **_timeouts(""))
        self._secret: tuple[bytes, float] | None = None  # and when it was read
        self._scripts = {name: self.client.register_script(source) for name, source in (
            ("put", _PUT), ("recall", _RECALL), ("delete", _DELETE), ("expire", _EXPIRE),
            ("usage", _USAGE), ("secret", _SECRET), ("profile", _PROFILE))}

    def _run(self, name: str, *args: Any) -> Any:
        """A script by name; a Redis that fails or is slow is a 503."""
        try:
            return self._scripts[name](keys=[PREFIX], args=list(args))
        except self._failed as exc:
            raise store_unavailable(_reason(self._redis, exc)) from None

    def _cutoff(self) -> float:
        """Answers kept before this time have expired (0: no age limit)."""
        age = self.limits.max_age_seconds
        return time.time() - age if age else 0.0

    # -- the interface ---------------------------------------------------------------

    def owner(self, api_key: str | None) -> str:
        """The keyed hash of `api_key` under the secret every instance shares: set once
        (SET NX), read again every SECRET_SECONDS (a Redis emptied and given a new secret
        by another instance is followed within that time)."""
        if api_key is None:
            return NO_KEY_OWNER
        now = time.monotonic()
        if self._secret is None or now - self._secret[1] >= SECRET_SECONDS:
            secret = self._run("secret", secrets.token_bytes(32))
            self._secret = (bytes(secret), now)
        return owner_hash(self._secret[0], api_key)

    def put(self, owner: str, kept: StoredResponse) -> bool | None:
        """Keep an answer, then let go of what is past the limits (this owner's only)."""
        items = orjson.dumps(kept.items)
        limits = self.limits
        try:
            self._scripts["put"](keys=[PREFIX], args=[
                self._cutoff(), owner, kept.id, kept.previous or "", time.time(), len(items),
                len(items) + len(kept.body), items, kept.body,
                int(limits.max_age_seconds * 1000), limits.max_responses,
                limits.max_bytes_per_key, limits.max_bytes])
            return True
        except self._redis.TimeoutError as exc:  # sent, maybe run: a frozen Redis runs it on waking
            self.logger.warning("response %s perhaps not kept: the Redis store did not answer "
                                "in time: %s", kept.id, exc)
            return None
        except Exception as exc:  # a write that fails is logged, never raised
            self.logger.warning("response %s not kept: the Redis store failed: %s", kept.id, exc)
            return False

    def get(self, owner: str, response_id: str) -> bytes | None:
        """The kept answer's body, or None."""
        try:
            created, body = self.client.hmget(_answer(owner, response_id), "created", "body")
        except self._failed as exc:
            raise store_unavailable(_reason(self._redis, exc)) from None
        if created is None or float(created) < self._cutoff():
            return None
        return bytes(body)

    def recall(self, owner: str, response_id: str,
               max_bytes: int = 0) -> list[dict[str, Any]] | None:
        """The conversation through the answer, oldest first, in one script."""
        reply = self._run("recall", owner, response_id, self._cutoff(), max_bytes, MAX_CHAIN)
        if reply[0] == b"missing":
            return None
        if reply[0] == b"large":
            raise conversation_too_large(int(reply[1]), max_bytes)
        return [item for items in reply[2:] for item in orjson.loads(items)]

    def delete(self, owner: str, response_id: str) -> bool:
        """Forget an answer; False when the owner has no such answer."""
        return bool(self._run("delete", owner, response_id, self._cutoff()))

    def expire(self) -> int:
        """Let go of the answers past the age limit (Redis drops their hashes itself)."""
        return int(self._run("expire", self._cutoff()))

    def usage(self, owner: str) -> Usage:
        """The owner's count and bytes, and every owner's bytes (unexpired answers)."""
        count, held, total = self._run("usage", owner, self._cutoff())
        return Usage(int(count), int(held), int(total))

    def put_profile(self, key: str, profile: bytes, ttl_seconds: float) -> bool:
        """Keep an upstream profile for `ttl_seconds` (SET with its expiry, indexed: the
        expired and those past the cap let go, its bytes counted in the total)."""
        if len(profile) > MAX_PROFILE_BYTES:
            return False
        try:
            self._scripts["profile"](keys=[PREFIX], args=[
                key, profile, max(1, int(ttl_seconds * 1000)), int(time.time() * 1000),
                MAX_PROFILES])
        except self._failed as exc:
            self.logger.warning("upstream profile not kept: %s", type(exc).__name__)
            return False
        return True

    def get_profile(self, key: str) -> bytes | None:
        """The profile under `key`, or None (expired, never kept, or Redis failing)."""
        try:
            value = self.client.get(f"{PREFIX}profile:{key}")
        except self._failed:
            return None
        return value if isinstance(value, bytes) else None

    def check(self) -> None:
        """A PING with the short timeouts; a Redis down or slow is the 503."""
        try:
            self._probe.ping()
        except self._failed as exc:
            raise store_unavailable(_reason(self._redis, exc)) from None


def _answer(owner: str, response_id: str) -> str:
    """The key of an owner's answer (as the scripts name it)."""
    return f"{PREFIX}answer:{owner}:{response_id}"


def _reason(redis: Any, exc: Exception) -> str:
    """What went wrong, for the client: never Redis's address (redis-py's messages name it).
    `redis`: the package, whose error classes tell."""
    if isinstance(exc, redis.TimeoutError):
        return "it did not answer in time"
    if isinstance(exc, redis.AuthenticationError):
        return "it refused the proxy's credentials"
    if isinstance(exc, redis.ConnectionError):
        return "it cannot be reached"
    return "it answered with an error"


def check_url(url: str) -> str | None:
    """Why a `redis://[:password@]host:port/db` URL cannot be used (None: it can), by the
    installed `redis` package's own reading of it."""
    if importlib.util.find_spec("redis") is None:
        return "is a Redis URL but the 'redis' package is not installed: pip install redis"
    from redis.connection import parse_url

    shown = mask_url(url)
    try:
        parts = urlsplit(url)
        parse_url(url)  # the query's options (socket_timeout=…)
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError as exc:
        return f"{shown}: {exc}"
    if not parts.hostname or not re.fullmatch(r"(/\d*)?", parts.path):
        return f"must be redis://[:password@]host:port/db, not {shown}"
    return None


def _open(url: str, limits: StoreLimits, logger: logging.Logger) -> RedisStore:
    return RedisStore(url, limits, logger)


BACKEND = StoreBackend(("redis", "rediss"), check_url, _open)
