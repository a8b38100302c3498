"""`python app.py replay FILE`: what the proxy would send for a captured exchange, and why.

A capture is `{"request": <the client's chat completion body>, "response": <the upstream's
non-streaming chat completion>}`: one JSON object, a JSON list of them, or JSONL. Each one
runs through the server's own turn core (plan → decide → the chat front's JSON or SSE), so
a bad model output can be reported, reproduced and fixed from one file, without a GPU. An
answer the server refuses (empty, not a completion, not JSON, an upstream error) replays as
the error the server sends; a proxy log line with no upstream response in it (upstream
unreachable) is reported as not replayable, and the rest of the file still replays.

Everything here is pure (no HTTP); `main` is the command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .config import Config
from .config_load import ConfigError, load_config
from .errors import ProxyError
from .fronts.chat import ChatStream, StreamIdentity
from .turn.core import Answer, UpstreamReply, decide
from .turn.plan import PassthroughPlan, TurnPlan, plan_chat

EXIT_OK = 0
EXIT_CORE_FAILED = 1
EXIT_BAD_INPUT = 2
_SHOWN_CHARS = 300  # of a changed upstream value, in the human report


class ReplayError(ValueError):
    """An input that cannot be replayed; the message is one line for a person."""


@dataclass(frozen=True)
class Exchange:
    """One captured exchange and where it came from (`file`, or `file:line` for JSONL).

    `response` is the upstream's body: decoded JSON, its raw text (a string), or None when
    none was captured. `logged` holds a proxy log line's `status`, `error` and
    `upstream_status` (an upstream status >= 400 makes the response an upstream error)."""

    request: dict[str, Any]
    response: Any
    where: str
    logged: dict[str, Any] | None = None

    @property
    def upstream_status(self) -> int | None:
        """The upstream's HTTP status as the log line recorded it (None: not known)."""
        status = (self.logged or {}).get("upstream_status")
        return status if isinstance(status, int) and not isinstance(status, bool) else None


@dataclass
class Replay:
    """What the proxy would answer the client for one exchange, and the diagnostics."""

    where: str
    status: int | None
    content_type: str
    output: bytes
    diagnostics: dict[str, Any] = field(default_factory=dict)
    replayed: bool = True  # False: reported as not replayable (`diagnostics.not_replayable`)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (`--json`): the output as text, the diagnostics as data."""
        return {"exchange": self.where, "replayed": self.replayed, "status": self.status,
                "content_type": self.content_type,
                "output": self.output.decode("utf-8", "replace"),
                "diagnostics": self.diagnostics}


# -- reading captures ------------------------------------------------------------------------


def _error_message(response: dict[str, Any]) -> str | None:
    """The message of an error envelope (OpenAI's or vLLM's flat one), or None."""
    inner = response.get("error")
    if isinstance(inner, dict):
        return str(inner.get("message") or "no message")
    if isinstance(inner, str):
        return inner
    if response.get("object") == "error":
        return str(response.get("message") or "no message")
    return None


_LOGGED_FACTS = ("status", "error", "upstream_status")


def _exchange(value: Any, where: str) -> Exchange:
    """Check one decoded capture's shape (a proxy log line written with `log_bodies` is one;
    its `response` may be missing, when the proxy got none)."""
    logged = None
    if isinstance(value, dict) and isinstance(value.get("bodies"), dict):
        logged = {key: value.get(key) for key in _LOGGED_FACTS}
        value = value["bodies"]
    if not isinstance(value, dict) or "request" not in value or (
            "response" not in value and logged is None):
        raise ReplayError(f'{where}: expected an object {{"request": {{…}}, "response": {{…}}}}')
    request, response = value["request"], value.get("response")
    if not isinstance(request, dict):
        raise ReplayError(f"{where}: 'request' must be the client's chat completion body "
                          "(a JSON object)")
    if not isinstance(response, (dict, str)) and not (response is None and logged is not None):
        raise ReplayError(f"{where}: 'response' must be the upstream's chat completion "
                          "(a JSON object)")
    exchange = Exchange(request, response, where, logged)
    message = _error_message(response) if isinstance(response, dict) else None
    if message is not None and exchange.upstream_status is None:
        raise ReplayError(f"{where}: 'response' is an error envelope, not a completion "
                          f"(upstream said: {' '.join(message.split())[:200]})")
    return exchange


def parse_exchanges(data: bytes, label: str) -> list[Exchange]:
    """The exchanges in a capture's bytes: one JSON object, a JSON list, or JSONL."""
    data = data.removeprefix(b"\xef\xbb\xbf")  # a BOM some editors write
    if not data.strip():
        raise ReplayError(f"{label}: the file is empty")
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError as whole_error:
        exchanges = []
        for number, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                if not exchanges:  # not JSONL either: the whole file's error says more
                    raise ReplayError(f"{label}: not valid JSON or JSONL "
                                      f"({whole_error})") from None
                raise ReplayError(f"{label}:{number}: not valid JSON ({exc})") from None
            exchanges.append(_exchange(value, f"{label}:{number}"))
        return exchanges
    if isinstance(whole, list):
        if not whole:
            raise ReplayError(f"{label}: the list holds no exchange")
        return [_exchange(value, f"{label}[{i}]") for i, value in enumerate(whole)]
    return [_exchange(whole, label)]


def read_exchanges(path: str) -> list[Exchange]:
    """The exchanges in the capture file at `path`."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_exchanges(data, path)


# -- replaying -------------------------------------------------------------------------------


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


def _refused(where: str, error: ProxyError, diagnostics: dict[str, Any]) -> Replay:
    """The proxy's answer when it refuses the request before calling upstream."""
    diagnostics.update(refused={"status": error.status, "code": error.code,
                                "message": error.message})
    return Replay(where, error.status, "application/json", error.json_bytes(), diagnostics)


def _raw_body(response: Any) -> bytes:
    """The upstream's body as bytes: raw text as it was, decoded JSON re-encoded."""
    return response.encode() if isinstance(response, str) else orjson.dumps(response)


def upstream_reply(exchange: Exchange) -> UpstreamReply:
    """The captured upstream answer as the server receives it: its status (200 unless the
    log line says otherwise) and its body's bytes."""
    return UpstreamReply(exchange.upstream_status or 200, {}, _raw_body(exchange.response))


def _stream_identity(response: Any, model: str) -> StreamIdentity:
    """The upstream's `id` and `created` when it has them (replays stay comparable), else
    fresh ones as the server mints."""
    if (isinstance(response, dict) and isinstance(response.get("id"), str)
            and isinstance(response.get("created"), int)):
        return StreamIdentity(response["id"], response["created"], model)
    return StreamIdentity.new(model)


def _upstream_refused(exchange: Exchange, plan: TurnPlan, error: ProxyError,
                      diagnostics: dict[str, Any]) -> Replay:
    """What the server sends when it cannot use the upstream's answer: the error with its
    status, or for a streaming client the role chunk, the error in the stream, `[DONE]`."""
    diagnostics.update(upstream_error={"status": error.status, "code": error.code,
                                       "message": error.message}, tool_calls=0, calls=[])
    if not plan.client_stream:
        return Replay(exchange.where, error.status, "application/json", error.json_bytes(),
                      diagnostics)
    diagnostics["notes"] = [
        "the server sends this once the stream has started (upstream answered after "
        f"commit_window_seconds, {plan.config.commit_window_seconds:g} s); an answer within "
        f"it gets HTTP {error.status} with the error envelope instead"]
    writer = ChatStream(_stream_identity(exchange.response, plan.model))
    output = writer.head() + writer.error(error)
    return Replay(exchange.where, 200, "text/event-stream", output, diagnostics)


def _not_captured(exchange: Exchange, diagnostics: dict[str, Any]) -> Replay:
    """A log line whose request got no upstream response (unreachable, timed out): nothing
    to replay; what the line recorded is reported."""
    logged = exchange.logged or {}
    diagnostics["not_replayable"] = {"reason": "no upstream response captured",
                                     **{key: logged.get(key) for key in _LOGGED_FACTS}}
    status = logged.get("status")
    return Replay(exchange.where, status if isinstance(status, int) else None, "", b"",
                  diagnostics, replayed=False)


def replay_exchange(exchange: Exchange, config: Config) -> Replay:
    """Run one exchange through the proxy's core, as the server does for a chat completion.

    The stream's `id` and `created` are the upstream's (the server mints fresh ones), so that
    only the minted call ids differ between two replays of the same capture.
    """
    where = exchange.where
    diagnostics: dict[str, Any] = {"exchange": where}
    try:
        plan = plan_chat(orjson.dumps(exchange.request), config)
    except ProxyError as error:
        diagnostics.update(mode="refused", rewrites=[], upstream_body=None)
        return _refused(where, error, diagnostics)
    upstream_body = orjson.loads(plan.upstream_body)
    diagnostics.update(
        mode=plan.mode, model=plan.model, client_stream=plan.client_stream,
        include_usage=isinstance(plan, TurnPlan) and plan.include_usage,
        rewrites=list(plan.rewrites),
        upstream_body=upstream_body,
        upstream_changes=_upstream_changes(exchange.request, upstream_body),
        settings=_settings(plan.config),
    )
    if exchange.response is None:
        return _not_captured(exchange, diagnostics)
    if isinstance(plan, PassthroughPlan):
        diagnostics["notes"] = ["passthrough: no tools (or tool_choice none), so the proxy "
                                "relays the upstream's answer unchanged"]
        return Replay(where, exchange.upstream_status or 200, "application/json",
                      _raw_body(exchange.response), diagnostics)

    decision = decide(plan, upstream_reply(exchange))
    if not isinstance(decision, Answer):
        refused = _upstream_refused(exchange, plan, decision.error, diagnostics)
        if decision.ask_again:
            retries = plan.config.required_call_retries
            refused.diagnostics["notes"] = [
                "tool_call_required_but_none_found: the server asks upstream again "
                f"(required_call_retries: {retries}); if every answer is like this one, it "
                "sends this", *refused.diagnostics.get("notes", ())]
        return refused
    return _answered(where, plan, decision, diagnostics)


def _answered(where: str, plan: TurnPlan, answer: Answer,
              diagnostics: dict[str, Any]) -> Replay:
    """The replay of an answer the server sends: its calls and repairs, then the output."""
    completion, outcome = answer.completion, answer.outcome
    formats = iter(outcome.call_formats)
    calls = [{"choice": choice["index"], "id": call["id"], "name": call["function"]["name"],
              "arguments": call["function"]["arguments"], "format": next(formats, None)}
             for choice in completion["choices"]
             for call in choice["message"].get("tool_calls") or ()]
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
        return Replay(where, 200, "application/json", orjson.dumps(completion), diagnostics)
    writer = ChatStream(StreamIdentity(completion["id"], completion["created"], plan.model),
                        include_usage=plan.include_usage)
    output = writer.head() + writer.answer(completion)
    return Replay(where, 200, "text/event-stream", output, diagnostics)


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
        described = []
        for key, change in changes.items():
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
    """`python app.py replay FILE [--config FILE] [--json]`; exit 0, or 2 on unusable input."""
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
    return EXIT_OK
