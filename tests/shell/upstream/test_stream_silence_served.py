"""A stream's silence under the production server (gunicorn's gevent worker), where each
read's timeout is kept by one timer of the hub's (`runtime.background.watch_silence`), not a
gevent Timeout a read: gaps shorter than read_timeout_seconds, however many, are waited
through; a longer one ends the stream with upstream_timeout, in the streamed mode and in a
relayed stream alike."""

from __future__ import annotations

import json

import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_stream_chunks
from tests.serving import served

pytestmark = pytest.mark.integration

SETTINGS = {"TOOLCALL_PROXY_STREAM_MODE": "stream", "TOOLCALL_PROXY_READ_TIMEOUT_SECONDS": "1",
            "TOOLCALL_PROXY_HEARTBEAT_SECONDS": "0.2"}


def _streamed(url: str, tools: bool) -> tuple[str, dict | None, bool]:
    body = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    if tools:
        body["tools"] = TOOLS
    response = requests.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200
    text, error, done = "", None, False
    for event in response.content.split(b"\n\n"):
        data = event.strip().removeprefix(b"data: ")
        if data == b"[DONE]":
            done = True
        elif data.startswith(b'{"error"'):
            error = json.loads(data)["error"]
        elif data.startswith(b"{"):
            for choice in json.loads(data).get("choices") or ():
                text += (choice.get("delta") or {}).get("content") or ""
    return text, error, done


def test_gaps_shorter_than_the_read_timeout_pass_and_a_longer_one_times_out(fake):
    with served(fake.url, SETTINGS) as server:
        for tools in (True, False):
            fake.answer(Answer(chunks=vllm_stream_chunks("slow but steady", pieces=3),
                               chunk_gap=0.4))
            assert _streamed(server.url, tools) == ("slow but steady", None, True)
            fake.answer(Answer(chunks=vllm_stream_chunks("gone quiet", pieces=3), chunk_gap=3))
            _, error, done = _streamed(server.url, tools)
            assert error is not None, tools
            assert error["code"] == "upstream_timeout", tools
            assert done
