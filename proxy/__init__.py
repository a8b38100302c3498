"""Tool Call Proxy: an OpenAI-compatible proxy in front of vLLM that makes tool calls arrive.

The package is a house of rooms (folders) on floors: a module imports from its own room and
the rooms below it, never from one above, and no import runs in a circle
(tests/house/test_import_graph.py reads every import). `FLOORS` is that order, bottom first.
"""

__version__ = "0.1.0"

FLOORS = (
    "proxy",  # this module: the package's name and version
    "proxy.base",  # primitives: the settings' value, errors, SSE, ids, JSON depth, decoding
    "proxy.toolcalls",  # the extraction and repair engine
    "proxy.turn",  # the turn core: plan, normalise, decide, wait, stream
    "proxy.fronts",  # one module or package per agent API
    "proxy.telemetry",  # what the proxy tells: log line, metrics, status and its page
    "proxy.shell",  # the HTTP shell, in rooms of its own:
    "proxy.shell.runtime",  # work beside a request, the client's socket
    "proxy.shell.upstream",  # the model servers: client, replicas, the choice of one
    "proxy.shell.store",  # kept answers: the interface, one module per backend
    "proxy.shell.recorder",  # the status page's records: bounded rings, a store of its own
    "proxy.shell.config_load",  # the settings read from file, environment and flags
    "proxy.shell.driver",  # a request's trip upstream: the turn, the passthrough
    "proxy.shell.web",  # the HTTP app: its objects, views, handlers and endpoints
    "proxy.shell.server",  # the server process: gunicorn (or Werkzeug), readiness, the check
    "proxy.diagnose",  # the operator's tools: doctor, replay
    "proxy.cli",  # the command line
)
