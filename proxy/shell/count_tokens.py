"""`POST /v1/messages/count_tokens`: the prompt a Messages request would send, counted by
the upstream's tokenizer (vLLM's `/tokenize`, given the same chat), else estimated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Response

from ..errors import ProxyError
from ..fronts import messages
from ..observe import RequestLog
from .upstream import Timeouts

if TYPE_CHECKING:
    from .handlers import Proxy

TOKENIZE_PATH = "/tokenize"
_TOKENIZE_READ_SECONDS = 30.0  # a tokenizer answers in milliseconds; a stuck one is estimated


def count_tokens(app: Proxy, log: RequestLog, raw: bytes) -> Response:
    """The count of a count_tokens request: the tokenizer's where it answers one, else the
    front's estimate (noted in the log line)."""
    log.front = messages.NAME
    request = messages.count_request(raw, app.config)
    log.model = request.model
    config = request.config
    headers = app.upstream_headers(config, buffered=True)
    timeouts = Timeouts(config.connect_timeout_seconds,
                        min(config.read_timeout_seconds, _TOKENIZE_READ_SECONDS))
    try:
        reply = app.upstreams[app.replicas.choose(config, None)].complete(
            TOKENIZE_PATH, request.tokenize, headers, timeouts, max_bytes=1 << 26)
        log.upstream_status = reply.status
        count = messages.count_of(reply.status, reply.body)
    except ProxyError as error:
        log.notes.append(f"count_tokens:tokenizer_unreachable:{error.code}")
        count = None
    if count is None:
        log.notes.append("count_tokens:estimated")
        count = request.estimate
    body = messages.count_response(count)
    log.status, log.bytes_out = 200, len(body)
    return Response(body, status=200, content_type="application/json")
