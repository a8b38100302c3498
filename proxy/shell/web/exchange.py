"""A front's answers without a turn: those made of the upstream's models (a `CATALOG` route:
Ollama's `/api/tags`, `/api/show`) and those of one upstream call, or none (an `EXCHANGE`
route: Ollama's `/api/embed`, `/api/version`). The front's pure half (`Route.serve`) says
what to ask and what its answer becomes; the call is made here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...fronts import Ask, Reply
from ...fronts.registry import Routed
from ...telemetry.request_log import RequestLog
from ..runtime.wire import Response
from .handlers import ask, incoming_of, model_cards

if TYPE_CHECKING:
    from .wiring import Proxy


def _response(reply: Reply, log: RequestLog) -> Response:
    log.status, log.bytes_out = reply.status, len(reply.body)
    return Response(reply.body, status=reply.status, content_type=reply.content_type)


def catalog(app: Proxy, routed: Routed, log: RequestLog, raw: bytes) -> Response:
    """A `CATALOG` route's answer, made of the upstream's models."""
    assert routed.route.serve is not None
    log.front, log.mode = routed.front.name, "catalog"
    cards = model_cards(app, log)
    log.upstream_status = 200
    return _response(routed.route.serve(incoming_of(routed, raw), cards), log)


def exchange(app: Proxy, routed: Routed, log: RequestLog, raw: bytes) -> Response:
    """An `EXCHANGE` route's answer: the front's own, or what it makes of the one upstream
    call it asks for (on the upstream of the model it names)."""
    assert routed.route.serve is not None
    log.front, log.mode = routed.front.name, "exchange"
    asked = routed.route.serve(incoming_of(routed, raw), app.config)
    if isinstance(asked, Reply):
        return _response(asked, log)
    assert isinstance(asked, Ask)
    return _response(ask(app, asked, log), log)
