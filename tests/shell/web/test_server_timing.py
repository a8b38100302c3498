"""Every answer says where its time went: a `Server-Timing` header (`proxy;dur=…,
upstream;dur=…`, as its head goes out) and the same split in the log line, over the whole
request (`proxy_ms`, `upstream_wait_ms`); `server_timing: false` drops the header only."""

from __future__ import annotations

import re

import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "Read /etc/hosts."}]
CALL = '<tool_call>\n{"name": "read", "arguments": {"path": "/etc/hosts"}}\n</tool_call>'
_METRIC = re.compile(r"(\w+);dur=([0-9.]+)")


def _timing(response: requests.Response) -> dict[str, float]:
    """The proxy's Server-Timing metrics, by name (its own header, of those there are)."""
    values = [v for name, v in response.raw.headers.items() if name.lower() == "server-timing"]
    ours = [v for v in values if v.startswith("proxy;")]
    assert len(ours) == 1, values
    return {name: float(ms) for name, ms in _METRIC.findall(ours[0])}


def _turn(proxy, *, stream: bool, tools: bool = True) -> requests.Response:
    body = {"model": "qwen", "messages": MESSAGES, "stream": stream}
    if tools:
        body["tools"] = TOOLS
    return requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=20,
                         stream=stream)


def test_a_buffered_json_turn_tells_its_wait_on_upstream_and_the_proxys_own_time(
        fake, proxy, log_lines):
    fake.answer(Answer(body=vllm_completion(CALL), delay=0.3))
    response = _turn(proxy, stream=False)
    assert response.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read"
    timing = _timing(response)
    assert set(timing) == {"proxy", "upstream"}
    assert timing["upstream"] >= 300  # the fake answered after 0.3 s
    assert 0 < timing["proxy"] < timing["upstream"]
    line = log_lines(1)[0]
    assert line["upstream_wait_ms"] >= 300
    assert line["proxy_ms"] > 0
    assert line["proxy_ms"] + line["upstream_wait_ms"] == pytest.approx(line["total_ms"], abs=0.2)


def test_a_stream_that_commits_before_upstream_answers_tells_the_wait_until_its_head(
        fake, start_proxy, log_lines):
    proxy = start_proxy(commit_window_seconds=0.1, log_level="info")
    fake.answer(Answer(body=vllm_completion(CALL), delay=1.0))
    response = _turn(proxy, stream=True)
    timing = _timing(response)  # the head left at the commit, upstream still working
    body = response.content
    assert b"tool_calls" in body
    assert body.rstrip().endswith(b"data: [DONE]")
    assert 100 <= timing["upstream"] + timing["proxy"] < 1000
    line = log_lines(1)[0]
    assert line["upstream_wait_ms"] >= 1000  # over the whole request: the call's whole wait


def test_a_relayed_request_tells_the_wait_until_upstreams_head_beside_upstreams_own(
        fake, proxy, log_lines):
    fake.answer(Answer(body=vllm_completion("Hello."), delay=0.2,
                       header_lines=[("Server-Timing", "engine;dur=190")]))
    response = _turn(proxy, stream=False, tools=False)
    assert response.json()["choices"][0]["message"]["content"] == "Hello."
    assert _timing(response)["upstream"] >= 200
    assert "engine;dur=190" in response.raw.headers.getlist("Server-Timing")  # relayed as is
    assert log_lines(1)[0]["upstream_wait_ms"] >= 200


def test_the_header_is_off_by_a_setting_and_the_log_line_keeps_the_split(
        fake, start_proxy, log_lines):
    proxy = start_proxy(server_timing=False, log_level="info")
    fake.answer(Answer(body=vllm_completion(CALL), delay=0.1))
    response = _turn(proxy, stream=False)
    assert response.status_code == 200
    assert "Server-Timing" not in response.headers
    line = log_lines(1)[0]
    assert line["upstream_wait_ms"] >= 100
    assert line["proxy_ms"] > 0


def test_an_answer_refused_before_upstream_waited_for_nothing(proxy, fake):
    response = requests.post(proxy.url + "/v1/chat/completions", data=b"{not json",
                             headers={"Content-Type": "application/json"}, timeout=10)
    assert response.status_code == 400
    timing = _timing(response)
    assert timing["upstream"] == 0
    assert timing["proxy"] > 0
    assert fake.chat_requests() == []
