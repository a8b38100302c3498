"""The door: API keys, the upstream key, header hygiene, no open proxy, bad requests."""

from __future__ import annotations

import json
import socket

import openai
import orjson
import pytest
import requests

from proxy.shell.config_load import ConfigError, build_config
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion

pytestmark = pytest.mark.integration

USER = [{"role": "user", "content": "hi"}]


def _raw(proxy, request_line: bytes, body: bytes = b"") -> bytes:
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_line + b"\r\nHost: localhost\r\nConnection: close\r\n"
                     + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_api_keys_guard_every_route(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-one", "sk-two"])
    anonymous = openai.OpenAI(base_url=proxy.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        anonymous.chat.completions.create(model="q", messages=USER, tools=TOOLS)
    assert caught.value.status_code == 401
    assert caught.value.body["code"] == "invalid_api_key"
    assert requests.get(proxy.url + "/v1/models", timeout=5).status_code == 401
    assert fake.received == []
    keyed = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-two", max_retries=0)
    assert keyed.models.list().data
    other = requests.get(proxy.url + "/v1/models", headers={"x-api-key": "sk-one"}, timeout=5)
    assert other.status_code == 200
    # The proxy's own endpoints stay open unless asked otherwise.
    assert requests.get(proxy.url + "/proxy/health", timeout=5).status_code == 200
    assert requests.get(proxy.url + "/proxy/metrics", timeout=5).status_code == 200


def test_a_cors_preflight_is_answered_without_a_key_and_nothing_else_is(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-one"], allowed_origins=["http://localhost:3000"])
    preflight = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    reply = requests.options(proxy.url + "/v1/chat/completions", headers=preflight, timeout=5)
    assert reply.status_code == 204  # answered by the proxy itself, never relayed
    plain = requests.options(proxy.url + "/v1/chat/completions", timeout=5,
                             headers={"Origin": "http://localhost:3000"})
    assert plain.status_code == 401
    posted = requests.post(proxy.url + "/v1/chat/completions", headers=preflight, timeout=5,
                           json={"model": "q", "messages": USER})
    assert posted.status_code == 401
    assert fake.received == []


def test_proxy_endpoints_can_be_keyed(start_proxy):
    proxy = start_proxy(api_keys=["sk-one"], protect_proxy_endpoints=True)
    for path in ("/proxy/health", "/proxy/metrics"):
        assert requests.get(proxy.url + path, timeout=5).status_code == 401
        keyed = requests.get(proxy.url + path, timeout=5,
                             headers={"Authorization": "Bearer sk-one"})
        assert keyed.status_code == 200


def test_upstream_key_replaces_the_clients(fake, start_proxy):
    proxy = start_proxy(upstream_api_key="sk-vllm")
    fake.answer(Answer(body=vllm_completion("ok")))
    proxy.client().chat.completions.create(model="q", messages=USER, tools=TOOLS)
    requests.get(proxy.url + "/v1/models", timeout=5, headers={"x-api-key": "client"})
    for received in fake.received:
        headers = {k.lower(): v for k, v in received.headers.items()}
        assert headers["authorization"] == "Bearer sk-vllm"
        assert "x-api-key" not in headers


def test_client_key_is_forwarded_when_no_upstream_key(fake, proxy):
    proxy.client().models.list()
    assert fake.received[-1].headers["Authorization"] == "Bearer sk-test"


def test_hop_by_hop_headers_are_dropped_and_host_is_the_upstreams(fake, proxy):
    fake.answer(Answer(body=b"{}", headers={"Content-Type": "application/json",
                                            "Connection": "X-Secret-Hop", "X-Secret-Hop": "1",
                                            "Proxy-Authenticate": "Basic", "Upgrade": "h2c"}))
    response = requests.post(proxy.url + "/v1/embeddings", json={"input": "x"}, timeout=5,
                             headers={"Connection": "keep-alive, X-Client-Hop",
                                      "X-Client-Hop": "1", "Keep-Alive": "timeout=5",
                                      "TE": "trailers", "Proxy-Authorization": "Basic eA==",
                                      "X-Kept": "yes"})
    sent = {k.lower(): v for k, v in fake.received[-1].headers.items()}
    for name in ("x-client-hop", "keep-alive", "te", "proxy-authorization"):
        assert name not in sent
    assert sent["x-kept"] == "yes"
    assert sent["host"] == fake.url.removeprefix("http://")
    for name in ("X-Secret-Hop", "Proxy-Authenticate", "Upgrade"):
        assert name not in response.headers


def test_repeated_response_headers_are_relayed_line_by_line(fake, proxy):
    cookies = [("Set-Cookie", "a=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT"), ("Set-Cookie", "b=2")]
    fake.answer(Answer(body=b"{}", headers={"Content-Type": "application/json"},
                       header_lines=[*cookies, ("Vary", "Accept"), ("Vary", "Origin")]))
    raw = _raw(proxy, b"GET /v1/models/x HTTP/1.1")
    head = raw.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")[1:]
    lines = [tuple(line.split(": ", 1)) for line in head]
    assert [line for line in lines if line[0] == "Set-Cookie"] == cookies
    assert [v for k, v in lines if k == "Vary"] in (["Accept", "Origin"], ["Accept, Origin"])


def test_the_proxys_own_key_never_goes_upstream(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-door"])
    keyed = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-door", max_retries=0)
    keyed.models.list()
    requests.get(proxy.url + "/v1/models", headers={"x-api-key": "sk-door"}, timeout=5)
    for received in fake.received:
        assert "sk-door" not in json.dumps(received.headers)
    with_upstream = start_proxy(api_keys=["sk-door"], upstream_api_key="sk-vllm")
    requests.get(with_upstream.url + "/v1/models", headers={"x-api-key": "sk-door"}, timeout=5)
    assert fake.received[-1].headers["Authorization"] == "Bearer sk-vllm"
    assert "X-Api-Key" not in fake.received[-1].headers


def test_an_empty_api_key_is_refused_at_start():
    with pytest.raises(ConfigError, match="empty key"):
        build_config({"api_keys": ["sk-a", " "]})


def test_httpoxy_proxy_header_is_not_forwarded(fake, proxy):
    requests.get(proxy.url + "/v1/models", headers={"Proxy": "http://evil:3128"}, timeout=5)
    assert "proxy" not in {k.lower() for k in fake.received[-1].headers}


@pytest.mark.parametrize("line", [
    b"GET http://169.254.169.254/latest/meta-data HTTP/1.1",
    b"GET /v1/../../etc/passwd HTTP/1.1",
    b"GET /v1/%2e%2e/admin HTTP/1.1",
    b"GET /v1\\..\\..\\admin HTTP/1.1",
    b"GET /v1/%5c..%5cadmin HTTP/1.1",
    b"GET /v1/models%00.json HTTP/1.1",
    b"GET /v1/models%0d%0aX-Injected:%201 HTTP/1.1",
])
def test_no_open_proxy(fake, proxy, line):
    answer = _raw(proxy, line)
    assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 404"))  # 404: no route matches
    assert b'"invalid_path"' in answer or b'"not_found"' in answer
    assert fake.received == []


BAD_REQUESTS = [
    (b"not json at all", None),
    (b"[1, 2, 3]", None),
    (b'{"model": "q", "tools": [' + orjson.dumps(TOOLS[0]) + b"]}", "messages"),
    (orjson.dumps({"model": "q", "messages": "hi", "tools": TOOLS}), "messages"),
    (orjson.dumps({"model": "q", "messages": USER, "tools": {"a": 1}}), "tools"),
    (orjson.dumps({"model": "q", "messages": USER, "tools": [{"type": "function"}]}),
     "tools[0].function.name"),
    (orjson.dumps({"model": "q", "messages": USER, "tools": [
        {"type": "function", "function": {"name": "f", "parameters": "object"}}]}),
     "tools[0].function.parameters"),
    (b"[" * 100_000 + b"]" * 100_000, None),
    (b'{"model": "q", "messages": [{"role": "user", "content": "\xff\xfe"}]}', None),
]


@pytest.mark.parametrize(("body", "param"), BAD_REQUESTS)
def test_bad_requests_get_a_4xx_envelope_naming_the_param(fake, proxy, body, param):
    response = requests.post(proxy.url + "/v1/chat/completions", data=body, timeout=10,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    assert "Traceback" not in response.text
    assert fake.chat_requests() == []


def test_body_over_the_limit_is_413(fake, start_proxy):
    proxy = start_proxy(max_body_bytes=1024)
    response = requests.post(proxy.url + "/v1/chat/completions", timeout=10,
                             json={"model": "q", "messages": [{"role": "user",
                                                               "content": "x" * 4096}]})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert fake.received == []
    assert requests.get(proxy.url + "/proxy/health", timeout=5).status_code == 200


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings"])
def test_a_chunked_body_over_the_limit_is_413_not_cut(fake, start_proxy, path):
    proxy = start_proxy(max_body_bytes=1024)

    def chunked(size: int):
        payload = orjson.dumps({"model": "q", "input": "x" * size,
                                "messages": [{"role": "user", "content": "hi"}]})
        for i in range(0, len(payload), 300):
            yield payload[i:i + 300]

    response = requests.post(proxy.url + path, data=chunked(4096), timeout=10,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert fake.received == []
    fake.answer(Answer(body=vllm_completion("fine")))
    small = requests.post(proxy.url + path, data=chunked(100), timeout=10,
                          headers={"Content-Type": "application/json"})
    assert small.status_code == 200
    assert orjson.loads(fake.received[-1].raw)["input"] == "x" * 100
