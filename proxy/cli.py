"""The command line of `python app.py` and of the single file: serve (gunicorn; `--dev`:
Werkzeug's server), or the operating command its first argument names (`doctor`, `replay`,
`healthcheck`). The one module that knows every command; the shell knows none of the tools.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .shell.config_load import load_config
from .shell.server.serve import config_or_exit, healthcheck, serve

SERVER_HELP = """
server (python app.py, toolcall-proxy.pyz):
  gunicorn with gevent workers, one per core; environment: GUNICORN_WORKERS,
  GUNICORN_WORKER_CONNECTIONS, GUNICORN_WORKER_CLASS, GUNICORN_GRACEFUL_TIMEOUT,
  GUNICORN_LOG_LEVEL, GUNICORN_HEAD_TIMEOUT (seconds for a request's head, default 10),
  GUNICORN_BIND (default: host:port of the settings; never beyond loopback without nginx)
  --dev        Werkzeug's development server instead (one process, threads; for debugging)
  healthcheck  exit 0 when the proxy configured here answers /proxy/health, else 1"""


def main(argv: Sequence[str] | None = None) -> int:
    """`python app.py [--dev] [flags]`, or one of the operating commands (`doctor`,
    `replay`, `healthcheck`) when the first argument names it."""
    args = list(sys.argv[1:] if argv is None else argv)
    # The tools are imported when named: serving loads neither (nor what they import).
    if args[:1] == ["doctor"] and "--score" in args[1:]:
        from .diagnose.score import main as score

        return score(args[1:])
    if args[:1] == ["doctor"]:
        from .diagnose.doctor import main as doctor

        return doctor(args[1:])
    if args[:1] == ["replay"]:
        from .diagnose.replay import main as replay

        return replay(args[1:])
    if args[:1] == ["healthcheck"]:
        return healthcheck(args[1:])
    dev = "--dev" in args
    args = [arg for arg in args if arg != "--dev"]
    if "-h" in args or "--help" in args:
        try:
            load_config(["--help"])
        finally:
            print(SERVER_HELP)
    return serve(config_or_exit(args), dev=dev)
