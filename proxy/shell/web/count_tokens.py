"""A front's token count (Messages' `POST /v1/messages/count_tokens`): the prompt its
request would send, counted by the upstream's tokenizer (vLLM's `/tokenize`, given the same
chat), else estimated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base.errors import ProxyError
from ...fronts.registry import Routed
from ...telemetry.request_log import RequestLog
from ..runtime.wire import Response
from ..upstream.client import Timeouts
from .handlers import incoming_of

if TYPE_CHECKING:
    from .wiring import Proxy

TOKENIZE_PATH = "/tokenize"
_TOKENIZE_READ_SECONDS = 30.0  # a tokenizer answers in milliseconds; a stuck one is estimated


def count_tokens(app: Proxy, routed: Routed, log: RequestLog, raw: bytes) -> Response:
    """The count of a count request: the tokenizer's where it answers one, else the
    front's estimate (noted in the log line)."""
    front = routed.front
    counter = front.counter
    assert counter is not None
    log.front = front.name
    counting = counter.request(incoming_of(routed, raw), app.config)
    log.model = counting.model
    config = counting.config
    headers = app.upstream_headers(config, buffered=True)
    timeouts = Timeouts(config.connect_timeout_seconds,
                        min(config.read_timeout_seconds, _TOKENIZE_READ_SECONDS))
    try:
        reply = app.upstreams[app.replicas.choose(config, None)].complete(
            TOKENIZE_PATH, counting.tokenize, headers, timeouts, max_bytes=1 << 26)
        log.upstream_status = reply.status
        count = counter.count_of(reply.status, reply.body)
    except ProxyError as error:
        log.notes.append(f"count_tokens:tokenizer_unreachable:{error.code}")
        count = None
    if count is None:
        log.notes.append("count_tokens:estimated")
        count = counting.estimate
    body = counter.response(count)
    log.status, log.bytes_out = 200, len(body)
    return Response(body, status=200, content_type="application/json")
