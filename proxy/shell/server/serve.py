"""Running the proxy: gunicorn (or `--dev`, Werkzeug) serving the app, and the health check.

Production by default: gunicorn with gevent workers (gunicorn's own application class), with
the settings `deploy/gunicorn.conf.py` reads from here, so that both serve alike. `--dev`
gives Werkzeug's server instead, for debugging. The gunicorn layer's own refusals (a bad
request line, headers too large or too many) reach clients in OpenAI's error envelope.
"""

from __future__ import annotations

import gc
import ipaddress
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from gunicorn import util as gunicorn_util
from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter
from werkzeug.serving import WSGIRequestHandler

from ...base.config import Config, mask_url
from ...base.errors import ProxyError
from ..config_load import ConfigError, load_config
from ..web.run_dir import fresh_run_dir, unsafe_run_dir
from .accepting import BalancedAccepts, leave_seat, take_seat
from .head_wait import HEAD_SECONDS, HeadTimeouts
from .readiness import bind_unopened, open_listeners, take_notify_socket
from .request import install as install_plain_heads
from .response import OneSendResponses, can_choose
from .settled import SettledConfig

_PROM_DIR_PREFIX = "toolcall-proxy-prom-"
GC_YOUNG = 10_000  # allocations between two collections of the youngest generation


def config_or_exit(argv: Sequence[str]) -> Config:
    """The settings for this process, or one line on stderr and exit status 2."""
    try:
        return load_config(argv)
    except ConfigError as exc:
        _fail(str(exc))


def _fail(message: str) -> NoReturn:
    print(f"toolcall-proxy: {message}", file=sys.stderr)
    raise SystemExit(2)


# -- gunicorn settings, shared with deploy/gunicorn.conf.py ------------------------------------


def gunicorn_settings(config: Config, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """gunicorn's settings for serving `config`: listen address from the proxy's settings,
    counts from the `GUNICORN_*` environment, and the hooks that drain on stop."""
    workers = _int_env(environ, "GUNICORN_WORKERS", _cores())
    _one_process_store(config, workers)
    run_dir = environ.get("PROMETHEUS_MULTIPROC_DIR")
    why = unsafe_run_dir(run_dir) if run_dir else None
    if why:
        raise ConfigError(f"PROMETHEUS_MULTIPROC_DIR {run_dir} {why}: the workers' figures "
                          "and status rings must be this user's alone (unset it, or name a "
                          "directory of this user's that no one else may write to)")
    return {
        "bind": [environ.get("GUNICORN_BIND") or _address(config.host, config.port),
                 *_second_port(config)],
        # gevent: a tool turn waits on upstream for minutes, and each open stream is then one
        # greenlet, not one thread or process (bench/RESULTS.md compares them).
        "worker_class": _worker_class(environ.get("GUNICORN_WORKER_CLASS") or "gevent",
                                      _int_env(environ, "GUNICORN_HEAD_TIMEOUT", HEAD_SECONDS)),
        "workers": workers,
        "worker_connections": _int_env(environ, "GUNICORN_WORKER_CONNECTIONS", 4000),
        # Long-lived streams are normal; the worker heartbeat is independent of them (gevent).
        "timeout": 120,
        # On stop or reload, a worker finishes its requests for this long; tool turns still
        # waiting on the model 5 s before the end are ended with a retryable 503 (in the
        # stream, then [DONE]) rather than cut. Keep it below systemd's TimeoutStopSec.
        "graceful_timeout": _int_env(environ, "GUNICORN_GRACEFUL_TIMEOUT", 30),
        # Between requests; a request head has GUNICORN_HEAD_TIMEOUT (head_wait.py).
        "keepalive": 75,
        # gunicorn's own parser always: with "auto" an importable gunicorn_h1c (C) would take
        # over and accept heads this one refuses (bare LF, folding), with other statuses and
        # messages (measured in stop 52's note: ~60 K instructions a request, not worth it).
        "http_parser": "python",
        # The proxy writes its own structured line per request; an access log would repeat it.
        "accesslog": None,
        "errorlog": "-",
        "loglevel": environ.get("GUNICORN_LOG_LEVEL") or "info",
        # gunicorn 24+ opens a control socket in $HOME/.gunicorn: read-only under the systemd
        # unit's ProtectSystem=strict, and shared by every instance of the same user.
        "control_socket_disable": True,
        "proc_name": "toolcall-proxy",
        "on_starting": _on_starting,
        "pre_fork": take_seat,
        "when_ready": lambda server: _announce(config, server.log.info),
        "post_fork": _post_fork,
        "post_worker_init": _post_worker_init,
        "child_exit": _child_exit,
        "on_exit": _on_exit,
    }


def _one_process_store(config: Config, workers: int) -> None:
    """A store in one process's memory cannot serve several workers (each would hold its
    own answers, and a GET would miss most): refused at start."""
    from ..store import store_url

    if (workers > 1 and config.responses_mode == "translate"
            and store_url(config) == "sqlite://:memory:"):
        raise ConfigError(f"the response store ':memory:' lives in one process but "
                          f"{workers} workers would serve: set GUNICORN_WORKERS=1, or a store "
                          "file (responses_store_path)")


def settings_or_exit(argv: Sequence[str] = ()) -> dict[str, Any]:
    """`gunicorn_settings` for the settings of this process (deploy/gunicorn.conf.py)."""
    try:
        return gunicorn_settings(load_config(argv))
    except ConfigError as exc:
        _fail(str(exc))


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _second_port(config: Config) -> list[str]:
    """The address of `ollama_port`, which serves the same app (none when it is 0)."""
    return [_address(config.host, config.ollama_port)] if config.ollama_port else []


def _cores() -> int:
    """The cores this process may run on (a container's cpuset included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _int_env(environ: Mapping[str, str], name: str, default: int) -> int:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, not {text!r}") from None
    if value < 1:
        raise ConfigError(f"{name} must be at least 1, not {value}")
    return value


def _announce(config: Config, say: Callable[[str], object]) -> None:
    addresses = [_address(config.host, config.port), *_second_port(config)]
    say(f"toolcall-proxy listening on {' and '.join(f'http://{a}' for a in addresses)} "
        f"→ {', '.join(mask_url(url) for url in config.replicas())}")
    if not config.api_keys and not _is_loopback(config.host):
        say(f"WARNING: listening on {config.host} without api_keys: anyone who can reach this "
            "port can use the upstream through it (set TOOLCALL_PROXY_API_KEYS)")
    elif (config.ollama_port and config.port_keys(config.ollama_port) == ()
          and not _is_loopback(config.host)):
        say(f"WARNING: the Ollama port {config.ollama_port} on {config.host} has no keys "
            "(ollama_api_keys is empty): anyone who can reach it can use the upstream through "
            "it; the main port's stored answers, captures and status stay keyed")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _on_starting(server: Arbiter) -> None:
    """Give the workers one fresh, private directory for their Prometheus figures and status
    rings, so /proxy/metrics and /proxy/status report the whole server (prometheus_client
    multi-process mode, loaded here once it is set); an operator's own
    (PROMETHEUS_MULTIPROC_DIR) must be private. Bind
    the listeners without listening, and keep systemd's notify socket for the workers: the
    port opens, and systemd hears READY=1, when the first worker can serve (`readiness`)."""
    take_notify_socket()
    bind_unopened(server)
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        try:
            fresh_run_dir(path)
        except OSError as exc:
            _fail(f"PROMETHEUS_MULTIPROC_DIR: {exc.strerror or exc}")
    else:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=_PROM_DIR_PREFIX)
    # prometheus_client, loaded here, before a worker is forked and gevent patches it, keeps
    # threading's own lock for its files (every write of a figure takes it, and holds it
    # across no I/O): loaded in a gevent worker, it took gevent's, a Python call a write.
    # It sees the directory just set, and each worker writes files of its own pid.
    import prometheus_client.values  # noqa: F401


def _on_exit(server: Arbiter) -> None:
    """Remove the Prometheus directory `_on_starting` made (an operator's own is kept)."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if os.path.basename(path).startswith(_PROM_DIR_PREFIX):
        shutil.rmtree(path, ignore_errors=True)


def _post_fork(server: Arbiter, worker: Any) -> None:
    """In a new worker, until it sets its own handlers: a stop signal ends it. (It inherits
    the master's, which only queue the signal in the master's queue, a copy in this process
    no one reads: a worker told to stop while it patched and imported then ran on until the
    graceful timeout killed it.) It holds nothing yet."""
    for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        signal.signal(stop, signal.SIG_DFL)


def _post_worker_init(worker: Any) -> None:
    """Keep the collector off what the worker loaded (`settle_collector`), and watch for the
    worker being told to stop (SIGTERM on stop or reload sets `alive` to False), and then
    have the app drain: waiting requests end with a retryable error before the graceful
    timeout would cut them without one. First, the app being loaded, open the port if no
    worker has (`readiness`)."""
    settle_collector()
    open_listeners(worker)
    proxy = worker.wsgi.extensions.get("toolcall_proxy")
    if proxy is None:
        return

    def watch() -> None:
        while worker.alive:
            time.sleep(0.5)
        close_idle = getattr(worker, "close_idle", None)
        if close_idle is not None:
            close_idle()
        proxy.drain(max(1.0, worker.cfg.graceful_timeout - 5))

    # A greenlet under the gevent worker (threading is patched by then), a thread otherwise.
    threading.Thread(target=watch, daemon=True, name="drain-watch").start()


def settle_collector() -> None:
    """Move everything a booted worker holds (modules, the app, its compiled patterns: some
    50,000 objects) out of the collector's sight, once: a full collection walked them all,
    a pause of 35 ms and more in the middle of whichever requests were running (the p99 of
    a buffered turn at c8). What requests allocate is still collected, as before."""
    gc.collect()
    gc.freeze()
    # A young collection every 10,000 allocations, not 700: a request's objects mostly die
    # young by their counts alone, and each collection walks every young one still alive
    # (the requests in flight): 14 times fewer walks (a buffered turn: 0.15 → 0.01 a
    # request, `python -m bench.instructions --cprofile`), each over 10,000 objects at most.
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])


def _child_exit(server: Arbiter, worker: Any) -> None:
    """A worker's live gauges leave with it, and its row of the accept table."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
    leave_seat(worker)


# -- the worker: errors in the envelope, Ctrl-C drains -----------------------------------------


class _ErrorPage:
    """Stands in for the client socket while gunicorn's own `handle_error` decides the status
    of a refusal, logs it and writes its HTML page: keeps that page's status line."""

    def __init__(self) -> None:
        self.sent = b""

    def gettimeout(self) -> float | None:
        return None

    def setblocking(self, flag: bool) -> None:
        """Nothing to set: nothing is sent."""

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def send(self, data: bytes) -> int:
        self.sent += data
        return len(data)

    def status(self) -> tuple[int, str]:
        """(status, reason) of the page; 500 if gunicorn wrote none."""
        parts = self.sent.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if len(parts) == 3 and parts[1].isdigit():
            return int(parts[1]), parts[2]
        return 500, "Internal Server Error"


def error_response(status: int, reason: str, detail: str = "") -> bytes:
    """A whole HTTP/1.1 response carrying OpenAI's error envelope, closing the connection."""
    if status >= 500:
        message = "The proxy failed to handle this request."
    else:
        message = f"{reason}: {detail[:200]}" if detail else reason
    code = reason.lower().replace(" ", "_").replace("-", "_")
    body = ProxyError(status, message, code=code).json_bytes()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


if TYPE_CHECKING:  # what it is mixed into: the methods it extends are a worker's
    from types import FrameType

    from gunicorn._types import _AddressType
    from gunicorn.http import Request
    from gunicorn.workers.base import Worker as _Worker
else:
    _Worker = object


class EnvelopeErrors(_Worker):
    """Mixed into a gunicorn worker class: gunicorn's own refusals (a bad request line, a
    request line too long, header fields too large or too many) are answered with OpenAI's
    error envelope instead of an HTML page; the first Ctrl-C (SIGINT) stops the worker
    gracefully, as SIGTERM does, so the app drains; a second one quits at once. Its
    settings are read once (`SettledConfig`), and a request's plain header lines in one
    pass (`request.PlainHeadRequest`)."""

    def init_process(self) -> None:
        self.cfg = SettledConfig(self.cfg)  # type: ignore[assignment]  # reads as a Config
        install_plain_heads()  # (in the worker: its parser's class, a head's plain lines)
        super().init_process()

    def init_signals(self) -> None:
        super().init_signals()
        signal.signal(signal.SIGINT, self._interrupted)
        signal.siginterrupt(signal.SIGINT, False)

    def _interrupted(self, sig: int, frame: FrameType | None) -> None:
        if self.alive:
            self.handle_exit(sig, frame)
        else:
            self.handle_quit(sig, frame)

    def handle_error(self, req: Request | None, client: Any, addr: _AddressType,
                     exc: BaseException) -> None:
        page = _ErrorPage()
        # (gunicorn writes its page with the socket's sendall alone; its stubs ask a socket)
        super().handle_error(req, page, addr, exc)  # type: ignore[arg-type]
        status, reason = page.status()
        try:
            gunicorn_util.write_nonblock(client, error_response(status, reason, str(exc)))
        except Exception:
            self.log.debug("Failed to send error message.")


def _worker_class(name: str, head_seconds: float = HEAD_SECONDS) -> type:
    """gunicorn's worker class `name` (`gevent`, `gthread`, `sync` or a dotted path) with
    `EnvelopeErrors` mixed in, and for the gevent worker `HeadTimeouts` (a request head's
    own timeout, idle connections closed on stop; gthread closes those itself, sync keeps
    none; gevent_pywsgi is gevent's own server), `BalancedAccepts` (a busier worker
    leaves a new connection to a less busy one, `accepting`) and `OneSendResponses` (a
    response's head sent with its first body bytes, `response`)."""
    base = gunicorn_util.load_class(name)
    mixins: tuple[type, ...] = (EnvelopeErrors,)
    gevent_streams = any(kind.__module__ == "gunicorn.workers.ggevent"
                         and kind.__name__ == "GeventWorker" for kind in base.__mro__)
    if gevent_streams and base.server_class is None:
        mixins += (HeadTimeouts, BalancedAccepts)
        if can_choose():  # (last before gunicorn's: its handle_request is that worker's)
            mixins += (OneSendResponses,)
    return type(f"Proxy{base.__name__}", (*mixins, base),
                {"__module__": __name__, "HEAD_SECONDS": head_seconds})


# -- serving -------------------------------------------------------------------------------------


class _Arbiter(Arbiter):
    """gunicorn's master, with Ctrl-C stopping as SIGTERM does: the workers finish what they
    hold (and drain) for the graceful timeout; a second Ctrl-C quits at once."""

    def handle_int(self) -> None:
        self.handle_term()


class ProxyServer(BaseApplication):
    """gunicorn serving the proxy for `config`, with `gunicorn_settings`."""

    def __init__(self, config: Config, settings: Mapping[str, Any]) -> None:
        self._proxy_config = config
        self._settings = dict(settings)
        super().__init__(prog="toolcall-proxy")

    def load_config(self) -> None:
        for key, value in self._settings.items():
            self.cfg.set(key, value)

    def load(self) -> Callable[..., Any]:
        # Imported here, in the worker: prometheus_client must first see the metrics
        # directory `_on_starting` sets up.
        from ..web.app import create_app

        return create_app(self._proxy_config)

    def run(self) -> None:
        try:
            _Arbiter(self).run()
        except RuntimeError as exc:
            _fail(str(exc))


class DevRequestHandler(WSGIRequestHandler):
    """Werkzeug's request handler without its access line (it holds the query string,
    `?api-key=…`; the proxy writes its own line), and with the refusals of Python's HTTP
    server (a bad request line, headers too long or too many) in OpenAI's envelope."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Write nothing: the proxy's own log line covers the request."""

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        self.log_error("code %d, message %s", code, message)
        reason = self.responses.get(code, ("Error",))[0]
        self.wfile.write(error_response(code, reason, message or ""))
        self.close_connection = True


def serve(config: Config, dev: bool = False) -> int:
    """Serve `config` until stopped: gunicorn, or with `dev` Werkzeug's threaded server
    (never its debugger or reloader)."""
    if not dev:
        try:
            settings = gunicorn_settings(config)
        except ConfigError as exc:
            _fail(str(exc))
        ProxyServer(config, settings).run()
        return 0
    from werkzeug.serving import run_simple

    from ..web.app import create_app

    _announce(config, lambda line: print(line, file=sys.stderr))
    app = create_app(config)
    if config.ollama_port:  # the same app on the second port, in a thread of this process
        from werkzeug.serving import make_server

        second = make_server(config.host, config.ollama_port, app, threaded=True,
                             request_handler=DevRequestHandler)
        threading.Thread(target=second.serve_forever, daemon=True).start()
    run_simple(config.host, config.port, app, threaded=True,
               use_reloader=False, use_debugger=False, request_handler=DevRequestHandler)
    return 0


def healthcheck(argv: Sequence[str]) -> int:
    """Exit 0 when the proxy these settings describe answers /proxy/health with 200."""
    config = config_or_exit(argv)
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(config.host, config.host)
    request = urllib.request.Request(f"http://{_address(host, config.port)}/proxy/health")
    if config.protect_proxy_endpoints and config.api_keys:
        request.add_header("Authorization", f"Bearer {config.api_keys[0]}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        print(f"toolcall-proxy: unhealthy: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"toolcall-proxy: unhealthy: /proxy/health answered HTTP {status}",
              file=sys.stderr)
        return 1
    return 0
