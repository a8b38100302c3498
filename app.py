"""Tool Call Proxy entry point.

    python app.py [--host H] [--port P] [--upstream URL] [--config FILE]
    python app.py doctor [--upstream URL] [--model M] [--json]     (probe a live vLLM)
    python app.py replay FILE [--config FILE] [--json]             (replay a captured exchange)
    gunicorn -c deploy/gunicorn.conf.py app:app     (settings from TOOLCALL_PROXY_* variables)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from werkzeug.serving import WSGIRequestHandler, run_simple

from proxy.config import Config
from proxy.config_load import ConfigError, load_config
from proxy.shell.routes import create_app


class QuietRequestHandler(WSGIRequestHandler):
    """Werkzeug's request handler without its access line per request: that line holds the
    query string (`?api-key=…`), and the proxy writes its own line without it. Werkzeug's
    startup and error lines are kept."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Write nothing: the proxy's own log line covers the request."""


def _config_or_exit(argv: Sequence[str]) -> Config:
    try:
        return load_config(argv)
    except ConfigError as exc:
        print(f"toolcall-proxy: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the proxy with Werkzeug's threaded server (never the debugger or the reloader),
    or one of the operating commands (`doctor`, `replay`) when the first argument names it."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["doctor"]:
        from proxy.doctor import main as doctor

        return doctor(args[1:])
    if args[:1] == ["replay"]:
        from proxy.replay import main as replay

        return replay(args[1:])
    config = _config_or_exit(args)
    print(f"toolcall-proxy listening on http://{config.host}:{config.port} "
          f"→ {config.upstream}", file=sys.stderr)
    run_simple(config.host, config.port, create_app(config), threaded=True,
               use_reloader=False, use_debugger=False, request_handler=QuietRequestHandler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
else:
    app = create_app(_config_or_exit(()))
