"""The app's objects, built once per process and wired together: the settings, the upstream
clients and their replicas, the doors, the store, the profiles, logger and metrics, the
status recorder, and what the server's stopping means for requests still waiting. What
handles a request is `handlers`: plain functions of these objects and the request."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from flask import Request as FlaskRequest

from ...base.config import Config, mask_url
from ...fronts import ModelCard
from ...fronts.registry import key_headers
from ...telemetry.metrics import Metrics
from ...telemetry.request_log import RequestLog, make_logger
from ...telemetry.status import StatusBuild, turn_record
from ...turn.holdback import hold_rule
from ...turn.thinking import ThinkingMemory
from ..driver.passthrough import PassthroughServices
from ..driver.turns import TurnServices
from ..recorder.rings import make_recorder
from ..runtime.background import gevent_patched, native_rlock
from ..runtime.clients import ClientWatcher, client_socket
from ..store import open_store
from ..upstream.catalog import ContextLengths
from ..upstream.client import Upstream
from ..upstream.profiles import Profiles
from ..upstream.replicas import Replicas
from .addressed import Addressing, local_port
from .door import Door, current_request, header_items
from .run_dir import allocate_worker_files

REQUEST_ID = "toolcall_proxy.request_id"  # the environ key of the request's id


@dataclass
class Kept:
    """What the handlers keep between requests, in this process: the upstreams' last health
    probes (when, and the reports; who probes now), the status document (when the next build
    is due, the build, its JSON by viewer) and the model lists (by a hash of the request's
    headers: when, and the cards). Each lock is never held across I/O."""

    probed: tuple[float, list[dict[str, Any]]] | None = None
    probing: threading.Lock = field(default_factory=threading.Lock)
    probe_under_way: bool = False
    status: tuple[float, StatusBuild, dict[str, bytes]] | None = None
    status_building: threading.Lock = field(default_factory=threading.Lock)
    cards: dict[bytes, tuple[float, tuple[ModelCard, ...]]] = field(default_factory=dict)


class Proxy:
    """The app's objects: settings, upstream clients, the door, logger and metrics, and what
    the server's stopping means for requests still waiting."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.upstreams = {url: Upstream(url) for url in config.upstreams()}
        # (its handler's lock: a native one, its writes never switching greenlets)
        self.logger = make_logger(config.log_level, lock=native_rlock)
        self.metrics = Metrics(shared=self._run_dir_allocated(), one_thread=gevent_patched())
        # What /proxy/status shows, every worker's.
        self.recorder = make_recorder(warn=self.logger.warning)
        self.upstream_labels = {url: mask_url(url) for url in config.upstreams()}
        # A replica back from down may be another server version: its profile is read again.
        self.replicas = Replicas(self.upstreams, self.metrics,
                                 on_back=lambda url: self.profiles.recheck(url))
        self.door = Door(config.api_keys, key_headers())
        # The Ollama port's own door, when its keys differ (`ollama_api_keys`).
        ollama_keys = config.port_keys(config.ollama_port)
        self.ollama_door = (self.door if ollama_keys is config.api_keys
                            else Door(ollama_keys, key_headers()))
        self.addressing = Addressing.of(config.allowed_hosts, config.allowed_origins,
                                        config.host)
        self.client_watcher = ClientWatcher(self.draining)
        self.store = open_store(config, self.logger)
        # Set when the server stops (gunicorn's graceful shutdown or reload): requests still
        # waiting on upstream then are ended, retryably, before the server would cut them.
        self.drain_at: float | None = None
        # Models seen closing a thinking block their template opened (per process).
        self.thinking = ThinkingMemory()
        self.contexts = ContextLengths()  # the upstream's windows, for a client's own idea
        # What each upstream is (kind, version, dialects, refusals), learned on first need.
        self.profiles = Profiles(self.upstreams, self.store)
        self.kept = Kept()
        # What a turn and a relayed request use of all this, handed to them by name.
        self.turn_services = TurnServices(self.replicas, self.thinking, self.store,
                                          self.logger, self.emit, self.draining,
                                          self.profiles)
        self.passthrough_services = PassthroughServices(self.replicas, self.upstreams,
                                                        self.client_watcher, self.emit,
                                                        self.draining)
        if config.stream_mode == "stream" and config.formats:
            # What holds back a call in the streamed mode (every format's openers compiled:
            # 0.15 s), made with the app, not in a worker's first streamed turn.
            hold_rule(tuple(config.formats))

    def _run_dir_allocated(self) -> bool:
        """Whether this worker's Prometheus files are allocated in the run directory (or
        there is none); a full disk is logged, and the figures then kept in memory."""
        run_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        failed = allocate_worker_files(run_dir, os.getpid()) if run_dir else None
        if failed is not None:
            self.logger.warning("metrics of worker %s kept in memory: %s: %s", os.getpid(),
                                run_dir, failed.strerror or failed)
        return failed is None

    def drain(self, seconds: float) -> None:
        """The server is stopping: what still waits on upstream in `seconds` is ended with a
        503 (in the stream, for one that has started), never cut mid-stream without [DONE]."""
        self.drain_at = time.monotonic() + max(0.0, seconds)

    def draining(self) -> bool:
        """Whether waiting requests must end now (the server is stopping)."""
        return self.drain_at is not None and time.monotonic() >= self.drain_at

    def emit(self, log: RequestLog) -> None:
        """Write the request's log line, count it and keep its status record (once per
        request)."""
        if log.emitted:
            return
        record = log.emit(self.logger, self.config.log_format)
        total = time.monotonic() - log.started
        self.metrics.finished(log, total)
        if log.mode in ("preflight", "refused") or (
                log.owner is None and (self.door.locked or self.ollama_door.locked)):
            return  # (with keys, only keyed requests: a flood of wrong keys keeps no history)
        try:
            capture = orjson.dumps(record) if log.bodies is not None else None
            self.recorder.record(turn_record(log, time.time(), total * 1000), capture)
        except OSError as exc:  # a full disk must not fail the request: the page misses it
            self.logger.warning("status record of %s not kept: %s", log.request_id, exc)

    def door_of(self, environ: dict[str, Any]) -> Door:
        """The door of the port a request came in on: the Ollama port's own when its keys
        differ, else the main port's. The port is the socket's (never the Host header's); a
        server that shows no socket gets the main port's door."""
        if self.ollama_door is self.door:
            return self.door
        port = local_port(client_socket(environ))
        return self.ollama_door if port == self.config.ollama_port else self.door

    def upstream_headers(self, config: Config, *, buffered: bool,
                         request: FlaskRequest | None = None) -> dict[str, str]:
        """This request's headers (`request`'s, else Flask's current one's) as they go
        upstream (see `Door.upstream_headers`)."""
        request = current_request() if request is None else request
        door = self.door_of(request.environ)
        return door.upstream_headers(header_items(request.environ), config,
                                     request.environ.get(REQUEST_ID), buffered=buffered)

    def replica_reports(self) -> list[dict[str, Any]]:
        """Every upstream URL (each replica) as this process sees it, without I/O: `url`
        (masked), `up`, `in_flight`, `last_error`, `last_error_at` (for the status page)."""
        return self.replicas.reports()
