"""Run by `test_store_io`: a gevent-patched process (as gunicorn's worker is) where one
greenlet recalls a conversation the SQLite file's lock holds up, while another ticks. Prints
the order of events as JSON. `python -m tests.store_gevent_probe PATH BUSY_SECONDS [plain]`:
with `plain`, store calls run on the hub (as before the thread pool), for the negative case."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402

from proxy.base.errors import ProxyError  # noqa: E402
from proxy.fronts import StoredResponse  # noqa: E402
from proxy.shell.store import sqlite as store_sqlite  # noqa: E402
from proxy.shell.store.interface import StoreLimits  # noqa: E402

# Holds an exclusive lock on the file (readers wait on it, even in WAL) until told to let go.
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA locking_mode=EXCLUSIVE")
db.execute("BEGIN EXCLUSIVE")
db.execute("SELECT count(*) FROM answers").fetchall()
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
db.close()
"""


def main(path: str, busy: float, plain: bool) -> None:
    if plain:
        store_sqlite.background.off_the_hub = lambda work, *args: work(*args)
    store = store_sqlite.SqliteStore(path, StoreLimits(), busy_timeout=busy)
    owner = store.owner("sk-probe")
    previous = None
    for i in range(200):  # a long conversation
        store.put(owner, StoredResponse(f"r{i}", previous, [{"type": "message", "n": i}], b"{}"))
        previous = f"r{i}"
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    assert locker.stdout.readline().strip() == b"locked"
    events: list[str] = []

    def recall() -> None:
        events.append("recall started")
        try:
            events.append(f"recalled {len(store.recall(owner, previous))} items")
        except ProxyError as error:
            events.append(f"recall failed: {error.code}")

    def beat() -> None:
        for _ in range(3):
            gevent.sleep(0.01)
            events.append("heartbeat")
        events.append("lock released")
        locker.stdin.write(b"go\n")
        locker.stdin.flush()
        locker.wait()

    gevent.joinall([gevent.spawn(recall), gevent.spawn(beat)])
    print(json.dumps(events))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3:] == ["plain"])
