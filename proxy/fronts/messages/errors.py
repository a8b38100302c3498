"""The Messages front's errors: Anthropic's envelope and error types, and a context
window's refusal in the words Claude Code acts on."""

from __future__ import annotations

from typing import Any

import orjson

from ...base.errors import ProxyError
from ...turn.context_window import overflow_of, refuses_window
from .. import ErrorResponse

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}
_OVERLOADED = (503, 529)  # an upstream (or a stopping proxy) that refuses for load


def error_body(error: ProxyError) -> tuple[int, dict[str, Any]]:
    """The HTTP status and Anthropic's envelope for an error: its status mapped to
    Anthropic's types (503 and 529, refusals for load, as 529 overloaded_error)."""
    status = error.status
    if status in _OVERLOADED:
        status, kind = 529, "overloaded_error"
    elif status in _ERROR_TYPES:
        kind = _ERROR_TYPES[status]
    elif 400 <= status < 500:
        kind = "invalid_request_error"
    else:
        status, kind = max(status, 500), "api_error"
    return status, {"type": "error", "error": {"type": kind, "message": _message(error)}}


def _message(error: ProxyError) -> str:
    """The error's message; a context window's refusal in Anthropic's words, which Claude
    Code acts on (it lowers `max_tokens`, or compacts the conversation, by the numbers)."""
    if not refuses_window(error.status, error.message):
        return error.message
    overflow = overflow_of(error.message)
    if overflow is None:  # said without counts: the upstream's words after Anthropic's
        return f"prompt is too long: {error.message}"
    if overflow.leaves_no_room:
        return f"prompt is too long: {overflow.prompt} tokens > {overflow.window} maximum"
    return (f"input length and `max_tokens` exceed context limit: {overflow.prompt} + "
            f"{overflow.asked} > {overflow.window}, decrease input length or `max_tokens` "
            "and try again")


def error_response(error: ProxyError) -> ErrorResponse:
    """The error before any stream started: Anthropic's envelope and status, with the
    error's headers (`retry-after`, `WWW-Authenticate`)."""
    status, body = error_body(error)
    return ErrorResponse(status, orjson.dumps(body), error.headers)
