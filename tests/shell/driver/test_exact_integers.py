"""Integers past 64 bits in a request reach upstream exactly, on a turn with tools and on the
passthrough (an adversarial probe of the production server, issue 22)."""

from __future__ import annotations

import json

import orjson
import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion

pytestmark = pytest.mark.integration

USER = [{"role": "user", "content": "hi"}]
BIG = 10**30


@pytest.mark.parametrize("extra", [{"tools": TOOLS}, {"store": False}])
def test_integers_past_64_bits_reach_upstream_exactly(fake, proxy, extra):
    fake.answer(Answer(body=vllm_completion("fine")))
    body = orjson.dumps({"model": "q", "messages": USER, **extra}).replace(
        b'"model"', b'"seed": %d, "model"' % BIG)
    response = requests.post(proxy.url + "/v1/chat/completions", data=body, timeout=10,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    assert b'"seed":%d' % BIG in fake.received[-1].raw.replace(b" ", b"")
    assert json.loads(fake.received[-1].raw)["seed"] == BIG
