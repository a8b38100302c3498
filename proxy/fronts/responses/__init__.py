"""The Responses API front (`POST /v1/responses`): Codex CLI, OpenClaw's `openai-responses`,
n8n, the Hermes agent. A request is translated to a chat completion (`request`), runs on the
same turn as chat (buffered, calls extracted and repaired, every policy), and is answered as
a `response` object or the official event stream (`output`, `stream`). With `store` (the
API's default), the answer is kept by the shell's store so that `previous_response_id`,
`GET` and `DELETE /v1/responses/{id}` work (`Storing`, its `ROUTES`). The setting
`responses_mode: relay` sends the endpoint upstream unchanged instead.
"""

from __future__ import annotations

from typing import Any

import orjson

from ...base.config import Config
from ...base.errors import ProxyError, bad_request
from ...base.frozen import replaced
from ...turn.plan import PassthroughPlan, TurnPlan, parse_body, plan_turn
from ...turn.result import TurnResult
from .. import (
    STORED_DELETE,
    STORED_GET,
    ErrorResponse,
    Front,
    Incoming,
    Recall,
    Route,
    Sample,
    StoredResponse,
    Storing,
)
from ..chat import openai_error
from .checks import check_item_types, check_metadata, kept_items
from .output import ResponsesData, final_response, output_items
from .request import previous_missing, translate
from .sample import sample_calls, sample_request
from .stream import ResponsesStream

NAME = "responses"
PATH = "/v1/responses"
_ECHOED = ("instructions", "max_output_tokens", "metadata", "model", "previous_response_id",
           "temperature", "top_p", "user")


def _echo(body: dict[str, Any]) -> dict[str, Any]:
    """The request fields a `response` object repeats, with the API's defaults."""
    echo = {key: body.get(key) for key in _ECHOED}
    echo["model"] = echo["model"] or ""
    echo["metadata"] = echo["metadata"] or {}
    echo["parallel_tool_calls"] = body.get("parallel_tool_calls") is not False
    echo["tool_choice"] = body.get("tool_choice") or "auto"
    echo["tools"] = body.get("tools") or []
    echo["text"] = body.get("text") or {"format": {"type": "text"}}
    reasoning = body.get("reasoning") or {}
    echo["reasoning"] = {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")}
    echo["store"] = body.get("store") is not False
    echo["truncation"] = "disabled"
    return echo


def _history(body: dict[str, Any], recall: Recall) -> list[dict[str, Any]]:
    """The items of the kept conversation the request continues ([] for none)."""
    previous = body.get("previous_response_id")
    if previous is None:
        return []
    if not isinstance(previous, str):
        raise bad_request("previous_response_id must be a string.", "previous_response_id")
    items = recall(previous)
    if items is None:
        raise previous_missing(previous)
    return items


def parse(incoming: Incoming, config: Config) -> TurnPlan[ResponsesData] | PassthroughPlan:
    """The plan for a POST to /v1/responses; the incoming request's `recall` reads the
    store for `previous_response_id`. Raises ProxyError for bad requests."""
    raw = incoming.body
    body = parse_body(raw)
    model = body.get("model")
    model = model if isinstance(model, str) else ""
    stream = body.get("stream") is True
    if config.responses_mode == "relay":
        return PassthroughPlan(raw, config.for_model(model), model=model, client_stream=stream)
    translation = translate(body, _history(body, incoming.recall))
    check_metadata(body.get("metadata"))
    check_item_types(translation.items)
    turn = ResponsesData.new(_echo(body), translation.toolset.refs,
                             store=body.get("store") is not False,
                             previous=body.get("previous_response_id"),
                             items=tuple(translation.items))
    plan = plan_turn(translation.body, config.for_model(model), client_stream=stream,
                     include_usage=False, front_data=turn)
    return replaced(plan, rewrites=plan.rewrites + tuple(translation.notes))


def render_json(plan: TurnPlan[ResponsesData], result: TurnResult) -> bytes:
    """The `response` object, as the body of a non-streaming answer."""
    return orjson.dumps(final_response(plan.front_data, result))


def keep(plan: TurnPlan[ResponsesData], result: TurnResult) -> StoredResponse | None:
    """What the store keeps of a delivered answer (nothing with `store: false`)."""
    turn = plan.front_data
    if not turn.store:
        return None
    output = output_items(turn, result)
    body = orjson.dumps(final_response(turn, result, output))
    return StoredResponse(turn.id, turn.previous, kept_items([*turn.items, *output]), body)


def keeping(plan: TurnPlan[ResponsesData]) -> int | None:
    """The bytes of input items the turn will keep (None with `store: false`)."""
    turn = plan.front_data
    return len(orjson.dumps(kept_items(list(turn.items)))) if turn.store else None


def error_response(error: ProxyError) -> ErrorResponse:
    """The error before any stream started, in OpenAI's envelope (the prompt is in
    `input`)."""
    return openai_error(error, "input")


def deleted(response_id: str) -> bytes:
    """The body of a successful DELETE."""
    return orjson.dumps({"id": response_id, "object": "response", "deleted": True})


def missing(response_id: str) -> ProxyError:
    """A response id the store does not hold (never kept, deleted, or expired)."""
    return ProxyError(404, f"Response with id '{response_id}' not found.",
                      param="response_id", code="response_not_found")


def storing(config: Config) -> bool:
    """Whether the settings let the front keep answers (else `GET`/`DELETE` by id are
    relayed, as `responses_mode: relay` sends the whole endpoint upstream)."""
    return config.responses_mode == "translate"


ROUTES = (Route("POST", PATH),
          Route("GET", PATH + "/{id}", STORED_GET, storing),
          Route("DELETE", PATH + "/{id}", STORED_DELETE, storing))

FRONT: Front[ResponsesData] = Front(
    NAME, ROUTES, parse, render_json, ResponsesStream.for_plan, error_response,
    key_headers=("Authorization", "Api-Key"),
    storing=Storing(keep, deleted, missing, keeping),
    sample=Sample(sample_request, sample_calls))
