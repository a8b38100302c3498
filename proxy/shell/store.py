"""The store of kept answers (the Responses API's `store: true`): SQLite, one file that every
worker shares, with a retention limit by age and by count. Only the shell does this I/O; the
front says what to keep (`fronts.Kept`) and reads conversations through `recall`."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from ..errors import ProxyError
from ..fronts import Kept

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kept (
    id TEXT PRIMARY KEY, previous TEXT, created REAL NOT NULL, items BLOB NOT NULL,
    body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS kept_created ON kept (created);
"""
MAX_CHAIN = 100_000  # links followed back through `previous` before giving up (a cycle)


def default_path() -> str:
    """Where the store lives unless configured: the user's state directory."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return os.path.join(state, "toolcall-proxy", "responses.sqlite3")


def _unavailable(exc: sqlite3.Error) -> ProxyError:
    return ProxyError(500, f"The response store cannot be read: {exc}.", type_="server_error",
                      code="store_unavailable")


class KeptStore:
    """Kept answers by id. Opened on first use (a proxy that never keeps anything never
    creates the file); `:memory:` keeps them in this process only."""

    def __init__(self, path: str, max_age_seconds: float, max_count: int,
                 logger: logging.Logger | None = None) -> None:
        self.path = path or default_path()
        self.max_age = max_age_seconds
        self.max_count = max_count
        self.logger = logger or logging.getLogger(__name__)
        self._lock = threading.Lock()
        self._memory: sqlite3.Connection | None = None
        self._ready = False

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection for one operation (one per call: workers and threads never share)."""
        if self.path == ":memory:":
            with self._lock:
                if self._memory is None:
                    self._memory = sqlite3.connect(":memory:", check_same_thread=False)
                    self._memory.executescript(_SCHEMA)
                with self._memory:
                    yield self._memory
            return
        if not self._ready:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10)
        try:
            if not self._ready:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
                self._ready = True
            with db:
                yield db
        finally:
            db.close()

    def _fresh_after(self) -> float:
        """Answers kept before this time have expired."""
        return time.time() - self.max_age if self.max_age else float("-inf")

    def put(self, kept: Kept) -> bool:
        """Keep an answer, and let go of those past the retention limits. A store that cannot
        be written is logged, never the client's failure: False."""
        try:
            with self._db() as db:
                db.execute("INSERT OR REPLACE INTO kept VALUES (?, ?, ?, ?, ?)",
                           (kept.id, kept.previous, time.time(), orjson.dumps(kept.items),
                            kept.body))
                if self.max_age:
                    db.execute("DELETE FROM kept WHERE created < ?", (self._fresh_after(),))
                if self.max_count:
                    db.execute("DELETE FROM kept WHERE id IN (SELECT id FROM kept ORDER BY "
                               "created DESC LIMIT -1 OFFSET ?)", (self.max_count,))
            return True
        except (sqlite3.Error, OSError) as exc:
            self.logger.warning("response %s not kept: the store at %s failed: %s", kept.id,
                                self.path, exc)
            return False

    def _row(self, db: sqlite3.Connection, key: str, columns: str) -> Any:
        return db.execute(f"SELECT {columns} FROM kept WHERE id = ? AND created >= ?",
                          (key, self._fresh_after())).fetchone()

    def body(self, key: str) -> bytes | None:
        """A kept answer as GET returns it, or None."""
        try:
            with self._db() as db:
                row = self._row(db, key, "body")
        except (sqlite3.Error, OSError) as exc:
            raise _unavailable(exc) from None
        return bytes(row[0]) if row else None

    def recall(self, key: str) -> list[dict[str, Any]] | None:
        """The conversation through the answer `key`: the items of every answer it continued
        from, oldest first, then its own; None when it, or one before it, is not kept."""
        chain: list[bytes] = []
        try:
            with self._db() as db:
                current: str | None = key
                while current is not None and len(chain) < MAX_CHAIN:
                    row = self._row(db, current, "previous, items")
                    if row is None:
                        return None
                    chain.append(row[1])
                    current = row[0]
        except (sqlite3.Error, OSError) as exc:
            raise _unavailable(exc) from None
        return [item for items in reversed(chain) for item in orjson.loads(items)]

    def delete(self, key: str) -> bool:
        """Forget an answer; False when it was not kept."""
        try:
            with self._db() as db:
                gone = db.execute("DELETE FROM kept WHERE id = ? AND created >= ?",
                                  (key, self._fresh_after())).rowcount
        except (sqlite3.Error, OSError) as exc:
            raise _unavailable(exc) from None
        return gone > 0
