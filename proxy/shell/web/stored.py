"""`GET` and `DELETE` by id of an answer the store keeps (a front's `STORED_GET` and
`STORED_DELETE` routes, the Responses API's `/v1/responses/{id}`), in its front's shapes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...fronts import STORED_GET
from ...fronts.registry import Routed
from ...telemetry.request_log import RequestLog
from ..runtime.wire import Response

if TYPE_CHECKING:
    from .wiring import Proxy


def stored(app: Proxy, routed: Routed, log: RequestLog, api_key: str | None = None) -> Response:
    """The stored answer `routed.params["id"]`, or its deletion: of the answers of `api_key`
    only (another key's answer is not found, as if never kept)."""
    front, key = routed.front, routed.params["id"]
    storing = front.storing
    assert storing is not None
    log.front, log.mode = front.name, "store"
    store = app.store
    owner = store.owner(api_key)
    if routed.route.action == STORED_GET:
        body = store.get(owner, key)
    else:
        body = storing.deleted(key) if store.delete(owner, key) else None
    if body is None:
        raise storing.missing(key)
    log.status, log.bytes_out = 200, len(body)
    return Response(body, status=200, content_type="application/json")
