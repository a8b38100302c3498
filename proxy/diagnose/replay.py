"""`python app.py replay FILE`: what the proxy would send for a captured exchange, and why.

A capture is `{"request": <the client's body>, "response": <the upstream's non-streaming
chat completion>}`: one JSON object, a JSON list of them, or JSONL, such as the proxy's own
log lines written with `log_bodies`. The front that answered is the log line's `front` (or
`path`; a capture may name either too; none: chat), found through the fronts' registry, so
a turn from `/v1/messages` or `/v1/responses` replays to what that front sent its client.
Each one runs through the front's own parse and rendering and the server's turn core (plan
→ decide → the front's JSON or stream), so a bad model output can be reported, reproduced
and fixed from one file, without a GPU. An answer the server refuses (empty, not a
completion, not JSON, an upstream error) replays as the error the server sends; a log line
with no upstream response in it (upstream unreachable) is reported as having nothing to
replay, and one replay cannot reproduce (an unknown front, a conversation the store held
and the capture does not) as not replayable; the rest of the file still replays.

Everything here is pure (no HTTP); `main` is the command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..base.config import Config
from ..base.errors import ProxyError
from ..fronts import Ask, Front, Incoming, Reply
from ..fronts.registry import front_for, front_named
from ..shell.config_load import ConfigError, load_config
from ..turn.core import Answer, UpstreamReply, decide
from ..turn.plan import PassthroughPlan, TurnPlan
from .capture import (
    LOGGED_FACTS,
    Exchange,
    ReplayError,
    parse_exchanges,
    read_exchanges,
)

__all__ = ["Exchange", "Replay", "ReplayError", "format_report", "main", "parse_exchanges",
           "read_exchanges", "replay_exchange", "replay_file"]

EXIT_OK = 0
EXIT_CORE_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_REPLAYABLE = 3
DEFAULT_FRONT = "chat"  # a capture that names no front: a chat completion
_SHOWN_CHARS = 300  # of a changed upstream value, in the human report


@dataclass
class Replay:
    """What the proxy would answer the client for one exchange, and the diagnostics."""

    where: str
    status: int | None
    content_type: str
    output: bytes
    diagnostics: dict[str, Any] = field(default_factory=dict)
    replayed: bool = True  # False: reported as not replayed (`diagnostics.not_replayable`)
    unsupported: bool = False  # not replayed for want of what the capture does not hold

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (`--json`): the output as text, the diagnostics as data."""
        return {"exchange": self.where, "replayed": self.replayed,
                "unsupported": self.unsupported, "status": self.status,
                "content_type": self.content_type,
                "output": self.output.decode("utf-8", "replace"),
                "diagnostics": self.diagnostics}


# -- replaying -------------------------------------------------------------------------------


class _NotReplayable(Exception):
    """What the capture does not hold for a replay; the message is one line for a person."""


def _front_of(exchange: Exchange) -> Front:
    """The front that answered the captured request: by name, else by path, else chat."""
    if exchange.front is not None:
        front = front_named(exchange.front)
        if front is None:
            raise _NotReplayable(f"the front {exchange.front!r} is not one this proxy serves")
        return front
    if exchange.path is not None:
        front = front_for("POST", exchange.path)
        if front is None:
            raise _NotReplayable(f"{exchange.path} is no front's path (a relayed request: "
                                 "the proxy sends it upstream unchanged)")
        return front
    front = front_named(DEFAULT_FRONT)
    assert front is not None
    return front


class _Recall:
    """The store as the capture saw it: the items it gave the front for each answer id
    (None where it held none); an id the capture does not hold is noted, not invented."""

    def __init__(self, recalled: dict[str, Any] | None) -> None:
        self.recalled = recalled or {}
        self.missing: list[str] = []

    def __call__(self, key: str) -> list[dict[str, Any]] | None:
        if key not in self.recalled:
            self.missing.append(key)
            return None
        items = self.recalled[key]
        return items if isinstance(items, list) else None


def _plan(front: Front, exchange: Exchange, config: Config,
          recall: _Recall) -> TurnPlan | PassthroughPlan | Reply | Ask:
    """The front's plan for the captured request, as the server makes it (ProxyError: the
    request is refused; _NotReplayable: it continues a conversation the capture lacks)."""
    raw = orjson.dumps(exchange.request)
    try:
        plan = front.parse(Incoming.post(exchange.path or front.path, raw, recall), config)
    except ProxyError:
        if not recall.missing:
            raise
        plan = None
    if recall.missing:
        raise _NotReplayable(
            f"the request continues the stored answer {recall.missing[0]!r}, whose "
            "conversation the capture does not hold (a log line written by a proxy older "
            "than this one, or a capture without 'recalled')")
    assert plan is not None
    return plan


def _upstream_changes(request: dict[str, Any], upstream: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys the proxy adds, removes or changes on the way upstream."""
    changes: dict[str, Any] = {}
    for key in sorted(set(request) | set(upstream)):
        if key not in upstream:
            changes[key] = {"removed": request[key]}
        elif key not in request:
            changes[key] = {"added": upstream[key]}
        elif request[key] != upstream[key]:
            changes[key] = {"from": request[key], "to": upstream[key]}
    return changes


def _settings(config: Config) -> dict[str, Any]:
    """The settings that shape a replay's outcome (those in force for the request's model)."""
    return {"formats": list(config.formats), "upstream_tool_parser": config.upstream_tool_parser,
            "tool_temperature": config.tool_temperature,
            "reasoning_field": config.reasoning_field}


def _error(where: str, front: Front, error: ProxyError, diagnostics: dict[str, Any]) -> Replay:
    """The error as the front answers it before any stream has started."""
    rendered = front.error_response(error)
    return Replay(where, rendered.status, "application/json", rendered.body, diagnostics)


def _raw_body(response: Any) -> bytes:
    """The upstream's body as bytes: raw text as it was, decoded JSON re-encoded."""
    return response.encode() if isinstance(response, str) else orjson.dumps(response)


def upstream_reply(exchange: Exchange) -> UpstreamReply:
    """The captured upstream answer as the server receives it: its status (200 unless the
    log line says otherwise) and its body's bytes."""
    return UpstreamReply(exchange.upstream_status or 200, {}, _raw_body(exchange.response))


def _upstream_refused(where: str, front: Front, plan: TurnPlan, error: ProxyError,
                      diagnostics: dict[str, Any]) -> Replay:
    """What the server sends when it cannot use the upstream's answer: the error with its
    status, or for a streaming client the stream's head, then the error in the stream."""
    diagnostics.update(upstream_error={"status": error.status, "code": error.code,
                                       "message": error.message}, tool_calls=0, calls=[])
    if not plan.client_stream:
        return _error(where, front, error, diagnostics)
    diagnostics["notes"] = [
        "the server sends this once the stream has started (upstream answered after "
        f"commit_window_seconds, {plan.config.commit_window_seconds:g} s); an answer within "
        f"it gets HTTP {front.error_response(error).status} with the error envelope instead"]
    writer = front.stream_writer(plan)
    return Replay(where, 200, writer.content_type, writer.head() + writer.error(error),
                  diagnostics)


def _not_replayed(exchange: Exchange, diagnostics: dict[str, Any], reason: str, *,
                  unsupported: bool = False) -> Replay:
    """An exchange reported instead of replayed: nothing to replay (no upstream response
    captured) or, `unsupported`, not what replay can reproduce from the capture."""
    logged = exchange.logged or {}
    diagnostics["not_replayable"] = {"reason": reason,
                                     **{key: logged.get(key) for key in LOGGED_FACTS}}
    status = logged.get("status")
    return Replay(exchange.where, status if isinstance(status, int) else None, "", b"",
                  diagnostics, replayed=False, unsupported=unsupported)


def replay_exchange(exchange: Exchange, config: Config) -> Replay:
    """Run one exchange through its front and the proxy's core, as the server does. Ids the
    server mints (a stream's, a response's, a message's, the calls') are minted afresh."""
    where = exchange.where
    diagnostics: dict[str, Any] = {"exchange": where}
    try:
        front = _front_of(exchange)
        diagnostics["front"] = front.name
        plan = _plan(front, exchange, config, _Recall(exchange.recalled))
    except _NotReplayable as exc:
        return _not_replayed(exchange, diagnostics, str(exc), unsupported=True)
    except ProxyError as error:
        diagnostics.update(mode="refused", rewrites=[], upstream_body=None,
                           refused={"status": error.status, "code": error.code,
                                    "message": error.message})
        return _error(where, front, error, diagnostics)
    if isinstance(plan, Ask):
        return _not_replayed(exchange, diagnostics, "answered by one upstream call, not a "
                             "turn (nothing of it is captured)", unsupported=True)
    if isinstance(plan, Reply):  # the front answered it itself: nothing went upstream
        diagnostics.update(mode="answered", upstream_body=None)
        return Replay(where, plan.status, plan.content_type, plan.body, diagnostics)
    upstream_body = orjson.loads(plan.upstream_body)
    diagnostics.update(
        mode=plan.mode, model=plan.model, client_stream=plan.client_stream,
        include_usage=isinstance(plan, TurnPlan) and plan.include_usage,
        rewrites=list(plan.rewrites),
        upstream_body=upstream_body,
        # A front whose request is not a chat completion translates it: no diff to show.
        upstream_changes=(_upstream_changes(exchange.request, upstream_body)
                          if front.upstream_path is None else None),
        settings=_settings(plan.config),
    )
    if exchange.response is None:
        return _not_replayed(exchange, diagnostics, "no upstream response captured")
    if isinstance(plan, PassthroughPlan):
        diagnostics["notes"] = ["passthrough: the proxy relays the upstream's answer "
                                "unchanged (no tools, tool_choice none, or a relayed front)"]
        return Replay(where, exchange.upstream_status or 200, "application/json",
                      _raw_body(exchange.response), diagnostics)

    decision = decide(plan, upstream_reply(exchange))
    if not isinstance(decision, Answer):
        refused = _upstream_refused(where, front, plan, decision.error, diagnostics)
        if decision.ask_again or decision.fit is not None:
            refused.diagnostics["notes"] = [_asked_again(plan, decision.ask_again),
                                            *refused.diagnostics.get("notes", ())]
        return refused
    return _answered(where, front, plan, decision, diagnostics)


def _asked_again(plan: TurnPlan, for_a_call: bool) -> str:
    """The note for an answer the server does not send at once: it asks upstream again."""
    if for_a_call:
        retries = plan.config.required_call_retries
        return ("tool_call_required_but_none_found: the server asks upstream again "
                f"(required_call_retries: {retries}); if every answer is like this one, it "
                "sends this")
    return ("the context window refused the completion asked: the server asks again for what "
            "fits (fit_max_tokens), and sends this only if that is refused too")


def _answered(where: str, front: Front, plan: TurnPlan, answer: Answer,
              diagnostics: dict[str, Any]) -> Replay:
    """The replay of an answer the server sends: its calls and repairs, then the output."""
    result, outcome = answer.result, answer.outcome
    calls = [{"choice": choice.index, "id": call.id, "name": call.name,
              "arguments": call.arguments, "format": call.format}
             for choice in result.choices for call in choice.calls]
    notes = [f"{note} (dropped {answer.dropped_calls})" if note.endswith("kept_first_call")
             else note for note in answer.notes]
    diagnostics.update(
        tool_calls=len(calls),
        calls=calls,
        formats=list(outcome.formats),
        repairs=[{"format": r.format, "repair": r.repair, "tool": r.tool}
                 for r in outcome.repairs],
        left_as_text=[{"format": t.format, "reason": t.reason, "tool": t.tool}
                      for t in outcome.left_as_text],
        finish_reason=[{"before": before, "after": after} for before, after in
                       zip(outcome.finish_before, outcome.finish_after, strict=True)],
        notes=notes,
    )
    if not plan.client_stream:
        return Replay(where, 200, "application/json", front.render_json(plan, result),
                      diagnostics)
    writer = front.stream_writer(plan)
    output = writer.head() + writer.answer(result)
    return Replay(where, 200, writer.content_type, output, diagnostics)


def replay_file(path: str, config: Config) -> list[Replay]:
    """Every exchange of the capture at `path`, replayed (ReplayError for unusable input)."""
    return [replay_exchange(exchange, config) for exchange in read_exchanges(path)]


# -- reporting -------------------------------------------------------------------------------


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _tagged(items: list[dict[str, Any]], kind: str) -> str:
    return ", ".join(f"{item['format']}:{item[kind]}" + (f" ({item['tool']})" if item["tool"]
                                                         else "") for item in items) or "none"


def format_report(replay: Replay) -> str:
    """One exchange for a person: the diagnostics, then exactly what the client would get."""
    d = replay.diagnostics
    lines = [f"== exchange {replay.where} =="]
    if "front" in d:
        lines.append(f"front       {d['front']}")
    if replay.unsupported:
        lines.append(f"replay      not replayable: {d['not_replayable']['reason']}")
        return "\n".join(lines) + "\n"
    if d["mode"] == "refused":
        refused = d["refused"]
        lines.append(f"refused     HTTP {refused['status']} {refused['code']}: "
                     f"{refused['message']}")
    else:
        streamed = ("client streamed" + (", include_usage" if d["include_usage"] else "")
                    if d["client_stream"] else "client did not stream")
        lines.append(f"request     {d['mode']}, model {d['model'] or '(none)'}, {streamed}")
        lines.append(f"rewrites    {', '.join(d['rewrites']) or 'none'}")
        changes = d["upstream_changes"]
        described = [] if changes is not None else ["the request translated to a chat "
                                                    "completion"]
        for key, change in (changes or {}).items():
            if "removed" in change:
                described.append(f"-{key}")
            elif "added" in change:
                described.append(f"+{key}={_short(change['added'])}")
            elif key == "messages":
                described.append("~messages")
            else:
                described.append(f"~{key}={_short(change['to'])}")
        lines.append(f"upstream    {' '.join(described) or 'the request unchanged'}"
                     "  (the whole body: --json)")
    answered = d["mode"] in ("buffered", "streamed")  # the turn's modes (not passthrough)
    if answered and "upstream_error" in d:
        error = d["upstream_error"]
        lines.append(f"answer      refused: HTTP {error['status']} {error['code']}: "
                     f"{error['message']}")
    elif answered and replay.replayed:
        settings = d["settings"]
        lines.append(f"settings    formats {','.join(settings['formats'])}, "
                     f"upstream_tool_parser {str(settings['upstream_tool_parser']).lower()}")
        calls = [f"{c['name']} {c['arguments']} [{c['format']}]" for c in d["calls"]]
        lines.append(f"tool calls  {len(calls)}" + (": " + "; ".join(calls) if calls else ""))
        lines.append(f"formats     {', '.join(d['formats']) or 'none'}")
        lines.append(f"repairs     {_tagged(d['repairs'], 'repair')}")
        lines.append(f"left text   {_tagged(d['left_as_text'], 'reason')}")
        finish = [f"{f['before']} → {f['after']}" if f["before"] != f["after"] else
                  f"{f['after']} (unchanged)" for f in d["finish_reason"]]
        lines.append(f"finish      {'; '.join(finish)}")
    for note in d.get("notes") or ():
        lines.append(f"note        {note}")
    if not replay.replayed:
        facts = d["not_replayable"]
        lines.append(f"replay      not replayable: {facts['reason']} (status "
                     f"{facts['status']}, error {facts['error']})")
        return "\n".join(lines) + "\n"
    lines.append(f"-- the proxy would send: HTTP {replay.status}, {replay.content_type} --")
    text = replay.output.decode("utf-8", "replace")
    lines.append(text.rstrip("\n"))
    return "\n".join(lines) + "\n"


# -- command line ----------------------------------------------------------------------------


def _config(path: str | None) -> Config:
    """The settings as the server would load them (defaults < file < environment)."""
    return load_config(["--config", path] if path else [])


def main(argv: Sequence[str]) -> int:
    """`python app.py replay FILE [--config FILE] [--json]`: exit 0; 2 on unusable input;
    3 when an exchange could not be replayed (one line on stderr each, the rest printed)."""
    parser = argparse.ArgumentParser(
        prog="app.py replay",
        description="Print what the proxy would send the client for a captured exchange "
                    '{"request": ..., "response": ...} (one JSON object, a list, or JSONL), '
                    "with what it found, repaired and left as text.")
    parser.add_argument("file", help="the capture file")
    parser.add_argument("--config", help="the proxy's JSON config file (as for the server)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per exchange (JSON lines), for scripts")
    args = parser.parse_args(list(argv))
    try:
        replays = replay_file(args.file, _config(args.config))
    except (ReplayError, ConfigError) as exc:
        print(f"toolcall-proxy replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a bug in the core: the server would answer 500 here
        print(f"toolcall-proxy replay: the proxy's core failed on {args.file} "
              f"({type(exc).__name__}: {exc}); please report it with the file",
              file=sys.stderr)
        return EXIT_CORE_FAILED
    for number, replay in enumerate(replays):
        if args.json:
            sys.stdout.write(orjson.dumps(replay.as_dict()).decode() + "\n")
        else:
            sys.stdout.write(("\n" if number else "") + format_report(replay))
    unsupported = [replay for replay in replays if replay.unsupported]
    for replay in unsupported:
        print(f"toolcall-proxy replay: {replay.where}: cannot replay: "
              f"{replay.diagnostics['not_replayable']['reason']}", file=sys.stderr)
    return EXIT_NOT_REPLAYABLE if unsupported else EXIT_OK
