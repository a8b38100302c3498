"""The SQLite `ResponseStore`: one file that every worker of one box shares (WAL), or
`:memory:` for one process. A conversation is recalled with one recursive query that sums
its size before any item is read."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson

from ...base.errors import ProxyError
from ...fronts import StoredResponse
from ..runtime import background
from .interface import (
    MAX_CHAIN,
    MAX_PROFILE_BYTES,
    MAX_PROFILES,
    StoreBackend,
    StoreLimits,
    Usage,
    conversation_too_large,
    owner_hash,
    store_unavailable,
)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    owner TEXT NOT NULL, id TEXT NOT NULL, previous TEXT, created REAL NOT NULL,
    size INTEGER NOT NULL, bytes INTEGER NOT NULL, items BLOB NOT NULL, body BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS answers_id ON answers (owner, id);
CREATE INDEX IF NOT EXISTS answers_owner_created ON answers (owner, created);
CREATE INDEX IF NOT EXISTS answers_created ON answers (created);
CREATE TABLE IF NOT EXISTS owners (
    owner TEXT PRIMARY KEY, count INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS answers_in AFTER INSERT ON answers BEGIN
    INSERT INTO owners VALUES (new.owner, 1, new.bytes) ON CONFLICT (owner)
        DO UPDATE SET count = count + 1, bytes = bytes + new.bytes;
END;
CREATE TRIGGER IF NOT EXISTS answers_out AFTER DELETE ON answers BEGIN
    UPDATE owners SET count = count - 1, bytes = bytes - old.bytes WHERE owner = old.owner;
END;
CREATE TABLE IF NOT EXISTS secret (k INTEGER PRIMARY KEY CHECK (k = 0), value BLOB NOT NULL);
INSERT OR IGNORE INTO secret VALUES (0, randomblob(32));
DROP TABLE IF EXISTS kept;
CREATE TABLE IF NOT EXISTS profiles (key TEXT PRIMARY KEY, value BLOB NOT NULL,
    expires REAL NOT NULL);
"""
# `size`: the bytes of `items` (what a continuation loads); `bytes`: items and body (what
# the caps count); `owners`: each owner's count and bytes, kept by the triggers (the caps
# read them without a scan). `kept` was the table of earlier versions, whose answers had no
# owner.

_RECALL = """
WITH RECURSIVE chain(rid, previous, depth, size) AS (
    SELECT rowid, previous, 0, size FROM answers
        WHERE owner = :owner AND id = :id AND created >= :fresh
    UNION ALL
    SELECT a.rowid, a.previous, c.depth + 1, a.size FROM chain c JOIN answers a
        ON a.owner = :owner AND a.id = c.previous AND a.created >= :fresh
        WHERE c.depth < :depth),
total(bytes) AS (SELECT sum(size) FROM chain)
SELECT c.previous, t.bytes, CASE WHEN :max = 0 OR t.bytes <= :max THEN a.items END
    FROM chain c JOIN total t JOIN answers a ON a.rowid = c.rid ORDER BY c.depth DESC
"""
# The owner's oldest answers, never the one just kept (`:keep`): those to let go.
_OLDEST = """
SELECT rowid, bytes FROM answers WHERE owner = :owner AND rowid != :keep
    ORDER BY created, rowid LIMIT :limit
"""


def default_path() -> str:
    """Where the SQLite store lives unless configured: the user's state directory."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return os.path.join(state, "toolcall-proxy", "responses.sqlite3")


def private_file(path: str, *, create: bool = True) -> None:
    """`path` readable by this user only (0600; with `create`, made so before SQLite opens
    it, in a folder made 0700): kept answers are prompts and answers. An existing file is
    narrowed to 0600 too; its folder, when not the proxy's own making, is left as it is."""
    if create:
        folder = Path(path).parent
        if not folder.exists():
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        elif path == default_path():
            folder.chmod(0o700)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    with contextlib.suppress(FileNotFoundError):
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o600)


class SqliteStore:
    """Kept answers in SQLite, by owner and id. Opened on first use (a proxy that never
    keeps anything never creates the file). Every call runs off gevent's hub
    (`background.off_the_hub`): SQLite's waits and reads never stall the worker."""

    backend = "sqlite"

    def __init__(self, path: str, limits: StoreLimits,
                 logger: logging.Logger | None = None, busy_timeout: float = 10.0) -> None:
        self.path = path
        self.limits = limits
        self.logger = logger or logging.getLogger(__name__)
        self.busy_timeout = busy_timeout
        self._lock = background.native_lock()  # the :memory: connection's
        self._memory: sqlite3.Connection | None = None
        self._ready = False
        self._secret: bytes | None = None

    # -- connections -------------------------------------------------------------------

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection for one operation (one per call: workers and threads never share),
        in a transaction."""
        if self.path == ":memory:":
            with self._lock:
                if self._memory is None:
                    self._memory = sqlite3.connect(":memory:", check_same_thread=False)
                    self._memory.executescript(_SCHEMA)
                with self._memory:
                    yield self._memory
            return
        if not self._ready:
            private_file(self.path)
        db = sqlite3.connect(self.path, timeout=self.busy_timeout)
        try:
            if not self._ready:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
                for suffix in ("-wal", "-shm"):  # made with the file's mode; made sure of
                    private_file(self.path + suffix, create=False)
                self._ready = True
            with db:
                yield db
        finally:
            db.close()

    def _read(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """`operation` on a connection, off the hub; a store that fails is a 503."""
        return background.off_the_hub(self._read_here, operation)

    def _read_here(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        try:
            with self._db() as db:
                return operation(db)
        except sqlite3.Error as exc:
            raise store_unavailable(str(exc)) from None  # sqlite's words name no path
        except OSError as exc:
            raise store_unavailable(exc.strerror or "it cannot be opened") from None

    def _fresh_after(self) -> float:
        """Answers kept before this time have expired."""
        age = self.limits.max_age_seconds
        return time.time() - age if age else float("-inf")

    # -- the interface ---------------------------------------------------------------

    def owner(self, api_key: str | None) -> str:
        """The keyed hash of `api_key` under this store's secret (made with the store)."""
        if api_key is None:
            return owner_hash(b"", None)
        if self._secret is None:
            self._secret = bytes(self._read(
                lambda db: db.execute("SELECT value FROM secret").fetchone()[0]))
        return owner_hash(self._secret, api_key)

    def put(self, owner: str, kept: StoredResponse) -> bool:
        """Keep an answer, then let go of what is past the limits (this owner's only)."""
        return background.off_the_hub(self._put_here, owner, kept)

    def _put_here(self, owner: str, kept: StoredResponse) -> bool:
        items = orjson.dumps(kept.items)
        try:
            with self._db() as db:
                db.execute("DELETE FROM answers WHERE owner = ? AND id = ?", (owner, kept.id))
                keep = db.execute(
                    "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (owner, kept.id, kept.previous, time.time(), len(items),
                     len(items) + len(kept.body), items, kept.body)).lastrowid
                self._let_go(db, owner, keep)
            return True
        except (sqlite3.Error, OSError) as exc:
            self.logger.warning("response %s not kept: the store at %s failed: %s", kept.id,
                                self.path, exc)
            return False

    def _let_go(self, db: sqlite3.Connection, owner: str, keep: int | None) -> None:
        """Expired answers, and the owner's oldest past its count and byte caps (the
        total's included: what other owners leave). Reads only the oldest it lets go."""
        limits = self.limits
        self._sweep(db)
        count, mine, everyone = self._usage(db, owner)
        if limits.max_responses and count > limits.max_responses:
            rows = db.execute(_OLDEST, {"owner": owner, "keep": keep,
                                        "limit": count - limits.max_responses}).fetchall()
            self._forget(db, rows)
            mine -= sum(size for _, size in rows)
        cap = limits.max_bytes_per_key
        if limits.max_bytes:
            room = max(0, limits.max_bytes - (everyone - mine))
            cap = min(cap, room) if cap else room
        while cap and mine > cap:
            rows = db.execute(_OLDEST, {"owner": owner, "keep": keep, "limit": 64}).fetchall()
            if not rows:
                return
            gone = []
            for rowid, size in rows:
                if mine <= cap:
                    break
                gone.append((rowid, size))
                mine -= size
            self._forget(db, gone)

    @staticmethod
    def _forget(db: sqlite3.Connection, rows: list[tuple[int, int]]) -> None:
        db.executemany("DELETE FROM answers WHERE rowid = ?", [(rowid,) for rowid, _ in rows])

    def _sweep(self, db: sqlite3.Connection) -> int:
        """Let go of the expired answers (an index seek when there are none)."""
        if not self.limits.max_age_seconds:
            return 0
        return db.execute("DELETE FROM answers WHERE created < ?",
                          (self._fresh_after(),)).rowcount

    @staticmethod
    def _usage(db: sqlite3.Connection, owner: str) -> tuple[int, int, int]:
        """The owner's count and bytes, and every owner's bytes."""
        row = db.execute("SELECT coalesce(sum(CASE WHEN owner = :o THEN count END), 0), "
                         "coalesce(sum(CASE WHEN owner = :o THEN bytes END), 0), "
                         "coalesce(sum(bytes), 0) + (SELECT coalesce(sum(length(value)), 0) "
                         "FROM profiles) FROM owners", {"o": owner}).fetchone()
        return row[0], row[1], row[2]

    def get(self, owner: str, response_id: str) -> bytes | None:
        """The kept answer's body, or None."""
        row = self._read(lambda db: db.execute(
            "SELECT body FROM answers WHERE owner = ? AND id = ? AND created >= ?",
            (owner, response_id, self._fresh_after())).fetchone())
        return bytes(row[0]) if row else None

    def recall(self, owner: str, response_id: str,
               max_bytes: int = 0) -> list[dict[str, Any]] | None:
        """The conversation through the answer, oldest first, in one query."""
        params = {"owner": owner, "id": response_id, "fresh": self._fresh_after(),
                  "depth": MAX_CHAIN, "max": max_bytes}
        rows = self._read(lambda db: db.execute(_RECALL, params).fetchall())
        if not rows or rows[0][0] is not None:  # not kept, or a link is missing
            return None
        if max_bytes and rows[0][1] > max_bytes:
            raise conversation_too_large(rows[0][1], max_bytes)
        return [item for row in rows for item in orjson.loads(row[2])]

    def delete(self, owner: str, response_id: str) -> bool:
        """Forget an answer; False when the owner has no such answer."""
        return self._read(lambda db: db.execute(
            "DELETE FROM answers WHERE owner = ? AND id = ? AND created >= ?",
            (owner, response_id, self._fresh_after())).rowcount) > 0

    def expire(self) -> int:
        """Let go of the answers past the age limit (and of expired profiles)."""
        def sweep(db: sqlite3.Connection) -> int:
            db.execute("DELETE FROM profiles WHERE expires <= ?", (time.time(),))
            return self._sweep(db)
        return self._read(sweep)

    def usage(self, owner: str) -> Usage:
        """The owner's count and bytes, and every owner's bytes (expired answers swept
        first)."""
        def read(db: sqlite3.Connection) -> Usage:
            self._sweep(db)
            return Usage(*self._usage(db, owner))
        return self._read(read)

    def put_profile(self, key: str, profile: bytes, ttl_seconds: float) -> bool:
        """Keep an upstream profile until `ttl_seconds` from now (replacing the last), the
        expired swept and the profiles past the cap let go."""
        if len(profile) > MAX_PROFILE_BYTES:
            return False

        def write(db: sqlite3.Connection) -> None:
            now = time.time()
            db.execute("DELETE FROM profiles WHERE expires <= ?", (now,))
            db.execute("INSERT OR REPLACE INTO profiles VALUES (?, ?, ?)",
                       (key, profile, now + ttl_seconds))
            db.execute("DELETE FROM profiles WHERE key IN (SELECT key FROM profiles "
                       "ORDER BY expires DESC LIMIT -1 OFFSET ?)", (MAX_PROFILES,))
        try:
            self._read(write)
        except ProxyError as exc:
            self.logger.warning("upstream profile not kept: %s", exc.message)
            return False
        return True

    def get_profile(self, key: str) -> bytes | None:
        """The profile under `key` unless expired; None when the store cannot be read."""
        try:
            rows = self._read(lambda db: db.execute(
                "SELECT value FROM profiles WHERE key = ? AND expires > ?",
                (key, time.time())).fetchall())
        except ProxyError:
            return None
        return bytes(rows[0][0]) if rows else None

    def check(self) -> None:
        """Reads one row; a file not yet created is fine (nothing is kept yet)."""
        if self.path != ":memory:" and not self._ready and not Path(self.path).exists():
            return
        self._read(lambda db: db.execute("SELECT 1 FROM answers LIMIT 1").fetchall())


def check_url(url: str) -> str | None:
    """Why a `sqlite://` URL cannot be used (None: it can): an absolute path or `:memory:`."""
    rest = url.removeprefix("sqlite://")
    if rest != ":memory:" and not rest.startswith("/"):
        return f"must be sqlite:///absolute/path or sqlite://:memory:, not {url!r}"
    return None


def _open(url: str, limits: StoreLimits, logger: logging.Logger) -> SqliteStore:
    return SqliteStore(url.removeprefix("sqlite://"), limits, logger)


BACKEND = StoreBackend(("sqlite",), check_url, _open)
