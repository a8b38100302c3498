"""Home Assistant 2026's API key on the proxy's Ollama port (`ollama_api_keys`), driven with
the official `ollama` client exactly as the 2026.11 integration drives it, against
`python app.py` (gunicorn, both ports) before the fake vLLM.

What the integration does (homeassistant-2026.11.0 wheel, `homeassistant/components/ollama/`):
- config_flow.py:96-124 `_async_validate_connection`: `ollama.AsyncClient(host=url,
  headers={"Authorization": f"Bearer {api_key}"} if api_key else None, verify=...)`, then
  `await client.list()`; an `ollama.ResponseError` whose `status_code` is 401 or 403 is the
  form's `invalid_auth`, any other status `unknown`.
- __init__.py:69-97 `async_setup_entry`: the same client (the key stripped, no header when
  there is none) and `client.list()`; a ResponseError 401/403 raises
  `ConfigEntryAuthFailed`, which starts the reauth flow (config_flow.py:178-225
  `async_step_reauth_confirm` validates the new key the same way); 5xx and 429 are
  `ConfigEntryNotReady` (retried), any other 4xx `ConfigEntryError`.
- entity.py:263-296: each turn is `client.chat(model=..., messages=..., tools=...,
  stream=True, keep_alive=..., options=..., think=..., format=...)` on that client.

So the key must open `/api/tags` and `/api/chat`, and a wrong or missing one must be a 401
the client reads as Ollama's envelope (`ResponseError.error` the proxy's message, not a JSON
blob) — never a 404, a 5xx or a 429, which would send HA to the wrong state."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Iterator
from typing import Any

import ollama
import pytest

from tests.fake_vllm import MODEL, Answer, FakeVLLM, vllm_completion
from tests.home_assistant import ADD_ITEM, TURN_ON, prompt_2026
from tests.serving import answer_hermes_call, free_port, served

pytestmark = pytest.mark.integration

HA_KEY = "sk-home-assistant"
MAIN_KEY = "sk-main"
AUTH_FAILED = (401, 403)  # __init__.py:86, config_flow.py:112


@contextlib.contextmanager
def ollama_port(fake: FakeVLLM, ollama_keys: str) -> Iterator[str]:
    """The proxy with `api_keys: [MAIN_KEY]` and `ollama_api_keys` from `ollama_keys` (an
    empty text: a keyless Ollama port): the Ollama port's URL."""
    port = free_port()
    with served(fake.url, {"TOOLCALL_PROXY_OLLAMA_PORT": str(port),
                           "TOOLCALL_PROXY_API_KEYS": MAIN_KEY,
                           "TOOLCALL_PROXY_OLLAMA_API_KEYS": ollama_keys}):
        yield f"http://127.0.0.1:{port}"


def ha_client(url: str, api_key: str | None) -> ollama.AsyncClient:
    """The client async_setup_entry builds (__init__.py:71-81)."""
    stripped = api_key.strip() if isinstance(api_key, str) else None
    return ollama.AsyncClient(
        host=url, headers={"Authorization": f"Bearer {stripped}"} if stripped else None,
        verify=ssl.create_default_context(), timeout=20)


def listed(url: str, api_key: str | None) -> list[str]:
    """The models the config flow's validation and the entry's setup see (`client.list()`)."""
    async def run() -> list[str]:
        response = await ha_client(url, api_key).list()
        return [model["model"] for model in response.get("models", [])]
    return asyncio.run(run())


def turned_on(url: str, api_key: str | None) -> list[tuple[str, Any]]:
    """One conversation turn as entity.py:266 asks it: the calls the streamed deltas carry."""
    async def run() -> list[tuple[str, Any]]:
        calls: list[tuple[str, Any]] = []
        async for response in await ha_client(url, api_key).chat(
                model=MODEL, stream=True, keep_alive=-1, options={"num_ctx": 8192},
                tools=[TURN_ON, ADD_ITEM], think=None, format=None,
                messages=[{"role": "system", "content": prompt_2026("Kitchen", entities=5)},
                          {"role": "user", "content": "turn on the kitchen light"}]):
            calls += [(call["function"]["name"], call["function"]["arguments"])
                      for call in response["message"].get("tool_calls") or ()]
        return calls
    return asyncio.run(run())


def answer_turn_on(fake: FakeVLLM) -> None:
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "intent__HassTurnOn", "arguments": {"name": "kitchen light"}}'
        "</tool_call>")))


def refusal(call: Any) -> ollama.ResponseError:
    """The ResponseError `call()` raised, checked to be one HA reads as 'ask for the key
    again': a 401 in Ollama's envelope (the client lifts its `error` string)."""
    with pytest.raises(ollama.ResponseError) as raised:
        call()
    assert raised.value.status_code in AUTH_FAILED
    assert raised.value.status_code == 401
    assert "API key" in raised.value.error
    assert not raised.value.error.lstrip().startswith("{")  # the envelope was read
    return raised.value


def test_the_bearer_key_ha_sends_lists_the_models_and_runs_the_turn(fake):
    with ollama_port(fake, HA_KEY) as url:
        assert listed(url, HA_KEY) == [MODEL]  # the config flow, then the entry's setup
        assert listed(url, f"  {HA_KEY}\n") == [MODEL]  # pasted with blanks: HA strips them
        answer_turn_on(fake)
        assert turned_on(url, HA_KEY) == [("intent__HassTurnOn", {"name": "kitchen light"})]
        assert fake.received
        for received in fake.received:  # the key is the proxy's, never vLLM's
            assert HA_KEY not in str(received.headers)


@pytest.mark.parametrize("api_key", ["sk-wrong", MAIN_KEY, None, HA_KEY.upper()],
                         ids=["wrong", "the-main-ports", "none", "wrong-case"])
def test_a_wrong_or_missing_key_is_the_401_that_sends_ha_to_reauth(fake, api_key):
    with ollama_port(fake, HA_KEY) as url:
        refusal(lambda: listed(url, api_key))  # the form's invalid_auth; setup's reauth
        answer_hermes_call(fake)
        refusal(lambda: turned_on(url, api_key))  # a key revoked mid-use: no turn runs
        assert [r.path for r in fake.received if r.path.endswith("/completions")] == []
        # The reauth step's new key (validated as the first was) opens the port again.
        assert listed(url, HA_KEY) == [MODEL]


@pytest.mark.parametrize("api_key", [None, "sk-anything"], ids=["no-key", "a-key-anyway"])
def test_a_keyless_ollama_port_takes_ha_with_or_without_a_key(fake, api_key):
    """`ollama_api_keys: []` (the main port keyed): HA's empty key field sends no header and
    is served; a key typed in anyway does not lock it out."""
    with ollama_port(fake, "") as url:
        assert listed(url, api_key) == [MODEL]
        answer_turn_on(fake)
        assert turned_on(url, api_key) == [("intent__HassTurnOn", {"name": "kitchen light"})]
