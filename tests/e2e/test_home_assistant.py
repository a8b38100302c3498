"""Home Assistant, real, against the proxy's Ollama front before the fake vLLM: the
`homeassistant` package from PyPI in a venv of its own, started headless on loopback with a
config folder of the test's own, onboarded through its REST API, the `ollama` integration
added through its config flow pointed at the proxy, Assist control on, a template light;
"turn on the kitchen light" ends with the light on and the model's final words as Home
Assistant's reply, for a call written as text and a native one, in both stream modes, and a
follow-up turn in the same conversation. With a key on the proxy's Ollama port
(`ollama_api_keys`), Home Assistant's API key field opens it, and a wrong key sends its
entry to re-authenticate; the reauth step's right key brings it back.

Which Home Assistant (tests/e2e/hass.py `BUILDS`), each skipped, saying why, when missing:
- 2025.4.4 in a venv of pyenv's Python 3.13.0, the newest release this machine's own Pythons
  run (2025.5 on need 3.13.2); its Ollama integration has no API key field.
- 2026.11.0, the newest release, on Debian sid's Python 3.14 in a chroot under
  ~/.cache/toolcall-proxy-e2e (2026.3 on need 3.14.2; the machine has none): its integration
  sends the key as `Authorization: Bearer` and answers a 401/403 on `/api/tags` with
  ConfigEntryAuthFailed, the reauth flow. The chroot shares the network: loopback is one.

`make e2e` installs them (`make ha-e2e-env`, `make ha2026-e2e-env`: once, under
~/.cache/toolcall-proxy-e2e). 2026.11's has every requirement of the integrations it loads
installed with it (a start reaches no package index); 2025.4.4's first start installs the
few its core integrations need into its venv (cached there after)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.hass import BUILDS, Build, HomeAssistant
from tests.fake_vllm import MODEL, Answer, FakeVLLM, vllm_completion, vllm_tool_call
from tests.serving import free_port, served

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

TEXT_CALL = ('<tool_call>{{"name": "{name}", "arguments": {{"name": "Kitchen Light", '
             '"domain": ["light"],}}}}</tool_call>')
DONE = "The kitchen light is on now."
FOLLOW_UP = "You are welcome."
HA_KEY = "sk-home-assistant-2026"


@pytest.fixture(params=BUILDS, ids=[build.version for build in BUILDS])
def build(request: pytest.FixtureRequest) -> Build:
    build: Build = request.param
    if (reason := build.missing()) is not None:
        pytest.skip(reason)
    return build


@pytest.fixture
def home_assistant(build: Build, tmp_path: Path) -> Iterator[HomeAssistant]:
    started = time.monotonic()
    ha = HomeAssistant(build, tmp_path)
    try:
        ha.wait_ready()
        ha.onboard()
        print(f"Home Assistant {build.version} up and onboarded in "
              f"{time.monotonic() - started:.1f} s ({build.why})")
        yield ha
    finally:
        ha.stop()


@pytest.fixture
def keyed_home_assistant(build: Build, request: pytest.FixtureRequest) -> HomeAssistant:
    """Home Assistant started for the key cases, where its Ollama integration takes a key."""
    if not build.has_api_key:
        pytest.skip(f"Home Assistant {build.version}'s Ollama integration has no API key "
                    "field (2026.3 on)")
    return request.getfixturevalue("home_assistant")


def _house_model(native: bool):
    """The fake's model: the call (as text, or as vLLM's parser returns it) to a user turn,
    naming the tool Home Assistant offered for it (2025: `HassTurnOn`, 2026:
    `intent__HassTurnOn`), the final words after the tool's result, a short answer to the
    follow-up."""
    def answer(received: Any) -> Answer:
        messages = received.json["messages"]
        last = messages[-1]
        if last["role"] == "tool":
            return Answer(body=vllm_completion(DONE))
        if "thank" in str(last.get("content")).lower():
            return Answer(body=vllm_completion(FOLLOW_UP))
        name = _turn_on(received.json["tools"])
        if native:
            return Answer(body=vllm_completion(None, tool_calls=[vllm_tool_call(
                name, '{"name": "Kitchen Light", "domain": ["light"]}')],
                finish_reason="tool_calls"))
        return Answer(body=vllm_completion(TEXT_CALL.format(name=name)))
    return answer


def _turn_on(tools: list[dict[str, Any]]) -> str:
    names = [tool["function"]["name"] for tool in tools]
    found = [name for name in names if name.rsplit("__", 1)[-1] == "HassTurnOn"]
    assert found, names
    return found[0]


def _turned_on(fake: FakeVLLM, ha: HomeAssistant, agent: str) -> None:
    """"turn on the kitchen light": the light on, the model's final words as the reply; the
    tool's result answering the call by its id upstream; a follow-up in the same conversation
    carrying the whole history."""
    assert ha.state("light.kitchen_light") == "off"
    speech, conversation = ha.say(agent, "turn on the kitchen light")
    assert speech == DONE
    assert ha.state("light.kitchen_light") == "on"
    sent = fake.chat_requests()[-1].json["messages"]
    assert sent[-1]["role"] == "tool"
    assert sent[-1]["tool_call_id"] == sent[-2]["tool_calls"][0]["id"]
    again, same = ha.say(agent, "thank you", conversation)
    assert (again, same) == (FOLLOW_UP, conversation)
    history = fake.chat_requests()[-1].json["messages"]
    assert [m["role"] for m in history[1:]] == ["user", "assistant", "tool", "assistant",
                                                "user"]
    assert ha.state("light.kitchen_light") == "on"


@pytest.mark.parametrize("mode", ["buffer", "stream"])
@pytest.mark.parametrize("native", [False, True], ids=["text_call", "native_call"])
def test_turn_on_the_kitchen_light(fake, start_proxy, home_assistant, mode, native):
    proxy = start_proxy(stream_mode=mode)
    fake.answer(_house_model(native))
    agent = home_assistant.add_ollama(proxy.url, MODEL)
    _turned_on(fake, home_assistant, agent)


def _keyed(fake: FakeVLLM, port: int, key: str) -> Any:
    """`python app.py` with `api_keys` on its main port and `ollama_api_keys: [key]` on the
    Ollama port `port`."""
    return served(fake.url, {"TOOLCALL_PROXY_OLLAMA_PORT": str(port),
                             "TOOLCALL_PROXY_API_KEYS": "sk-main",
                             "TOOLCALL_PROXY_OLLAMA_API_KEYS": key})


def test_the_api_key_field_opens_a_keyed_ollama_port(fake, keyed_home_assistant):
    ha = keyed_home_assistant
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with _keyed(fake, port, HA_KEY):
        refused = ha.start_ollama_flow(url, None)  # the key field left empty
        assert (refused["type"], refused["errors"]) == ("form", {"base": "invalid_auth"})
        refused = ha.start_ollama_flow(url, "sk-main")  # the main port's key
        assert (refused["type"], refused["errors"]) == ("form", {"base": "invalid_auth"})
        fake.answer(_house_model(native=False))
        agent = ha.add_ollama(url, MODEL, api_key=HA_KEY)
        _turned_on(fake, ha, agent)
    assert fake.chat_requests()
    assert all(HA_KEY not in str(received.headers) for received in fake.received)


def test_a_key_the_port_no_longer_takes_sends_the_entry_to_reauth(fake, keyed_home_assistant):
    """The operator rotates the Ollama port's key: at its next setup (a reload, a restart)
    Home Assistant's `list()` gets a 401, the entry is `setup_error` (ConfigEntryAuthFailed,
    the proxy's message as its reason) and a reauth flow waits on the integrations page; the
    old key refused there, the new one reloads the entry, and the light turns on again."""
    ha = keyed_home_assistant
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with _keyed(fake, port, HA_KEY):
        entry_id = ha.ollama_entry(url, HA_KEY)
        ha.add_agent(entry_id, MODEL)
        ha.agent()  # (the entry reloads with its new agent)
        assert ha.entry(entry_id)["state"] == "loaded"
    rotated = "sk-rotated"
    with _keyed(fake, port, rotated):
        ha.reload(entry_id)
        entry = ha.entry(entry_id)
        assert entry["state"] == "setup_error", entry
        # The reason shown is the ResponseError's: the proxy's message in Ollama's envelope.
        assert "API key" in entry["reason"], entry
        assert "401" in entry["reason"], entry
        reauth = [flow for flow in ha.flows_in_progress()
                  if flow["handler"] == "ollama" and flow["context"]["source"] == "reauth"]
        assert len(reauth) == 1, ha.flows_in_progress()
        assert reauth[0]["context"]["entry_id"] == entry_id
        flow_id = reauth[0]["flow_id"]
        wrong = ha.post(f"/api/config/config_entries/flow/{flow_id}", {"api_key": HA_KEY})
        assert (wrong["type"], wrong["errors"]) == ("form", {"base": "invalid_auth"})
        done = ha.post(f"/api/config/config_entries/flow/{flow_id}", {"api_key": rotated})
        assert (done["type"], done["reason"]) == ("abort", "reauth_successful")
        fake.answer(_house_model(native=True))
        _turned_on(fake, ha, ha.agent())
        assert ha.entry(entry_id)["state"] == "loaded"
