"""The shell's side of a turn: carry out what the waiting machine (`turn.waiting`) says, for
any front. The only I/O of a turn is here (the upstream call, the clock, the client's
socket, the bytes written); every decision is the core's."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from flask import Response

from ...base.errors import ProxyError, client_disconnected
from ...fronts import Front, StreamWriter
from ...telemetry.request_log import RequestLog
from ...turn import waiting
from ...turn.constrained import policy as reask
from ...turn.context_window import with_max_tokens
from ...turn.core import Answer, Decision, decide
from ...turn.live import LiveTurn, as_said, written
from ...turn.plan import TurnPlan
from ...turn.result import TurnResult
from ...turn.thinking import ThinkingMemory, learn_from, learn_opened, learned_rule, unseen
from ..runtime.clients import client_gone
from ..store.interface import ResponseStore
from ..upstream.client import StreamEnd, Timeouts, Unreached, UpstreamCall, UpstreamStream
from ..upstream.profiles import Learning, Profiles
from ..upstream.replicas import RETRY_STATUSES, Placement, Replicas, affinity_key
from .reasking import ReAsking

# What the machine asks of the client's response; the rest (Wait, AskAgain, and Collect
# when there is a core to decide) the driver carries out itself.
ClientAction = (waiting.Commit | waiting.Flow | waiting.Heartbeat | waiting.Deliver
                | waiting.Fail | waiting.Abandon | waiting.Collect)


@dataclass(frozen=True)
class _Until:
    """A Wait under way: until this moment (events that arrive meanwhile do not move it)."""

    at: float

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class Driver:
    """Runs one waiting machine against an upstream call: waits on the call, looks at the
    client and the server between waits, and has the core decide when the call ends.

    Without `decide` (a relayed request), Collect is handed to the caller, who takes the
    call's outcome itself. With `feed` (the streamed mode), the call is an UpstreamStream:
    the events it takes are fed to the turn, which says whether something may flow now."""

    def __init__(self, state: waiting.Waiting, start_call: Callable[[], Any],
                 environ: dict[str, Any], draining: Callable[[], bool],
                 decide: Callable[[Any], Decision] | None = None,
                 on_retry: Callable[[waiting.AskAgain], None] = lambda action: None,
                 feed: Callable[[list[bytes]], bool] | None = None,
                 first_call: Callable[[], Any] | None = None) -> None:
        self.state = state
        self._start_call = start_call
        self.call = (first_call or start_call)()
        self._environ = environ
        self._draining = draining
        self._decide = decide
        self._on_retry = on_retry
        self._feed = feed

    def _step(self, event: waiting.Event) -> list[waiting.Action]:
        self.state, actions = waiting.step(self.state, event)
        return actions

    def _tick(self) -> waiting.Tick:
        return waiting.Tick(time.monotonic(), client_gone(self._environ), self._draining())

    def actions(self) -> Iterator[ClientAction]:
        """The actions for the client's response, in order, until the turn is over. A Fail
        or an Abandon has cut the upstream call already."""
        queue: deque[waiting.Action | _Until] = deque(self._step(self._tick()))
        while queue:
            action = queue.popleft()
            if isinstance(action, waiting.Wait):
                queue.appendleft(_Until(time.monotonic() + action.seconds))
            elif isinstance(action, _Until):
                queue.extend(self._waited(action))
            elif isinstance(action, waiting.Collect) and self._decide is not None:
                decision = self._decide(self.call.outcome())
                queue.extend(self._step(waiting.Decided(time.monotonic(), decision)))
            elif isinstance(action, waiting.AskAgain):
                self._on_retry(action)
                self.call = self._start_call()
            else:
                if isinstance(action, waiting.Fail) and action.error.code == "upstream_timeout":
                    self.call.cancel(action.error)  # its replica did not answer in time
                elif isinstance(action, (waiting.Fail, waiting.Abandon)):
                    self.call.cancel()
                yield action

    def _waited(self, until: _Until) -> list[waiting.Action | _Until]:
        """Wait on the call until `until`; what the machine says of what happened. Live text
        is told as it arrives, and the wait goes on to its end, when the machine looks."""
        ready = self.call.wait(max(0.0, until.at - time.monotonic()))
        now = time.monotonic()
        if not ready:
            return list(self._step(self._tick()))
        if self._feed is None:
            return list(self._step(waiting.UpstreamDone(now)))
        actions: list[waiting.Action | _Until] = []
        if self._feed(self.call.take()):
            actions += self._step(waiting.Arrived(now))
        if self.call.finished:
            return actions + self._step(waiting.UpstreamDone(now))
        if now >= until.at:
            return actions + self._step(self._tick())
        return [*actions, until]


class Profiled:
    """A turn's first upstream call, started once the upstream's profile is learned or its
    deadline passed (`prepare` first: what the profile decides of the call): waited on like
    the call itself, so the turn's heartbeats, commit window and checks of the client go on
    meanwhile."""

    def __init__(self, learning: Learning, deadline: float, prepare: Callable[[], None],
                 start: Callable[[], Any], silent: Callable[[ProxyError], None]) -> None:
        self._learning = learning
        self._deadline = deadline
        self._prepare = prepare
        self._start = start
        self._silent = silent  # told when the turn's time ran out on the profile alone
        self._call: Any = None

    def _started(self, timeout: float) -> bool:
        if self._call is None:
            left = min(timeout, self._deadline - time.monotonic())
            if not self._learning.wait(left) and time.monotonic() < self._deadline:
                return False
            self._prepare()
            self._call = self._start()
        return True

    def wait(self, timeout: float | None) -> bool:
        """True once the call has something (within `timeout` seconds)."""
        end = time.monotonic() + (timeout if timeout is not None else 3600.0)
        if not self._started(end - time.monotonic()):
            return False
        return bool(self._call.wait(max(0.0, end - time.monotonic())))

    def take(self) -> list[bytes]:
        return self._call.take() if self._call is not None else []

    @property
    def finished(self) -> bool:
        return self._call is not None and self._call.finished

    def outcome(self) -> Any:
        return self._call.outcome()

    def cancel(self, why: ProxyError | None = None) -> None:
        if self._call is not None:
            self._call.cancel(why)
        elif why is not None and why.code == "upstream_timeout":
            self._silent(why)  # its replica answered not even its info endpoints in time


def _may_constrain(plan: TurnPlan) -> bool:
    """Whether a turn may ask under a constraint (its profile names the dialect): it offers
    tools, and constrained re-asks or `constrain_every_call` are on."""
    config = plan.config
    return bool(plan.extraction.tools) and (config.constrained_reask != reask.OFF
                                            or config.constrain_every_call)


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


class TurnResponse:
    """One front's turn, answered: a whole response (JSON, an error with its status, or a
    stream delivered at once), or a stream that commits and goes on while upstream works."""

    def __init__(self, services: TurnServices, front: Front, plan: TurnPlan, log: RequestLog,
                 path: str, headers: dict[str, str], environ: dict[str, Any], *,
                 api_key: str | None = None) -> None:
        self.services = services
        self.api_key = api_key  # whose answer this is, when the front keeps it
        self.front = front
        self.log = log
        config = plan.config
        key = affinity_key(config, headers, plan.affinity)
        placement = Placement(services.replicas, config, key, log)
        rule = plan.extraction.thinking
        # the first streamed or tool turn of a model: its profile says whether its template
        # opens thinking, so its text flows as the hundredth turn's does, and an output cut
        # by `length` before any closer is all thinking in both modes
        opening = ((plan.streamed or bool(plan.extraction.tools))
                   and unseen(rule, plan.model, services.thinking))
        # the upstream's profile, when the turn may need it, learned beside it: the first
        # call waits for it (heartbeats and the commit window go on), within its deadline
        learning = (services.profiles.learning(placement.url, plan.model, config, headers)
                    if opening or _may_constrain(plan) else None)
        self.plan = plan
        self.reasking = ReAsking(plan, services.profiles, lambda: placement.url, headers, log,
                                 learning)
        state = waiting.start(
            log.started, config.buffered_timeout_seconds,
            commit_after=config.commit_window_seconds if plan.client_stream else None,
            beat=config.heartbeat_seconds, retries=self.reasking.budget)
        self.live: LiveTurn | None = None  # the streamed turn's first generation, which flows
        self.heard: LiveTurn | None = None  # the generation being read (a re-ask's is quiet)
        self.base_body = plan.upstream_body  # the turn's body (its max_tokens fitted)
        self.upstream_body = plan.upstream_body  # the next call's

        def prepared() -> None:
            """What the profile decides before the first call: the thinking rule, the
            live turn, the first body."""
            if opening:
                learn_opened(plan.model, self.reasking.profile().thinking_opened,
                             services.thinking)
            self.plan = self.reasking.plan = plan.with_thinking(
                learned_rule(rule, plan.model, services.thinking))
            if plan.streamed:
                self.live = self.heard = LiveTurn(self.plan)
            self.upstream_body = self.reasking.body(self.base_body)

        start_call: Callable[[], Any]
        if plan.streamed:
            # Between two events upstream may be silent at most read_timeout_seconds.
            timeouts = Timeouts(config.connect_timeout_seconds, config.read_timeout_seconds)
            headers = {**headers, "Accept": "text/event-stream"}
            start_call = lambda: UpstreamStream(  # noqa: E731
                placement.run, path, self.upstream_body, headers, timeouts,
                config.max_upstream_body_bytes).start()
            feed: Callable[[list[bytes]], bool] | None = self._fed
        else:
            timeouts = Timeouts(config.connect_timeout_seconds, config.buffered_timeout_seconds)
            start_call = lambda: _completed(  # noqa: E731
                placement, path, self.upstream_body, headers, timeouts,
                config.max_upstream_body_bytes)
            feed = None
        first_call: Callable[[], Any] | None = None
        if learning is not None and not learning.settled:
            deadline = time.monotonic() + services.profiles.deadline
            first_call = lambda: Profiled(  # noqa: E731
                learning, deadline, prepared, start_call,
                lambda why: services.replicas.suspect(placement.url, config, why.message))
        else:
            prepared()
        self.driver = Driver(
            state, start_call, environ, services.draining, self._decide,
            on_retry=self._asking_again, feed=feed, first_call=first_call)

    def _asking_again(self, action: waiting.AskAgain) -> None:
        """Before the next upstream call: what it asks, and the log's word for why."""
        if action.fit is not None:
            tokens = action.fit.max_tokens
            self.base_body = with_max_tokens(self.base_body, tokens)
            self.log.notes.append(f"max_tokens_fitted:{'window' if tokens is None else tokens}")
        if self.live is not None and self.reasking.asking:
            # a re-ask of a streamed turn is read quietly: its prose never flows (the
            # client has the first generation's), only its calls reach the answer
            self.heard = LiveTurn(self.plan)
        self.upstream_body = self.reasking.body(self.base_body)

    def _fed(self, events: list[bytes]) -> bool:
        """Take a streamed call's events; whether live text may flow now (never a
        re-ask's)."""
        assert self.heard is not None
        flows = self.heard.feed(events)
        return flows and self.heard is self.live

    def _decide(self, reply: Any) -> Decision:
        """The core's decision, and what the log line says of it (a turn may decide twice)."""
        live, heard = self.live, self.heard
        if isinstance(reply, StreamEnd) and heard is not None:
            reply = heard.reply(reply.cut)
        decision = decide(self.reasking.plan_for_answer(), reply)
        learn_from(self.plan.extraction.thinking, self.plan.model, decision.outcome,
                   self.services.thinking)
        held = (live is None or heard is not live or not isinstance(decision, Answer)
                or live.holds(decision.result))
        decision = self.reasking.decided(decision, held)
        if live is not None and self.reasking.recovered(decision):
            assert isinstance(decision, Answer)
            decision = replace(decision, result=as_said(decision.result, live.said()))
        log = self.log
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
        return decision

    def respond(self) -> Response:
        """The response, once the turn is over or the client's stream has begun."""
        actions = self.driver.actions()
        try:
            for action in actions:
                if isinstance(action, waiting.Commit):
                    return self._stream(actions)
                if isinstance(action, waiting.Deliver):
                    return self._whole(action.answer)
                if isinstance(action, waiting.Fail):
                    return error_response(self.front, action.error, self.log)
                if isinstance(action, waiting.Abandon):
                    return error_response(self.front, client_disconnected(), self.log)
        except BaseException:
            self.driver.call.cancel()  # a failure of our own: upstream must not go on for nobody
            raise
        raise AssertionError("the waiting machine ended without an outcome")

    def _keep(self, result: TurnResult) -> None:
        """Leave a delivered answer in the store, when the front keeps answers and the
        request asked it to (before the client sees the end: a GET right after finds it)."""
        storing = self.front.storing
        kept = storing.keep(self.plan, result) if storing is not None else None
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
        self._keep(answer.result)
        if not self.plan.client_stream:
            body = self.front.render_json(self.plan, answer.result)
            self.log.bytes_out = len(body)
            return Response(body, status=200, content_type="application/json")
        writer = self.front.stream_writer(self.plan)

        def whole() -> Iterator[bytes]:
            yield writer.head() + writer.answer(answer.result)

        return self._stream_response(writer, whole())

    def _stream(self, actions: Iterator[ClientAction]) -> Response:
        """The stream: its head at once, heartbeats while upstream works, then the answer or
        the error in the stream, which always ends."""
        writer = self.front.stream_writer(self.plan)
        log = self.log

        def frames() -> Iterator[bytes]:
            finished = False
            try:
                yield writer.head()
                for action in actions:
                    if isinstance(action, waiting.Flow):
                        yield self._flow(writer)
                    elif isinstance(action, waiting.Heartbeat):
                        log.heartbeats += 1
                        yield writer.heartbeat()
                    elif isinstance(action, waiting.Deliver):
                        finished = True
                        self._keep(action.answer.result)
                        yield writer.answer(action.answer.result)
                    elif isinstance(action, waiting.Fail):
                        log.error = action.error.code or action.error.type
                        finished = True
                        yield writer.error(action.error)
            except Exception:
                self.services.logger.exception("turn failed (request %s)", log.request_id)
                log.error = "internal_error"
                finished = True
                self.driver.call.cancel()
                yield writer.error(ProxyError(500, "The proxy failed to render this answer.",
                                              code="internal_error"))
            finally:
                actions.close()  # type: ignore[attr-defined]
                if not finished:  # the client left (Abandon, or a failed write)
                    self.driver.call.cancel()
                    log.error = log.error or "client_disconnected"

        return self._stream_response(writer, frames())

    def _flow(self, writer: StreamWriter) -> bytes:
        """The live reasoning and text the turn lets out now, in the front's wire format."""
        assert self.live is not None
        if self.log.first_text_ms is None:
            self.log.first_text_ms = round((time.monotonic() - self.log.started) * 1000, 1)
        return written(self.live.release(), writer)

    def _stream_response(self, writer: StreamWriter, frames: Iterator[bytes]) -> Response:
        log = self.log
        log.status = 200

        def counted() -> Iterator[bytes]:
            try:
                for data in frames:
                    log.bytes_out += len(data)
                    yield data
            finally:
                frames.close()  # type: ignore[attr-defined]  # cuts upstream if the client left
                self.services.emit(log)

        return Response(counted(), status=200,
                        headers={"Content-Type": writer.content_type, **SSE_HEADERS})


def _completed(placement: Placement, path: str, body: bytes, headers: dict[str, str],
               timeouts: Timeouts, max_bytes: int) -> UpstreamCall[Any]:
    """A buffered POST on the placement's replica, started; sent once more, to another replica,
    when the first could not be reached, answered 502/503/504 or broke off before its end
    (nothing of it has reached the client)."""
    def work(tracker: Any) -> Any:
        return placement.run(lambda upstream: upstream.complete(path, body, headers, timeouts,
                                                            tracker, max_bytes),
                         worth_another=_not_answered, cancelled=lambda: tracker.cancelled)
    return UpstreamCall(work).start()


def _not_answered(outcome: Any) -> bool:
    """A buffered call's outcome that another replica may do better with."""
    if isinstance(outcome, ProxyError):
        return isinstance(outcome, Unreached) or outcome.code == "upstream_cut"
    return outcome.status in RETRY_STATUSES


def error_response(front: Front, error: ProxyError, log: RequestLog | None = None) -> Response:
    """`error` in `front`'s envelope, recorded in the request's log line."""
    rendered = front.error_response(error)
    response = Response(rendered.body, status=rendered.status, headers=dict(rendered.headers),
                        content_type="application/json")
    if log is not None:
        log.status = rendered.status
        log.error = (error.code or error.type)[:64]  # upstream's own code may be anything
        log.bytes_out = response.content_length or 0
    return response
