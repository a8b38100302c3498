"""OpenAI's error envelope, and the exception that carries one through the proxy."""

from __future__ import annotations

from typing import Any

import orjson

# The `type` OpenAI uses for each status class; clients key retries on status, humans on type.
_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def error_type_for(status: int) -> str:
    """The OpenAI error `type` that fits an HTTP status."""
    if status in _TYPE_BY_STATUS:
        return _TYPE_BY_STATUS[status]
    return "invalid_request_error" if 400 <= status < 500 else "server_error"


def error_body(
    message: str, type_: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """`{"error": {"message", "type", "param", "code"}}` with `type` and `code` as strings."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class ProxyError(Exception):
    """A failure the client must see as an OpenAI error with a given HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_ or error_type_for(status)
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The error envelope."""
        return error_body(self.message, self.type, self.param, self.code)

    def json_bytes(self) -> bytes:
        """The envelope serialised for an HTTP body or an SSE data line."""
        return orjson.dumps(self.body())


def bad_request(message: str, param: str | None = None,
                code: str = "invalid_request") -> ProxyError:
    """A request the proxy cannot take: a 400 naming the field at fault (`param`), which each
    front words in its own envelope (the one 400 of the core and every front)."""
    return ProxyError(400, message, param=param, code=code)


def proxy_restarting() -> ProxyError:
    """The error for a request the stopping server ends: retryable, as OpenAI's 503s are."""
    return ProxyError(503, "The proxy is restarting; send the request again.",
                      type_="server_error", code="proxy_restarting", headers={"Retry-After": "1"})


def client_disconnected() -> ProxyError:
    """The client left before its answer was ready (499, nginx's code for it): never sent,
    only logged and counted."""
    return ProxyError(499, "The client went away.", code="client_disconnected")


def answer_not_json() -> ProxyError:
    """A buffered answer whose body is not JSON (an HTML page, a cut body)."""
    return ProxyError(502, "The upstream answered with a body that is not JSON.",
                      type_="upstream_error", code="upstream_invalid_json")


def answer_not_completion(detail: object) -> ProxyError:
    """A buffered answer that is JSON but not a chat completion."""
    return ProxyError(502, f"The upstream's answer is not a chat completion ({detail}).",
                      type_="upstream_error", code="upstream_bad_shape")


def _shown(value: object) -> str:
    """An upstream's error field as text; "" for one nested too deep to show."""
    try:
        return str(value)
    except RecursionError:
        return ""


def from_upstream(status: int, body: bytes, headers: dict[str, str]) -> ProxyError:
    """An upstream error response as a `ProxyError` with the same status.

    vLLM's message is kept; its integer `code` and any non-string `type` become strings.
    Understands `{"error": {...}}`, vLLM's older flat `{"object": "error", ...}`, and
    anything else (an HTML page, plain text) as a short excerpt.
    """
    message = ""
    type_ = None
    param = None
    code: str | None = None
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        parsed = None
    detail = None
    if isinstance(parsed, dict):
        inner = parsed.get("error")
        if isinstance(inner, dict):
            detail = inner
        elif isinstance(inner, str):
            detail = {"message": inner}
        elif "message" in parsed or parsed.get("object") == "error":
            detail = parsed
    if detail is not None:
        message = _shown(detail.get("message") or "")
        if isinstance(detail.get("type"), str) and detail["type"]:
            type_ = detail["type"]
        if isinstance(detail.get("param"), str):
            param = detail["param"]
        if detail.get("code") is not None:
            code = _shown(detail["code"])
    if not message:
        excerpt = body[:300].decode("utf-8", "replace").strip()
        message = f"upstream answered HTTP {status}" + (f": {excerpt}" if excerpt else "")
    kept = {k: v for k, v in headers.items() if k.lower() == "retry-after"}
    return ProxyError(
        status, message, type_=type_ or error_type_for(status), param=param,
        code=code or f"upstream_http_{status}", headers=kept,
    )
