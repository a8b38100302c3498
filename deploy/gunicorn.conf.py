"""gunicorn settings for the proxy: `gunicorn -c deploy/gunicorn.conf.py app:app`.

gevent workers: a buffered tool turn waits on upstream for minutes, and each open stream is
then one greenlet, not one thread or process (see bench/RESULTS.md for the comparison).
Listen address and counts come from the environment, the same variables the app reads.
"""

import os
import shutil
import tempfile

_host = os.environ.get("TOOLCALL_PROXY_HOST", "127.0.0.1")
_port = os.environ.get("TOOLCALL_PROXY_PORT", "8003")

bind = os.environ.get("GUNICORN_BIND", f"{_host}:{_port}")
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gevent")
workers = int(os.environ.get("GUNICORN_WORKERS", "2"))
worker_connections = int(os.environ.get("GUNICORN_WORKER_CONNECTIONS", "4000"))
# Long-lived streams are normal here; the worker heartbeat is independent of them under gevent.
timeout = 120
# On stop or reload, a worker finishes its requests for this long; tool turns still waiting
# on the model 5 s before the end are ended with a retryable 503 (in the stream, then
# [DONE]) rather than cut (see post_worker_init). Keep it below systemd's TimeoutStopSec.
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
keepalive = 75
# The proxy writes its own structured line per request; gunicorn's access log would repeat it.
accesslog = None
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
# gunicorn 24+ opens a control socket in $HOME/.gunicorn: read-only under the systemd unit's
# ProtectSystem=strict, and shared by every instance of the same user. Not used here.
control_socket_disable = True


def on_starting(server):  # noqa: ANN001, ANN201 - gunicorn's hook signature
    """Give the workers one fresh directory for their Prometheus figures, so /proxy/metrics
    reports the whole server (prometheus_client multi-process mode)."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path, exist_ok=True)
    else:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="toolcall-proxy-prom-")


def post_worker_init(worker):  # noqa: ANN001, ANN201
    """Watch for the worker being told to stop (SIGTERM on stop or reload sets `alive` to
    False), and then have the app drain: waiting requests end with a retryable error before
    the graceful timeout would cut them without one."""
    import threading  # a greenlet under the gevent worker (patched), a thread otherwise
    import time

    proxy = worker.wsgi.extensions.get("toolcall_proxy")
    if proxy is None:
        return

    def watch() -> None:
        while worker.alive:
            time.sleep(0.5)
        proxy.drain(max(1.0, worker.cfg.graceful_timeout - 5))

    threading.Thread(target=watch, daemon=True, name="drain-watch").start()


def child_exit(server, worker):  # noqa: ANN001, ANN201
    """A worker's live gauges leave with it."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
