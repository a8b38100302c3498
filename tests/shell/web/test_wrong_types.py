"""Wrong types are a 400 naming the field, on every front (issue 30, item 5).

Requests built from each API's own shapes (`tests.request_shapes`: messages of every role,
tools of each kind, every tool_choice form, content blocks and input items of each type,
reasoning and thinking settings) have their values replaced by every wrong type (None, bool,
int, float, str, list, object, arrays nested deep, the field left out). The pure parse
functions are driven directly (every single change, then thousands of combined ones); a
handful go through the real server, read in each front's envelope."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.base.errors import ProxyError
from proxy.fronts import Incoming, messages, ollama, responses
from proxy.shell.config_load import build_config
from proxy.turn.plan import plan_chat
from tests.conftest import RunningProxy
from tests.fake_vllm import Answer, FakeVLLM, vllm_completion
from tests.request_shapes import (
    CHAT_REQUESTS,
    COUNT_REQUESTS,
    KEPT_ITEMS,
    MESSAGES_REQUESTS,
    MISSING,
    OLLAMA_GENERATE_REQUESTS,
    OLLAMA_REQUESTS,
    RESPONSES_REQUESTS,
    broken,
    nested,
    paths,
    replaced,
)

CONFIGS = [
    build_config({"upstream": "http://127.0.0.1:9"}),
    # Every path the plans take: streamed, the proxy applying tool_choice, the loop guard
    # just above the calls the requests hold.
    build_config({"upstream": "http://127.0.0.1:9", "stream_mode": "stream",
                  "upstream_tool_parser": False, "tool_temperature": 0.1,
                  "loop_guard_max_tool_calls": 4, "required_call_retries": 0,
                  "messages_thinking_switch": ""}),
]


def _recall(response_id: str) -> list[dict[str, Any]] | None:
    return [dict(item) for item in KEPT_ITEMS] if response_id == "resp_kept" else None


# Each front: its valid requests and its pure parse (raw body, settings → plan or ProxyError).
FRONTS: dict[str, tuple[list[dict[str, Any]], Callable[[bytes, Any], Any]]] = {
    "chat": (CHAT_REQUESTS, plan_chat),
    "responses": (RESPONSES_REQUESTS, lambda raw, c: responses.parse(
        Incoming.post(responses.PATH, raw, _recall), c)),
    "messages": (MESSAGES_REQUESTS,
                 lambda raw, c: messages.parse(Incoming.post(messages.PATH, raw), c)),
    "count_tokens": (COUNT_REQUESTS, lambda raw, c: messages.count_request(
        Incoming.post(messages.COUNT_TOKENS_PATH, raw), c)),
    "ollama": (OLLAMA_REQUESTS, lambda raw, c: ollama.parse(
        Incoming.post(ollama.CHAT_PATH, raw), c)),
    "ollama_generate": (OLLAMA_GENERATE_REQUESTS, lambda raw, c: ollama.parse(
        Incoming.post(ollama.GENERATE_PATH, raw), c)),
}


def _root(param: str) -> str:
    """The top-level field a parameter path starts with (`tools[0].name` → `tools`)."""
    return re.split(r"[.\[]", param, maxsplit=1)[0]


def _refusal(front: str, body: Any, config: Any) -> ProxyError | None:
    """What the front's parse refuses `body` with (None: it planned it)."""
    _, parse = FRONTS[front]
    try:
        parse(json.dumps(body).encode(), config)
    except ProxyError as error:
        return error
    return None


def assert_refused_or_planned(front: str, body: Any, changed: list[tuple[Any, ...]],
                              config: Any) -> None:
    """`body` parses to a plan, or to a 4xx naming one of the fields changed (tool_choice
    for a change to the tools it names). Anything else raised fails the test as it is."""
    error = _refusal(front, body, config)
    if error is None:
        return
    assert 400 <= error.status < 500, error.message
    assert error.param, error.message
    roots = {str(path[0]) for path in changed}
    named = _root(error.param)
    assert named in roots or (named == "tool_choice" and "tools" in roots), (
        error.param, changed)
    if front in ("messages", "count_tokens"):  # Anthropic's messages begin with the field
        assert error.message.startswith(error.param) or error.code == "json_too_deep"


ONE_OF_EACH = [None, True, 0, 1.5, "", "x", "function", [], [1], [{}], {}, {"type": "x"},
               nested(40), MISSING]


@pytest.mark.parametrize("front", FRONTS)
def test_every_field_of_every_shape_with_every_wrong_type(front):
    requests_, _ = FRONTS[front]
    for body in requests_:
        for path in list(paths(body))[1:]:
            for value in ONE_OF_EACH:
                config = CONFIGS[len(path) % 2]  # both settings, over the places
                assert_refused_or_planned(front, replaced(body, path, value), [path], config)


@pytest.mark.parametrize("front", FRONTS)
def test_the_valid_shapes_are_planned(front):
    requests_, parse = FRONTS[front]
    for body in requests_:
        for config in CONFIGS:
            parse(json.dumps(body).encode(), config)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken(CHAT_REQUESTS), st.sampled_from(CONFIGS))
def test_chat_wrong_types_are_a_4xx(case, config):
    assert_refused_or_planned("chat", *case, config)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken(RESPONSES_REQUESTS), st.sampled_from(CONFIGS))
def test_responses_wrong_types_are_a_4xx(case, config):
    assert_refused_or_planned("responses", *case, config)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken(MESSAGES_REQUESTS), st.sampled_from(CONFIGS))
def test_messages_wrong_types_are_a_4xx(case, config):
    assert_refused_or_planned("messages", *case, config)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken(OLLAMA_REQUESTS), st.sampled_from(CONFIGS))
def test_ollama_wrong_types_are_a_4xx(case, config):
    assert_refused_or_planned("ollama", *case, config)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken(OLLAMA_GENERATE_REQUESTS), st.sampled_from(CONFIGS))
def test_ollama_generate_wrong_types_are_a_4xx(case, config):
    assert_refused_or_planned("ollama_generate", *case, config)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken(COUNT_REQUESTS), st.sampled_from(CONFIGS))
def test_count_tokens_wrong_types_are_a_4xx(case, config):
    assert_refused_or_planned("count_tokens", *case, config)


# --- through the real server ------------------------------------------------------------------

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses",
         "messages": "/v1/messages", "count_tokens": "/v1/messages/count_tokens",
         "ollama": "/api/chat", "ollama_generate": "/api/generate"}
# What answered 500 before (issue 30): a list or object where a string belongs.
FOUND = [
    ("chat", ("messages", 3, "tool_calls"), True, "messages[3].tool_calls"),
    ("responses", ("input", 2, "role"), ["user"], "input[2].role"),
    ("responses", ("input", 0, "role"), {"role": "user"}, "input[0].role"),
    ("responses", ("tool_choice", "tools", 1, "namespace"), ["crm"],
     "tool_choice.tools[1].namespace"),
    ("messages", ("thinking", "type"), ["enabled"], "thinking.type"),
    ("count_tokens", ("thinking", "type"), {"type": "enabled"}, "thinking.type"),
]
_FIRST = {"chat": 0, "responses": 4, "messages": 0, "count_tokens": 0}


def _post(proxy, front: str, body: Any) -> requests.Response:
    return requests.post(proxy.url + PATHS[front], data=json.dumps(body), timeout=20,
                         headers={"Content-Type": "application/json"})


def _assert_envelope(front: str, response: requests.Response) -> dict[str, Any]:
    """The front's error envelope (Anthropic's for Messages, Ollama's for Ollama, OpenAI's
    otherwise)."""
    body = response.json()
    if front.startswith("ollama"):
        assert isinstance(body["error"], str)
        assert body["error"]
        return {"message": body["error"]}
    if front in ("messages", "count_tokens"):
        assert body["type"] == "error"
    error = body["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["type"], str)  # an upstream's 400 keeps its own type
    assert error["type"]
    return error


@pytest.mark.parametrize(("front", "path", "value", "field"), FOUND)
def test_what_answered_500_is_a_400_naming_the_field(fake, proxy, front, path, value, field):
    body = replaced(FRONTS[front][0][_FIRST[front]], path, value)
    response = _post(proxy, front, body)
    assert response.status_code == 400, response.text
    error = _assert_envelope(front, response)
    assert error["type"] == "invalid_request_error"
    if front in ("messages", "count_tokens"):
        assert error["message"].startswith(field.replace("[", ".").replace("]", ""))
    else:
        assert error["param"] == field
    assert fake.chat_requests() == []


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One fake upstream and one proxy for all the generated requests."""
    fake = FakeVLLM()
    fake.answer(lambda received: Answer(body=vllm_completion("fine")))
    store = tmp_path_factory.mktemp("store") / "responses.db"
    proxy = RunningProxy(build_config({"upstream": fake.url, "log_level": "error",
                                       "responses_store_path": str(store)}))
    yield proxy
    proxy.close()
    fake.close()


@pytest.mark.parametrize("front", FRONTS)
def test_generated_wrong_types_through_the_server_are_never_a_500(served, front):
    @settings(max_examples=15, deadline=None,
              suppress_health_check=[HealthCheck.too_slow,
                                     HealthCheck.function_scoped_fixture])
    @given(broken([{**body, "stream": False} if front != "count_tokens" else body
                   for body in FRONTS[front][0]]))
    def check(case):
        body, _ = case
        response = _post(served, front, body)
        assert response.status_code != 500, response.text
        if 400 <= response.status_code < 500:
            _assert_envelope(front, response)

    check()
