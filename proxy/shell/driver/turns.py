"""The shell's side of a turn: carry out what the turn machine (`turn.machine`) asks, for any
front. The only I/O of a turn is here (the upstream call, the profile's learning, the clock,
the client's socket, the log line, the store, the bytes written); every decision is the
machine's: this module has no rule of its own."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...base.errors import ProxyError, client_disconnected
from ...fronts import Front, StreamWriter
from ...telemetry.request_log import ReAskSeen, RequestLog
from ...turn.constrained.profile import UpstreamProfile
from ...turn.core import Answer, UpstreamReply
from ...turn.live import written
from ...turn.machine import events as turn
from ...turn.machine.events import another_replica
from ...turn.machine.turn import Settings, TurnMachine
from ...turn.plan import TurnPlan
from ...turn.result import TurnResult
from ...turn.thinking import ThinkingMemory
from ..runtime.clients import client_gone
from ..runtime.wire import Response, fixed_headers
from ..store.interface import ResponseStore
from ..upstream.client import Timeouts, UpstreamCall, UpstreamStream, _ConnectionTracker
from ..upstream.profiles import Learning, Profiles
from ..upstream.replicas import Placement, Replicas, affinity_key

# What the machine asks of the client's response (the rest the driver carries out itself).
ClientAction = (turn.Commit | turn.Flow | turn.Heartbeat | turn.Keep | turn.Deliver
                | turn.Fail | turn.Abandon)
_CLIENT = (turn.Commit, turn.Flow, turn.Heartbeat, turn.Keep, turn.Deliver, turn.Fail,
           turn.Abandon)
_CLIENT_OR_WAIT = (*_CLIENT, turn.Wait)  # where the actions carried out at once stop

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_SSE_ITEMS = tuple(SSE_HEADERS.items())

Call = UpstreamCall[UpstreamReply] | UpstreamStream  # buffered, or streamed


@dataclass(frozen=True)
class TurnServices:
    """What a turn uses of the app, handed over by name: the replicas it asks, what `auto`
    learned of each model's thinking, the store that keeps answers, the logger of its own
    failures, the writer of its log line, whether the server is stopping, and the upstreams'
    profiles."""

    replicas: Replicas
    thinking: ThinkingMemory
    store: ResponseStore
    logger: logging.Logger
    emit: Callable[[RequestLog], None]
    draining: Callable[[], bool]
    profiles: Profiles  # what each upstream is: its dialects, its thinking opener


class Driver:
    """Carries out one turn machine's actions: starts the upstream calls on the placement's
    replica, learns the profile, waits on whichever is under way, looks at the client and
    the server between waits, writes the log line's fields, and tells the machine each thing
    that happened. The actions for the client's response it hands on (`actions`)."""

    def __init__(self, machine: TurnMachine, services: TurnServices, placement: Placement,
                 path: str, headers: dict[str, str], environ: dict[str, Any],
                 log: RequestLog) -> None:
        self.machine = machine
        self._services = services
        self._placement = placement
        self._path = path
        self._headers = headers
        self._environ = environ
        self._log = log
        self.call: Call | None = None
        self._learning: Learning | None = None
        self._learned_url = ""
        self._profiled = False  # the call's end is told with the replica's profile
        # the request's own actions carried out now: the first call (or the profile's
        # learning) starts with the turn, as the client's response is being made
        self._queue: deque[turn.Action] = deque(machine.handle(turn.Requested(time.monotonic())))
        self._carried()

    def _carried(self) -> None:
        """Carry out the queued actions until one is for the client's response or a Wait
        (that one, and what follows it, stay queued)."""
        queue = self._queue
        while queue and not isinstance(queue[0], _CLIENT_OR_WAIT):
            self._carry_out(queue.popleft())

    def actions(self) -> Generator[ClientAction, None, None]:
        """The actions for the client's response, in order, until the turn is over. A Fail
        or an Abandon has cut the upstream call already."""
        queue = self._queue
        if not queue:
            # the first look at the client and the server, as the turn begins
            queue.extend(self.machine.handle(self._look()))
        while queue:
            action = queue.popleft()
            if isinstance(action, turn.Wait):
                queue.extend(self.machine.handle(self._waited(action.seconds)))
            elif isinstance(action, _CLIENT):
                yield action
            else:
                self._carry_out(action)

    def gone(self) -> None:
        """The client's socket failed or closed: the machine is told, its actions done."""
        for action in self.machine.handle(turn.ClientGone(time.monotonic())):
            if not isinstance(action, _CLIENT):
                self._carry_out(action)

    def cut(self) -> None:
        """A failure of the proxy's own: upstream must not go on for nobody."""
        if self.call is not None:
            self.call.cancel()

    # -- the I/O each action names ------------------------------------------------------

    def _carry_out(self, action: turn.Action) -> None:
        log, services, plan = self._log, self._services, self.machine.plan
        if isinstance(action, turn.LearnProfile):
            learning = self._learning_now()
            if learning.settled:  # known already: told at once
                self._queue.extendleft(reversed(self.machine.handle(
                    turn.ProfileLearned(time.monotonic(), learning.result()))))
        elif isinstance(action, turn.AskUpstream):
            self.call = self._start(action)
            self._profiled = action.profiled
        elif isinstance(action, turn.Cancel):
            if self.call is not None:
                self.call.cancel(action.why)
        elif isinstance(action, turn.Suspect):
            services.replicas.suspect(self._placement.url, plan.config, action.why.message)
        elif isinstance(action, turn.Refused):
            services.profiles.refused(self._placement.url, plan.model, action.dialect,
                                      action.wrapper, plan.config, self._headers)
        elif isinstance(action, turn.Note):
            (log.rewrites if action.rewrite else log.notes).append(action.text)
        elif isinstance(action, turn.ReAsked):
            log.reasks.append(ReAskSeen(action.reason, action.dialect, action.result,
                                        action.ms))
        elif isinstance(action, turn.Decided):
            _logged(log, action)
        else:
            raise AssertionError(f"no carrying out of {type(action).__name__}")

    def _learning_now(self) -> Learning:
        """The profile of the turn's model on the replica chosen now, being learned (or
        known), never waited for here."""
        url = self._placement.url
        if self._learning is None or url != self._learned_url:
            plan = self.machine.plan
            self._learning = self._services.profiles.learning(url, plan.model, plan.config,
                                                              self._headers)
            self._learned_url = url
        return self._learning

    def _profile_now(self) -> UpstreamProfile | None:
        """What is known now of the profile of the replica that answered, when the call's
        AskUpstream asked for it (None: not asked)."""
        return self._learning_now().result() if self._profiled else None

    def _start(self, ask: turn.AskUpstream) -> Call:
        config = self.machine.plan.config
        placement, path, headers = self._placement, self._path, self._headers
        if ask.streamed:
            # Between two events upstream may be silent at most read_timeout_seconds.
            timeouts = Timeouts(config.connect_timeout_seconds, config.read_timeout_seconds)
            stream = UpstreamStream(placement.run, path, ask.body,
                                    {**headers, "Accept": "text/event-stream"}, timeouts,
                                    config.max_upstream_body_bytes)
            stream.start()
            return stream
        timeouts = Timeouts(config.connect_timeout_seconds, config.buffered_timeout_seconds)
        return _completed(placement, path, ask.body, headers, timeouts,
                          config.max_upstream_body_bytes)

    def _waited(self, seconds: float) -> turn.Event:
        """Wait on what is under way (the call, else the profile) at most `seconds`; what
        happened."""
        call = self.call
        if call is None:
            learning = self._learning
            assert learning is not None, "a Wait with nothing under way"
            if learning.wait(seconds):
                return turn.ProfileLearned(time.monotonic(), learning.result())
            return self._look()
        if not call.wait(seconds):
            return self._look()
        now = time.monotonic()
        if isinstance(call, UpstreamStream):
            events = call.take()
            if events or not call.finished:
                return turn.UpstreamEvents(now, tuple(events))
        return turn.UpstreamEnded(now, call.outcome(), self._profile_now())

    def _look(self) -> turn.Event:
        """A look at the client and the server."""
        now = time.monotonic()
        if client_gone(self._environ):
            return turn.ClientGone(now)
        if self._services.draining():
            return turn.Draining(now)
        return turn.Tick(now)


def _logged(log: RequestLog, decided: turn.Decided) -> None:
    """What the log line says of a decision (a turn may decide twice)."""
    decision = decided.decision
    log.upstream_ms = round((time.monotonic() - log.started) * 1000, 1)
    if decision.upstream_status is not None:
        log.upstream_status = decision.upstream_status
    if decision.outcome is not None:
        log.outcome = decision.outcome
    log.notes.extend(decision.notes)
    if log.bodies is not None:
        if decision.upstream_status is not None:
            log.bodies["response"] = decision.received
        if isinstance(decision, Answer):
            log.bodies["sent"] = decision.result.record()


class TurnResponse:
    """One front's turn, answered: a whole response (JSON, an error with its status, or a
    stream delivered at once), or a stream that commits and goes on while upstream works."""

    def __init__(self, services: TurnServices, front: Front[Any], plan: TurnPlan[Any],
                 log: RequestLog, path: str, headers: dict[str, str], environ: dict[str, Any], *,
                 api_key: str | None = None) -> None:
        self.services = services
        self.api_key = api_key  # whose answer this is, when the front keeps it
        self.front = front
        self.log = log
        key = affinity_key(plan.config, headers, plan.affinity)
        placement = Placement(services.replicas, plan.config, key, log)
        self.machine = TurnMachine(plan, Settings(
            log.started, services.profiles.deadline, front.storing is not None,
            services.thinking))
        self.driver = Driver(self.machine, services, placement, path, headers, environ, log)

    @property
    def plan(self) -> TurnPlan[Any]:
        """The turn's plan as the machine has it now (its thinking rule learned)."""
        return self.machine.plan

    def respond(self) -> Response:
        """The response, once the turn is over or the client's stream has begun."""
        actions = self.driver.actions()
        try:
            for action in actions:
                if isinstance(action, turn.Commit):
                    return self._stream(actions)
                if isinstance(action, turn.Keep):
                    self._keep(action.plan, action.result)
                elif isinstance(action, turn.Deliver):
                    return self._whole(action.answer)
                elif isinstance(action, turn.Fail):
                    return error_response(self.front, action.error, self.log)
                elif isinstance(action, turn.Abandon):
                    return error_response(self.front, client_disconnected(), self.log)
        except BaseException:
            self.driver.cut()  # a failure of our own: upstream must not go on for nobody
            raise
        raise AssertionError("the turn machine ended without an outcome")

    def _keep(self, plan: TurnPlan[Any], result: TurnResult) -> None:
        """Leave a delivered answer in the store, when the request asked it to (before the
        client sees the end: a GET right after finds it)."""
        storing = self.front.storing
        kept = storing.keep(plan, result) if storing is not None else None
        if kept is None:
            return
        store = self.services.store
        try:
            stored = store.put(store.owner(self.api_key), kept)
        except ProxyError:  # the owner's secret could not be read: as a failed write
            stored = False
        if stored is None:  # the store was sent the answer and did not say: it may hold it
            self.log.notes.append("answer_keep_unconfirmed")
        elif not stored:
            self.log.notes.append("answer_not_kept")

    def _whole(self, answer: Answer) -> Response:
        self.log.status = 200
        if not self.plan.client_stream:
            body = self.front.render_json(self.plan, answer.result)
            self.log.bytes_out = len(body)
            return Response(body, status=200, content_type="application/json")
        writer = self.front.stream_writer(self.plan)

        def whole() -> Generator[bytes, None, None]:
            yield writer.head() + writer.answer(answer.result)

        return self._stream_response(writer, whole())

    def _stream(self, actions: Generator[ClientAction, None, None]) -> Response:
        """The stream: its head at once, heartbeats while upstream works, then the answer or
        the error in the stream, which always ends."""
        writer = self.front.stream_writer(self.plan)
        log = self.log

        def frames() -> Generator[bytes, None, None]:
            finished = False
            try:
                yield writer.head()
                for action in actions:
                    if isinstance(action, turn.Flow):
                        yield self._flow(writer, action)
                    elif isinstance(action, turn.Heartbeat):
                        log.heartbeats += 1
                        yield writer.heartbeat()
                    elif isinstance(action, turn.Keep):
                        self._keep(action.plan, action.result)
                    elif isinstance(action, turn.Deliver):
                        finished = True
                        yield writer.answer(action.answer.result)
                    elif isinstance(action, turn.Fail):
                        log.error = action.error.code or action.error.type
                        finished = True
                        yield writer.error(action.error)
            except Exception:
                self.services.logger.exception("turn failed (request %s)", log.request_id)
                log.error = "internal_error"
                finished = True
                self.driver.cut()
                yield writer.error(ProxyError(500, "The proxy failed to render this answer.",
                                              code="internal_error"))
            finally:
                actions.close()
                if not finished:  # the client left (Abandon, or a failed write)
                    self.driver.gone()
                    log.error = log.error or "client_disconnected"

        return self._stream_response(writer, frames())

    def _flow(self, writer: StreamWriter, flow: turn.Flow) -> bytes:
        """The live reasoning and text the turn lets out now, in the front's wire format."""
        if self.log.first_text_ms is None:
            self.log.first_text_ms = round((time.monotonic() - self.log.started) * 1000, 1)
        return written(flow.pieces, writer)

    def _stream_response(self, writer: StreamWriter,
                         frames: Generator[bytes, None, None]) -> Response:
        log = self.log
        log.status = 200

        def counted() -> Iterator[bytes]:
            try:
                for data in frames:
                    log.bytes_out += len(data)
                    yield data
            finally:
                frames.close()  # cuts upstream if the client left
                self.services.emit(log)

        return StreamedResponse(counted(), status=200, headers=fixed_headers(
            (("Content-Type", writer.content_type), *_SSE_ITEMS)))


class StreamedResponse(Response):
    """A response whose body is a generator of bytes, which the WSGI server iterates itself:
    Werkzeug's ClosingIterator and encoding generator each add a step to every frame of a
    stream; the server still closes the body and runs the response's close callbacks."""

    def get_app_iter(self, environ: dict[str, Any]) -> Any:
        status = self.status_code
        if (environ["REQUEST_METHOD"] == "HEAD" or 100 <= status < 200 or status in (204, 304)
                or self.direct_passthrough):
            return super().get_app_iter(environ)  # (no body, or the body as it is)
        return _ClosedAtEnd(self.response, self.close)  # type: ignore[arg-type]  # bytes


class _ClosedAtEnd:
    """A WSGI body: `body` iterated as it is, `close` called when the server closes it."""

    __slots__ = ("_body", "close")

    def __init__(self, body: Iterable[bytes], close: Callable[[], None]) -> None:
        self._body, self.close = body, close

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._body)


def _completed(placement: Placement, path: str, body: bytes, headers: dict[str, str],
               timeouts: Timeouts, max_bytes: int) -> UpstreamCall[UpstreamReply]:
    """A buffered POST on the placement's replica, started; sent once more, to another replica,
    when the turn says its outcome is one another may do better with (`another_replica`)."""
    def work(tracker: _ConnectionTracker) -> UpstreamReply:
        return placement.run(lambda upstream: upstream.complete(path, body, headers, timeouts,
                                                                tracker, max_bytes),
                             worth_another=another_replica,
                             cancelled=lambda: tracker.cancelled)
    return UpstreamCall(work).start()


def error_response(front: Front[Any], error: ProxyError,
                   log: RequestLog | None = None) -> Response:
    """`error` in `front`'s envelope, recorded in the request's log line."""
    rendered = front.error_response(error)
    response = Response(rendered.body, status=rendered.status, headers=dict(rendered.headers),
                        content_type="application/json")
    if log is not None:
        log.status = rendered.status
        log.error = (error.code or error.type)[:64]  # upstream's own code may be anything
        log.bytes_out = response.content_length or 0
    return response
