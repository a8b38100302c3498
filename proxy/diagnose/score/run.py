"""The score's I/O: each suite turn asked straight (the plain client's request, to the
upstream) and through the proxy (the same request to the proxy's own app, in this process:
its door, its front, its turn, its re-asks and rendering, exactly as the server answers it),
in each mode, under a request budget, a few at a time. Everything judged is `checks`'."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import ProxyError
from ...shell.upstream.client import Timeouts, Upstream
from ...shell.web.app import create_app
from ...telemetry.request_log import LOGGER_NAME
from ...turn.constrained.policy import budget as reask_budget
from ..doctor.probe import MAX_ANSWER_BYTES, read_failure
from .fronts import FrontWay
from .jobs import BUDGET, UNSAID, Asked, Job
from .reading import Reading, failed, read_completion, read_stream

CHAT_PATH = "/v1/chat/completions"


class Budget:
    """At most `limit` upstream requests: a job reserves the most it may cost before it is
    asked, and gives back what it did not spend."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0
        self._reserved = 0
        self._lock = threading.Lock()

    def reserve(self, most: int) -> bool:
        with self._lock:
            if self.spent + self._reserved + most > self.limit:
                return False
            self._reserved += most
            return True

    def settle(self, reserved: int, spent: int) -> None:
        with self._lock:
            self._reserved -= reserved
            self.spent += spent


class _Lines(logging.Handler):
    """The proxy's log lines (JSON), kept by request id: what each turn cost upstream."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: dict[str, dict[str, Any]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = orjson.loads(record.getMessage())
        except orjson.JSONDecodeError:
            return  # a warning of the proxy's own, not a request's line
        if isinstance(line, dict) and isinstance(line.get("request_id"), str):
            self.records[line["request_id"]] = line


@contextmanager
def _captured_lines() -> Iterator[_Lines]:
    """The proxy's logger writes to a `_Lines` alone while the score runs (its lines would
    break the report and the progress bar)."""
    logger = logging.getLogger(LOGGER_NAME)
    kept, lines = list(logger.handlers), _Lines()
    logger.handlers = [lines]
    try:
        yield lines
    finally:
        logger.handlers = kept


def proxy_config(config: Config, url: str, api_key: str, timeout: float) -> Config:
    """The operator's settings for the in-process proxy: its upstream the one scored, its
    waits for an answer the score's `timeout` (as straight), no keys of its own (nobody
    else reaches it), its log lines as JSON for the counts, and its store in memory (a
    score leaves nothing behind)."""
    return dataclasses.replace(
        config, upstream=url, upstream_api_key=api_key, api_keys=(),
        buffered_timeout_seconds=timeout, read_timeout_seconds=timeout,
        protect_proxy_endpoints=False, log_format="json", log_level="info", log_bodies=False,
        responses_store_url="sqlite://:memory:", responses_store_path="")


def most_requests(settings: Config, job: Job) -> int:
    """The most upstream requests a job may make: one straight; through the proxy (under
    the model's `settings`), its re-asks and retries too, and one asked again to fit the
    context window."""
    if job.way is None:
        return 1
    return (1 + reask_budget(settings.constrained_reask, settings.required_call_retries, True)
            + (1 if settings.fit_max_tokens else 0))


def requests_of(line: dict[str, Any] | None) -> int:
    """The upstream requests the proxy made for one turn, from its log line."""
    if line is None:
        return 0
    if line.get("mode") == "passthrough":
        return 1
    if line.get("upstream_status") is None and line.get("upstream_ms") is None:
        return 0 if str(line.get("status", "")).startswith("4") else 1
    fitted = sum(1 for note in line.get("notes") or () if note.startswith("max_tokens_fitted"))
    return 1 + len(line.get("reasks") or ()) + fitted


class Runner:
    """Asks jobs of one upstream, straight and through the in-process proxy."""

    def __init__(self, url: str, model: str, config: Config, api_key: str, *,
                 max_tokens: int, timeout: float, concurrency: int, max_requests: int) -> None:
        self.url = url
        self.model = model
        self.config = proxy_config(config, url, api_key, timeout)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.max_tokens = max_tokens
        self.timeouts = Timeouts(5.0, timeout)
        self.concurrency = concurrency
        self.budget = Budget(max_requests)
        self.upstream = Upstream(url, pool_size=concurrency)
        self._lines: _Lines | None = None
        self._app: Any = None
        self._sequence = 0
        self._lock = threading.Lock()

    def run(self, jobs: list[Job], progress: Callable[[int, int], None]) -> list[Asked]:
        """Every job asked, in the jobs' order. A turn is the budget's unit: all of its
        asks (every way, both modes) are asked or none is, so that what is compared was
        asked alike; turns run `concurrency` at a time, each one's asks in turn."""
        done = [0]
        turns: dict[str, list[Job]] = {}
        for job in jobs:
            turns.setdefault(job.turn.id, []).append(job)

        def one(group: list[Job]) -> list[Asked]:
            asked = self.ask_turn(group)
            with self._lock:
                done[0] += len(group)
                progress(done[0], len(jobs))
            return asked

        with _captured_lines() as lines:
            self._lines = lines
            self._app = create_app(self.config)
            progress(0, len(jobs))
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                by_job = {id(a.job): a for group in pool.map(one, turns.values())
                          for a in group}
        return [by_job[id(job)] for job in jobs]

    def profile(self) -> dict[str, Any]:
        """What the proxy learned of the upstream (kind, version, dialects...), no generation."""
        assert self._app is not None
        proxy = self._app.extensions["toolcall_proxy"]
        learned: dict[str, Any] = proxy.profiles.get(self.url, self.model, self.config,
                                                     self.headers).record()
        return learned

    def ask_turn(self, jobs: list[Job]) -> list[Asked]:
        """One turn's asks, within the budget (all or none of those its fronts can say)."""
        settings = self.config.for_model(self.model)
        said: list[tuple[Job, dict[str, Any] | None]] = []
        asked: list[Asked] = []
        for job in jobs:
            request = None if job.way is None else job.way.request(
                job.turn, self.model, self.max_tokens, job.stream)
            if job.way is not None and request is None:
                asked.append(Asked(job, None, UNSAID))
            else:
                said.append((job, request))
        most = sum(most_requests(settings, job) for job, _ in said)
        if not self.budget.reserve(most):
            return asked + [Asked(job, None, BUDGET) for job, _ in said]
        for job, request in said:
            reading = (self._straight(job) if job.way is None or request is None
                       else self._through(job.way, request, job.stream))
            asked.append(Asked(job, reading))
        self.budget.settle(most, sum(a.reading.requests for a in asked if a.reading))
        return asked

    def _straight(self, job: Job) -> Reading:
        body = orjson.dumps(job.turn.request(self.model, self.max_tokens, job.stream))
        headers = {**self.headers, "Accept": "text/event-stream"} if job.stream else self.headers
        started = time.monotonic()
        try:
            reply = self.upstream.complete(CHAT_PATH, body, headers, self.timeouts,
                                           max_bytes=MAX_ANSWER_BYTES)
        except ProxyError as exc:
            return failed(None, read_failure(exc, "the answer"), requests=1,
                          seconds=time.monotonic() - started)
        cost = {"requests": 1, "seconds": round(time.monotonic() - started, 3)}
        if job.stream and reply.status < 400:
            return read_stream(reply.status, reply.body, **cost)
        return read_completion(reply.status, reply.body, **cost)

    def _through(self, way: FrontWay, request: dict[str, Any], stream: bool) -> Reading:
        """The request of the front's client, posted to the proxy's own app in-process."""
        with self._lock:
            self._sequence += 1
            request_id = f"score-{self._sequence}"
        started = time.monotonic()
        client = self._app.test_client()
        response = client.post(way.path, data=orjson.dumps(request), headers={
            "Content-Type": "application/json", "X-Request-Id": request_id})
        body = response.get_data()
        response.close()
        assert self._lines is not None
        cost = {"requests": requests_of(self._lines.records.get(request_id)),
                "seconds": round(time.monotonic() - started, 3)}
        return way.read(response.status_code, body, stream, **cost)
