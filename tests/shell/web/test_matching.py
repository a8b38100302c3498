"""The app's URL matching, kept per path and method (`_Matched`), routes as Werkzeug's does
on every request: the same rule, each request its own view arguments, refusals never kept."""

from __future__ import annotations

import pytest
from flask import request

from proxy.shell.config_load import build_config
from proxy.shell.web.app import create_app


@pytest.fixture
def app():
    app = create_app(build_config({"upstream": "http://127.0.0.1:9", "log_level": "warning"}))
    app.config["TESTING"] = True
    return app


def _routed(app, path: str, method: str = "GET") -> tuple[str | None, dict | None, object]:
    with app.test_request_context(path, method=method):  # (pushed: matched)
        ctx_request = request._get_current_object()
        rule = ctx_request.url_rule
        return (rule.endpoint if rule else None, ctx_request.view_args,
                ctx_request.routing_exception)


def test_a_match_kept_is_the_match_werkzeug_makes(app):
    first = _routed(app, "/v1/chat/completions", "POST")
    again = _routed(app, "/v1/chat/completions", "POST")
    assert first == again == ("dispatch_path", {"path": "v1/chat/completions"}, None)
    assert _routed(app, "/proxy/health") == ("health", {}, None)
    assert _routed(app, "/proxy/health", "POST")[0] == "dispatch_path"
    assert _routed(app, "/") == ("dispatch", {"path": ""}, None)
    assert len(app.matches) == 4


def test_view_arguments_are_each_requests_own(app):
    with app.test_request_context("/proxy/status/capture/1-2"):
        request.view_args["key"] = "changed"
    assert _routed(app, "/proxy/status/capture/1-2")[1] == {"key": "1-2"}


def test_a_refused_match_is_not_kept(app):
    endpoint, _, refused = _routed(app, "/proxy/status/capture/", "TRACE")
    assert endpoint is None
    assert refused is not None
    assert app.matches == {}


def test_the_kept_matches_are_bounded(app):
    for n in range(300):
        _routed(app, f"/v1/x{n}")
    assert 0 < len(app.matches) <= 256
