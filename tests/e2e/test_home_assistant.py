"""Home Assistant, real, against the proxy's Ollama front before the fake vLLM: the
`homeassistant` package from PyPI in a venv of its own, started headless on loopback with a
config folder of the test's own, onboarded through its REST API, the `ollama` integration
added through its config flow pointed at the proxy, Assist control on, a template light;
"turn on the kitchen light" ends with the light on and the model's final words as Home
Assistant's reply, for a call written as text and a native one, in both stream modes, and a
follow-up turn in the same conversation.

Which Home Assistant: 2025.4.4, the newest release this machine's Pythons can run: 2025.5
and later require Python >= 3.13.2 and 2026.3 and later >= 3.14.2, and the newest Python
here is pyenv's 3.13.0 (no 3.14 in Debian's packages either). What Home Assistant 2026.11
sends is tested without running it (tests/shell/web/test_ollama_home_assistant.py); 2025.4 has
no API key field in its Ollama integration (2026 has), so the key on the Ollama port is
not driven here.

`make e2e` installs it (`make ha-e2e-env`: a venv under ~/.cache/toolcall-proxy-e2e, once);
skipped, saying so, without it. The first start also lets Home Assistant install the few
requirements of its core integrations into that venv (cached there after)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.fake_vllm import MODEL, Answer, vllm_completion, vllm_tool_call

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

HA_VERSION = "2025.4.4"
HA_HOME = Path(os.environ.get("TOOLCALL_E2E_HA", Path.home() / ".cache" / "toolcall-proxy-e2e"
                              / f"homeassistant-{HA_VERSION}"))
HASS = HA_HOME / "bin" / "hass"
CONFIGURATION = """\
homeassistant:
  name: Proxy test house
  latitude: 52.37
  longitude: 4.89
  elevation: 0
  unit_system: metric
  time_zone: UTC
  country: NL
  currency: EUR
http:
  server_host: 127.0.0.1
  server_port: {port}
api:
onboarding:
conversation:
intent:
input_boolean:
  kitchen:
    name: Kitchen power
light:
  - platform: template
    lights:
      kitchen_light:
        friendly_name: Kitchen Light
        value_template: "{{{{ is_state('input_boolean.kitchen', 'on') }}}}"
        turn_on:
          action: input_boolean.turn_on
          target:
            entity_id: input_boolean.kitchen
        turn_off:
          action: input_boolean.turn_off
          target:
            entity_id: input_boolean.kitchen
"""
TEXT_CALL = ('<tool_call>{"name": "HassTurnOn", "arguments": {"name": "Kitchen Light", '
             '"domain": ["light"],}}</tool_call>')
DONE = "The kitchen light is on now."
FOLLOW_UP = "You are welcome."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HomeAssistant:
    """One Home Assistant process on loopback, onboarded: its URL and an access token."""

    def __init__(self, root: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        (root / "configuration.yaml").write_text(CONFIGURATION.format(port=self.port))
        self.log = (root / "hass.log").open("w")
        self.process = subprocess.Popen(
            [str(HASS), "-c", str(root), "--log-no-color"], stdout=self.log,
            stderr=subprocess.STDOUT, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        self.root = root
        self.token = ""

    def wait_ready(self, seconds: float = 420) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"hass exited: {self.tail()}")
            try:
                if requests.get(self.url + "/api/onboarding", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1)
        raise AssertionError(f"hass did not answer in {seconds:.0f} s: {self.tail()}")

    def onboard(self) -> None:
        """The owner made through onboarding's REST API, and a token for it."""
        client_id = self.url + "/"
        made = requests.post(self.url + "/api/onboarding/users", timeout=30, json={
            "client_id": client_id, "name": "Owner", "username": "owner",
            "password": secrets.token_urlsafe(16), "language": "en"})
        assert made.status_code == 200, made.text
        token = requests.post(self.url + "/auth/token", timeout=30, data={
            "grant_type": "authorization_code", "code": made.json()["auth_code"],
            "client_id": client_id})
        assert token.status_code == 200, token.text
        self.token = token.json()["access_token"]
        for step in ("core_config", "analytics"):
            self.post(f"/api/onboarding/{step}", {})

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = requests.post(self.url + path, json=body, timeout=120,
                               headers={"Authorization": f"Bearer {self.token}"})
        assert answer.status_code == 200, (path, answer.status_code, answer.text)
        return answer.json()

    def get(self, path: str) -> Any:
        answer = requests.get(self.url + path, timeout=30,
                              headers={"Authorization": f"Bearer {self.token}"})
        assert answer.status_code == 200, (path, answer.status_code, answer.text)
        return answer.json()

    def add_ollama(self, url: str, model: str) -> str:
        """The `ollama` integration through its config flow (URL, then the model), Assist
        control on in its options: the conversation agent's entity id."""
        flow = self.post("/api/config/config_entries/flow", {"handler": "ollama"})
        step = self.post(f"/api/config/config_entries/flow/{flow['flow_id']}", {"url": url})
        assert step["type"] == "form", step
        done = self.post(f"/api/config/config_entries/flow/{flow['flow_id']}",
                         {"model": model})
        assert done["type"] == "create_entry", done
        entry_id = done["result"]["entry_id"]
        options = self.post("/api/config/config_entries/options/flow", {"handler": entry_id})
        saved = self.post(f"/api/config/config_entries/options/flow/{options['flow_id']}",
                          {"llm_hass_api": "assist", "max_history": 20, "num_ctx": 8192,
                           "keep_alive": -1})
        assert saved["type"] == "create_entry", saved
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            agents = [s["entity_id"] for s in self.get("/api/states")
                      if s["entity_id"].startswith("conversation.")
                      and s["entity_id"] != "conversation.home_assistant"
                      and s["state"] != "unavailable"]
            if agents:
                return agents[0]
            time.sleep(0.5)
        raise AssertionError(f"no Ollama conversation agent: {self.tail()}")

    def say(self, agent: str, text: str, conversation_id: str | None = None,
            ) -> tuple[str, str]:
        """What Assist answers `text` (its speech), and the conversation's id."""
        body: dict[str, Any] = {"text": text, "agent_id": agent, "language": "en"}
        if conversation_id:
            body["conversation_id"] = conversation_id
        deadline = time.monotonic() + 30
        while True:  # the options saved reload the entry: its agent is back in a moment
            answer = requests.post(self.url + "/api/conversation/process", json=body,
                                   timeout=120,
                                   headers={"Authorization": f"Bearer {self.token}"})
            if "invalid agent ID" not in answer.text or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert answer.status_code == 200, (answer.status_code, answer.text)
        said = answer.json()
        return said["response"]["speech"]["plain"]["speech"], said["conversation_id"]

    def state(self, entity_id: str) -> str:
        return self.get(f"/api/states/{entity_id}")["state"]

    def tail(self) -> str:
        self.log.flush()
        return (self.root / "hass.log").read_text()[-3000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.log.close()


@pytest.fixture
def home_assistant(tmp_path: Path) -> Iterator[HomeAssistant]:
    if not HASS.exists():
        pytest.skip(f"Home Assistant {HA_VERSION} is not installed at {HA_HOME}: "
                    "`make ha-e2e-env` (part of `make e2e`) installs it")
    started = time.monotonic()
    ha = HomeAssistant(tmp_path / "config")
    try:
        ha.wait_ready()
        ha.onboard()
        print(f"Home Assistant {HA_VERSION} up and onboarded in "
              f"{time.monotonic() - started:.1f} s")
        yield ha
    finally:
        ha.stop()


def _house_model(native: bool):
    """The fake's model: the call (as text, or as vLLM's parser returns it) to a user turn,
    the final words after the tool's result, a short answer to the follow-up."""
    def answer(received: Any) -> Answer:
        messages = received.json["messages"]
        last = messages[-1]
        if last["role"] == "tool":
            return Answer(body=vllm_completion(DONE))
        if "thank" in str(last.get("content")).lower():
            return Answer(body=vllm_completion(FOLLOW_UP))
        if native:
            return Answer(body=vllm_completion(None, tool_calls=[vllm_tool_call(
                "HassTurnOn", '{"name": "Kitchen Light", "domain": ["light"]}')],
                finish_reason="tool_calls"))
        return Answer(body=vllm_completion(TEXT_CALL))
    return answer


@pytest.mark.parametrize("mode", ["buffer", "stream"])
@pytest.mark.parametrize("native", [False, True], ids=["text_call", "native_call"])
def test_turn_on_the_kitchen_light(fake, start_proxy, home_assistant, mode, native):
    proxy = start_proxy(stream_mode=mode)
    fake.answer(_house_model(native))
    agent = home_assistant.add_ollama(proxy.url, MODEL)
    assert home_assistant.state("light.kitchen_light") == "off"
    speech, conversation = home_assistant.say(agent, "turn on the kitchen light")
    assert speech == DONE
    assert home_assistant.state("light.kitchen_light") == "on"
    tools = {t["function"]["name"] for t in fake.chat_requests()[-1].json["tools"]}
    assert "HassTurnOn" in tools
    sent = fake.chat_requests()[-1].json["messages"]
    assert sent[-1]["role"] == "tool"
    assert sent[-1]["tool_call_id"] == sent[-2]["tool_calls"][0]["id"]
    again, same = home_assistant.say(agent, "thank you", conversation)
    assert (again, same) == (FOLLOW_UP, conversation)
    history = fake.chat_requests()[-1].json["messages"]
    assert [m["role"] for m in history[1:]] == ["user", "assistant", "tool", "assistant",
                                                "user"]
    assert home_assistant.state("light.kitchen_light") == "on"
