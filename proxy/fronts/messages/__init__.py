"""The Anthropic Messages front (`POST /v1/messages`): Claude Code and every Messages client.

Its request is translated to a chat completion (`request`; `count` for `count_tokens`) and
answered by the same turn as the chat front's; the turn's result comes back as an
Anthropic `message` (`output`, whose content blocks the stream shares), or as its event
stream (`stream`): `message_start`, per content block `content_block_start` →
`content_block_delta` (`thinking_delta`, `text_delta`, `input_json_delta` holding the call's
arguments JSON) → `content_block_stop`, then `message_delta` (stop_reason, usage) and
`message_stop`. Heartbeats are `event: ping`; errors use Anthropic's envelope and error types
(`errors`).
"""

from __future__ import annotations

from ...base.config import Config
from ...base.frozen import replaced
from ...turn.plan import TurnPlan, parse_body, plan_turn
from .. import COUNT, Counter, Front, Incoming, Route, Sample
from .count import count_of, count_request, count_response
from .errors import error_body, error_response
from .output import MessagesData, message_of, render_json, stop_of, usage_of
from .request import translate
from .sample import sample_calls, sample_request
from .stream import PING, MessagesStream

__all__ = ["COUNT_TOKENS_PATH", "FRONT", "NAME", "PATH", "PING", "MessagesData",
           "MessagesStream", "count_of", "count_request", "count_response", "error_body",
           "error_response", "message_of", "parse", "render_json", "stop_of", "usage_of"]

NAME = "messages"
PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"


def parse(incoming: Incoming, config: Config) -> TurnPlan[MessagesData]:
    """A Messages request as a turn: translated to a chat body, then planned as the chat
    front's turns are (every Messages request is a turn, with or without tools)."""
    body = parse_body(incoming.body)
    model = body.get("model")
    config = config.for_model(model if isinstance(model, str) else "")
    request = translate(body, config)
    plan = plan_turn(request.body, config, client_stream=request.stream, include_usage=False,
                     front_data=MessagesData(request.model, request.stop_sequences))
    return replaced(plan, rewrites=(*request.rewrites, *plan.rewrites))


FRONT: Front[MessagesData] = Front(
    NAME, (Route("POST", PATH), Route("POST", COUNT_TOKENS_PATH, COUNT)), parse,
    render_json, MessagesStream.for_plan, error_response,
    key_headers=("X-Api-Key", "Authorization"),
    counter=Counter(count_request, count_of, count_response),
    sample=Sample(sample_request, sample_calls))
