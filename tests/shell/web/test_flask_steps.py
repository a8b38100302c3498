"""The app's own steps of Flask's request handling (`_App.dispatch_request`,
`process_response`, `_Request.close`) and of Werkzeug's (`door.content_length`) give what
Flask's and Werkzeug's own give: the same responses for the same requests, hooks run in the
same order, the same content length for every environ."""

from __future__ import annotations

import io
from typing import Any

import pytest
from flask import Flask, after_this_request
from flask import Request as FlaskRequest
from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.wrappers import Request

from proxy.shell.config_load import build_config
from proxy.shell.web import app as app_module
from proxy.shell.web.door import content_length


class _FlaskOwn(app_module._App):
    """The app with Flask's own dispatch, response processing and request class."""

    dispatch_request = Flask.dispatch_request
    process_response = Flask.process_response
    request_class = FlaskRequest


def _app(own: bool) -> Flask:
    app = app_module.create_app(build_config({"upstream": "http://127.0.0.1:9",
                                              "log_level": "warning"}))
    if own:
        app.__class__ = _FlaskOwn
    return app


_REQUESTS: list[dict[str, Any]] = [
    {"path": "/proxy/health"},
    {"path": "/proxy/health", "method": "POST"},  # relayed: the upstream is not there
    {"path": "/proxy/status/capture/1-2"},
    {"path": "/v1/chat/completions", "method": "OPTIONS",
     "headers": {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}},
    {"path": "/v1/chat/completions", "method": "POST", "data": b"{not json",
     "headers": {"Content-Type": "application/json", "Origin": "http://localhost:3000"}},
    {"path": "/v1/models", "headers": {"Host": "evil.example"}},
    {"path": "/v1/chat/completions", "method": "BREW"},  # no route takes it
]


def _seen(app: Flask, request: dict[str, Any]) -> tuple[Any, ...]:
    response = app.test_client().open(**request)
    headers = sorted((k, v) for k, v in response.headers.items()
                     if k not in ("X-Request-Id", "Date", "Server-Timing"))
    body = response.get_data()
    return response.status_code, headers, body.replace(
        response.headers.get("X-Request-Id", "").encode() or b"\0", b"ID")


@pytest.mark.parametrize("request_", _REQUESTS)
def test_a_request_gets_the_response_flasks_own_steps_give(request_):
    assert _seen(_app(False), request_) == _seen(_app(True), request_)


def _hook_order(own: bool) -> list[str]:
    app, order = _app(own), []

    @app.before_request
    def once_more() -> None:
        after_this_request(lambda r: order.append("this request's") or r)

    app.after_request(lambda r: order.append("first registered") or r)
    app.after_request(lambda r: order.append("last registered") or r)
    app.test_client().get("/proxy/health")
    return order


def test_after_request_hooks_run_in_flasks_order():
    assert _hook_order(False) == _hook_order(True) == [
        "this request's", "last registered", "first registered"]


def test_a_blueprints_hooks_go_flasks_way():
    app = _app(False)
    app.after_request_funcs.setdefault("somewhere", []).append(lambda r: r)
    assert app.test_client().get("/proxy/health").status_code == 200


def test_uploaded_files_are_closed_as_werkzeug_closes_them():
    app = _app(False)
    upload = io.BytesIO(b"data")
    with app.test_request_context("/", method="POST",
                                  data={"file": (upload, "a.txt")}) as context:
        files = context.request.files
        opened = files["file"].stream
    assert opened.closed


_values = st.one_of(st.none(), st.text(st.sampled_from("0123456789 -+_\t,chunkedCHUNKEDx٣"),
                                       max_size=8), st.sampled_from(
    ["chunked", "gzip, chunked", "Chunked", "identity", "10", " 10 ", "-1", "+5", "1_0"]))


@settings(max_examples=500, deadline=None)
@given(length=_values, encoding=_values)
def test_the_content_length_is_werkzeugs(length, encoding):
    environ: dict[str, Any] = {"REQUEST_METHOD": "POST", "wsgi.input": io.BytesIO(b"")}
    if length is not None:
        environ["CONTENT_LENGTH"] = length
    if encoding is not None:
        environ["HTTP_TRANSFER_ENCODING"] = encoding
    assert content_length(environ) == Request(environ).content_length
