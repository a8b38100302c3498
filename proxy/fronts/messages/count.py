"""The Messages front's `POST /v1/messages/count_tokens`: the prompt a turn would send (the
same translation), as a body for the upstream's tokenizer and as an estimate."""

from __future__ import annotations

import orjson

from ...base.config import Config
from ...turn.plan import parse_body
from .. import CountRequest, Incoming
from .request import estimate_tokens, tokenize_body, translate


def count_request(incoming: Incoming, config: Config) -> CountRequest:
    """`POST /v1/messages/count_tokens`: the same translation as a turn's (so that the count
    is of the prompt the turn would send), as a /tokenize body and as an estimate."""
    body = parse_body(incoming.body)
    model = body.get("model")
    config = config.for_model(model if isinstance(model, str) else "")
    chat = translate(body, config, for_count=True).body
    return CountRequest(chat["model"], config, orjson.dumps(tokenize_body(chat)),
                        estimate_tokens(chat))


def count_of(status: int, body: bytes) -> int | None:
    """The prompt's token count in a /tokenize answer, or None when it holds none."""
    if status != 200:
        return None
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    count = answer.get("count") if isinstance(answer, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def count_response(count: int) -> bytes:
    """The count_tokens answer."""
    return orjson.dumps({"input_tokens": count})
