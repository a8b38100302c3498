"""gunicorn settings for the proxy: `gunicorn -c deploy/gunicorn.conf.py app:app`.

The settings live in proxy/shell/server/serve.py, shared with `python app.py` and the single file:
gevent workers (one per core; GUNICORN_WORKERS), listening on the proxy's host and port (the
same TOOLCALL_PROXY_* variables and config file the app reads), the app drained on stop or
reload, and gunicorn's own refusals (bad request line, headers too large) in OpenAI's error
envelope.
"""

import os
import sys

# The repository root, for `proxy` (gunicorn puts only the working directory on sys.path).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from proxy.shell.server.serve import settings_or_exit

globals().update(settings_or_exit())
