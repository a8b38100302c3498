"""`doctor`'s probe of each front: the tool turn as each API's clients send it (the front's
`Sample`), planned by that front, sent to the live server, decided by the turn core and
rendered by the front, so the report says what a chat client, Codex (Responses) and Claude
Code (Messages) would each get with the recommended settings. Only the fronts' registry is
named here: a new front with a `Sample` is probed with no change to this module."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import ProxyError
from ...fronts import Ask, Front, Incoming, Reply
from ...fronts.registry import FRONTS
from ...shell.upstream.client import Timeouts, Upstream
from ...turn.core import Answer, decide
from ...turn.plan import PassthroughPlan

CHAT_PATH = "/v1/chat/completions"  # where a front that relays the client's path sends it


@dataclass(frozen=True)
class Turn:
    """The probe turn every front sends: model, tool (a chat function), prompt, length."""

    model: str
    tool: dict[str, Any]
    prompt: str
    max_tokens: int


@dataclass
class FrontProbe:
    """One front's tool turn against the server: what its client would get."""

    front: str
    path: str
    status: int | None = None  # the status the client would get (None: no answer)
    calls: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None  # the error the client would get, or the network's failure
    relayed: bool = False  # the front relays this API unchanged (responses_mode: relay)
    elapsed_ms: float | None = None
    recovered: bool = False  # the answer holds a call to the probe's tool

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return dataclasses.asdict(self)


def front_settings(upstream_tool_parser: bool, formats: list[str]) -> Config:
    """The settings each front is probed with: the recommended ones (the defaults else)."""
    return dataclasses.replace(Config(), upstream_tool_parser=upstream_tool_parser,
                               formats=tuple(formats))


def probe_front(path: str, front: Front, turn: Turn, config: Config, upstream: Upstream,
                headers: dict[str, str], timeouts: Timeouts) -> FrontProbe:
    """The front's sample turn, planned, sent, decided and rendered as the server does."""
    assert front.sample is not None
    probe = FrontProbe(front.name, path)
    raw = orjson.dumps(front.sample.request(turn.model, turn.tool, turn.prompt,
                                            turn.max_tokens))
    try:
        plan = front.parse(Incoming.post(path, raw), config)
    except ProxyError as error:  # the front refused its own sample: a bug, reported
        probe.status, probe.error = front.error_response(error).status, error.message
        return probe
    if isinstance(plan, (Reply, Ask)):  # answered without a turn: no tool turn
        probe.error = "answered without a turn"
        return probe
    if isinstance(plan, PassthroughPlan):
        probe.relayed = True
        return probe
    started = time.monotonic()
    try:
        reply = upstream.complete(front.upstream_path or CHAT_PATH, plan.upstream_body,
                                  headers, timeouts)
    except ProxyError as exc:
        probe.error = exc.message
        return probe
    finally:
        probe.elapsed_ms = round((time.monotonic() - started) * 1000, 1)
    decision = decide(plan, reply)
    if not isinstance(decision, Answer):
        probe.status = front.error_response(decision.error).status
        probe.error = decision.error.message
        return probe
    probe.status = 200
    probe.calls = front.sample.calls(orjson.loads(front.render_json(plan, decision.result)))
    probe.recovered = any(call["name"] == turn.tool["name"] for call in probe.calls)
    return probe


def probe_fronts(turn: Turn, config: Config, upstream: Upstream, headers: dict[str, str],
                 timeouts: Timeouts) -> list[FrontProbe]:
    """Every front the registry lists (that can describe its clients' tool turn)."""
    return [probe_front(front.path, front, turn, config, upstream, headers, timeouts)
            for front in FRONTS if front.sample is not None]


def front_line(probe: dict[str, Any]) -> str:
    """One front's probe, as a person reads it."""
    head = f"front {probe['front']:<10} {probe['path']}: "
    if probe["relayed"]:
        return head + "relayed to the upstream unchanged (not probed)"
    if probe["status"] is None:
        return head + f"no answer: {probe['error']}"
    if probe["error"] is not None:
        return head + f"HTTP {probe['status']}: {probe['error']}"
    calls = "; ".join(f"{c['name']}({c['arguments']})" for c in probe["calls"])
    return head + (f"HTTP 200 in {probe['elapsed_ms']:.0f} ms, the client gets "
                   f"{calls or 'no call'}")
