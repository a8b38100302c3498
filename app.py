"""Tool Call Proxy entry point.

    python app.py [--host H] [--port P] [--upstream URL] [--config FILE]   (gunicorn, gevent)
    python app.py --dev …                      (Werkzeug's server instead, for debugging)
    python app.py doctor [--upstream URL] [--model M] [--json]     (probe a live vLLM)
    python app.py replay FILE [--config FILE] [--json]             (replay a captured exchange)
    python app.py healthcheck                  (exit 0 when the configured proxy answers)
    gunicorn -c deploy/gunicorn.conf.py app:app     (settings from TOOLCALL_PROXY_* variables)
"""

from __future__ import annotations

import sys

from proxy.cli import main

if __name__ == "__main__":
    sys.exit(main())
else:
    from proxy.shell.server.serve import config_or_exit
    from proxy.shell.web.app import create_app

    app = create_app(config_or_exit(()))
