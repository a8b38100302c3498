"""The app's URL adapters, kept per environ (`_App.create_url_adapter`), are the adapters
Flask's own makes for that environ: the same server name, script, subdomain, scheme, path,
method, query and websocket flag, and the same request host, found or kept; an environ
Werkzeug refuses is refused the same way and never kept; the kept ones are bounded."""

from __future__ import annotations

import io
from typing import Any

import pytest
from flask import Flask
from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.exceptions import HTTPException

from proxy.shell.config_load import build_config
from proxy.shell.web.app import create_app

_FIELDS = ("map", "server_name", "script_name", "subdomain", "url_scheme", "path_info",
           "default_method", "query_args", "websocket")


@pytest.fixture(scope="module")
def app():
    return create_app(build_config({"upstream": "http://127.0.0.1:9", "log_level": "warning"}))


def _environ(**values: Any) -> dict[str, Any]:
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "SCRIPT_NAME": "",
               "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8080",
               "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
               "wsgi.input": io.BytesIO(b"")}
    for name, value in values.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    return environ


def _made(app, environ: dict[str, Any], own: bool) -> tuple[Any, ...]:
    """What making the adapter gives: its fields and the request's host, or the refusal."""
    request = app.request_class(environ)
    try:
        adapter = (app.create_url_adapter(request) if own
                   else Flask.create_url_adapter(app, request))
    except HTTPException as exc:
        return ("refused", type(exc), exc.description)
    assert adapter is not None
    return (*(getattr(adapter, name) for name in _FIELDS), request.host)


_text = st.text(st.sampled_from("aZ09.-:_[]/%é\u00e9\x00 "), max_size=12)
_hosts = st.one_of(st.none(), _text, st.sampled_from(
    ["127.0.0.1:8080", "localhost", "LocalHost:80", "[::1]:8080", "xn--bcher-kva.example",
     "bücher.example", "a..b", "example.com:443", "", "a" * 70 + ".example"]))


@settings(max_examples=400, deadline=None)
@given(host=_hosts, server=st.one_of(st.none(), _text, st.just("::1")),
       port=st.one_of(st.none(), st.sampled_from(["80", "443", "8080", "x", ""])),
       scheme=st.sampled_from(["http", "https"]),
       connection=st.one_of(st.none(), st.sampled_from(["Upgrade", "keep-alive, upgrade",
                                                         "close"])),
       upgrade=st.one_of(st.none(), st.sampled_from(["websocket", "WebSocket", "h2c"])),
       script=st.one_of(st.none(), st.sampled_from(["", "/app", "/caf\u00c3\u00a9"])),
       path=st.one_of(st.none(), st.sampled_from(["/", "/v1/chat/completions",
                                                   "/proxy/health", "/caf\u00c3\u00a9"]),
                      _text),
       method=st.sampled_from(["GET", "POST", "OPTIONS", "get"]),
       query=st.one_of(st.none(), st.sampled_from(["", "a=1", "upstream=1&x=%20"]), _text))
def test_a_kept_adapter_is_the_one_flask_makes(app, host, server, port, scheme, connection,
                                               upgrade, script, path, method, query):
    environ = dict(HTTP_HOST=host, SERVER_NAME=server, SERVER_PORT=port,
                   HTTP_CONNECTION=connection, HTTP_UPGRADE=upgrade, SCRIPT_NAME=script,
                   PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=method)
    environ["wsgi.url_scheme"] = scheme
    flasks = _made(app, _environ(**environ), own=False)
    assert _made(app, _environ(**environ), own=True) == flasks  # made (or found)
    assert _made(app, _environ(**environ), own=True) == flasks  # found


def test_a_refused_environ_is_not_kept(app):
    app.adapters.clear()
    refused = _made(app, _environ(HTTP_HOST="a" * 70 + ".example"), own=True)
    assert refused[0] == "refused"
    assert app.adapters == {}


def test_a_value_not_a_string_or_a_long_path_is_made_each_time(app):
    app.adapters.clear()
    _made(app, _environ(SERVER_PORT=8080, HTTP_HOST=None), own=True)
    _made(app, _environ(PATH_INFO="/" + "x" * 600), own=True)
    assert app.adapters == {}


def test_the_kept_adapters_are_bounded(app):
    for n in range(300):
        _made(app, _environ(PATH_INFO=f"/v1/x{n}"), own=True)
    assert 0 < len(app.adapters) <= 256
