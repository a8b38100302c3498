"""gunicorn's gevent worker held at a gate before it loads the app, for the tests of what the
server does while no worker can serve yet (GUNICORN_WORKER_CLASS=tests.gated_worker.Gated).
Imports nothing the master would not: the gate is a file (TOOLCALL_TEST_GATE), and each
worker held at it says so in a file beside it."""

from __future__ import annotations

import os
import time

from gunicorn.workers.ggevent import GeventWorker


class Gated(GeventWorker):
    """The gevent worker (patched as gunicorn patches it), loading the app only once the file
    TOOLCALL_TEST_GATE exists; `GATE.waiting.PID` says it is held."""

    def load_wsgi(self) -> None:
        gate = os.environ["TOOLCALL_TEST_GATE"]
        with open(f"{gate}.waiting.{os.getpid()}", "w"):
            pass
        while not os.path.exists(gate):
            if not self.alive or os.getppid() != self.ppid:  # stopped, or the master is gone
                raise SystemExit(0)
            time.sleep(0.05)  # gevent's sleep: the worker is patched by now
        super().load_wsgi()
