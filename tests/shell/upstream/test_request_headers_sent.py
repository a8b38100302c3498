"""The headers a request sends upstream: each as the client gave it (name, value, order),
through http.client's own checks; a value that is urllib3's SKIP_HEADER marker goes urllib3's
way, refused before anything is sent, as it always was."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from urllib3.util import SKIP_HEADER

from proxy.base.errors import ProxyError
from proxy.shell.upstream.client import Timeouts, Upstream
from tests.fake_vllm import FakeVLLM

TIMEOUTS = Timeouts(5.0, 5.0)


@pytest.fixture
def fake() -> Iterator[FakeVLLM]:
    server = FakeVLLM()
    yield server
    server.close()


def test_each_header_goes_upstream_as_given(fake):
    headers = {"X-First": "1", "Authorization": "Bearer k", "X-Spaced": "a  b", "X-Last": "z"}
    reply = Upstream(fake.url).complete_get("/v1/models", headers, TIMEOUTS, 0)
    assert reply.status == 200
    sent = fake.received[-1].headers
    assert {name: sent[name] for name in headers} == headers
    names = [name for name in sent if name in headers]
    assert names == list(headers)


def test_a_header_value_http_client_refuses_is_this_request_s_fault(fake):
    with pytest.raises(ProxyError) as refused:
        Upstream(fake.url).complete_get("/v1/models", {"X-Bad": "a\r\nInjected: 1"}, TIMEOUTS, 0)
    assert refused.value.status == 502
    assert "ValueError" in refused.value.message
    assert fake.received == []


def test_the_skip_header_marker_is_refused_as_urllib3_refuses_it(fake):
    with pytest.raises(ProxyError) as refused:
        Upstream(fake.url).complete_get("/v1/models", {"X-Marker": SKIP_HEADER}, TIMEOUTS, 0)
    assert refused.value.status == 502
    assert "ValueError" in refused.value.message
    assert fake.received == []
