"""Rules every front shares, written once: what of a finished answer the streamed mode still
has to send, and the one 400 each front words in its own envelope."""

from __future__ import annotations

import orjson
import pytest

from proxy.errors import bad_request
from proxy.fronts import unsent
from proxy.fronts.registry import FRONTS


@pytest.mark.parametrize(("text", "sent", "rest"), [
    ("Hello world", "", "Hello world"),
    ("Hello world", "Hello", " world"),
    ("Hello world", "Hello world", ""),
    ("Hello", "Hello world", ""),  # less than was sent: nothing more
    ("Goodbye", "Hello", ""),  # a finish that broke the promise: nothing resent
    ("", "", ""),
])
def test_what_is_still_to_send(text: str, sent: str, rest: str):
    assert unsent(text, sent) == rest


def test_every_front_words_the_one_400_in_its_envelope():
    error = bad_request("tools[0].name must be a string.", "tools[0].name")
    assert (error.status, error.param, error.code) == (400, "tools[0].name", "invalid_request")
    bodies = {front.name: front.error_response(error) for front in FRONTS}
    assert {response.status for response in bodies.values()} == {400}
    for name in ("chat", "responses"):
        assert orjson.loads(bodies[name].body)["error"]["param"] == "tools[0].name"
    anthropic = orjson.loads(bodies["messages"].body)
    assert anthropic["error"]["type"] == "invalid_request_error"
    assert "tools[0].name must be a string." in anthropic["error"]["message"]
