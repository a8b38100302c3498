"""CORS through the real proxy: a preflight is answered by the proxy and never reaches
upstream, one from an origin not listed is refused, and an origin let in (listed, or a desktop
app's own) may read the answer, still needing a key where the proxy has keys (an adversarial
probe of the production server, issue 22)."""

from __future__ import annotations

import orjson
import pytest
import requests

pytestmark = pytest.mark.integration

PREFLIGHT = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization,content-type"}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models", "/anything/else"])
def test_a_preflight_is_answered_by_the_proxy_and_never_reaches_upstream(
        fake, start_proxy, path):
    proxy = start_proxy(api_keys=["sk-one"], upstream_api_key="sk-upstream",
                        allowed_origins=["http://localhost:3000"])
    reply = requests.options(proxy.url + path, headers=PREFLIGHT, timeout=5,
                             data=orjson.dumps({"model": "anything"}))
    assert reply.status_code == 204
    assert reply.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
    assert "POST" in reply.headers["Access-Control-Allow-Methods"]
    assert reply.headers["Access-Control-Allow-Headers"] == "authorization,content-type"
    assert fake.received == []


def test_a_preflight_from_an_origin_not_listed_is_refused(fake, start_proxy):
    proxy = start_proxy()  # no origin is allowed by default
    reply = requests.options(proxy.url + "/v1/chat/completions", headers=PREFLIGHT, timeout=5)
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in reply.headers
    assert fake.received == []


def test_an_allowed_origin_can_read_the_answer_and_still_needs_a_key(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-one"], allowed_origins=["*"])
    origin = {"Origin": "http://app.example"}
    refused = requests.get(proxy.url + "/v1/models", headers=origin, timeout=5)
    assert refused.status_code == 401
    keyed = requests.get(proxy.url + "/v1/models", timeout=5,
                         headers={**origin, "Authorization": "Bearer sk-one"})
    assert keyed.status_code == 200
    assert keyed.headers["Access-Control-Allow-Origin"] == "http://app.example"
    plain = requests.get(proxy.url + "/v1/models", timeout=5,
                         headers={"Authorization": "Bearer sk-one"})
    assert "Access-Control-Allow-Origin" not in plain.headers


def test_an_app_origin_let_in_by_its_preflight_may_read_the_answer(fake, start_proxy):
    """A desktop app's own origin (Tauri, Electron, VS Code's webviews) comes in without a
    listing: the answer it is let in for carries the CORS header its preflight promised, or
    the app's webview could send the request and never read it."""
    proxy = start_proxy()
    origin = {"Origin": "tauri://localhost"}
    preflight = requests.options(proxy.url + "/v1/models", timeout=5, headers={
        **origin, "Access-Control-Request-Method": "GET"})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "tauri://localhost"
    reply = requests.get(proxy.url + "/v1/models", headers=origin, timeout=5)
    assert reply.status_code == 200
    assert reply.headers["Access-Control-Allow-Origin"] == "tauri://localhost"
    foreign = requests.get(proxy.url + "/v1/models", timeout=5,
                           headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert "Access-Control-Allow-Origin" not in foreign.headers
