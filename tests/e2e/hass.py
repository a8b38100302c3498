"""A real Home Assistant for the e2e: the builds this machine can run (where each is installed
and how it starts), one process on loopback with a config folder of the test's own, driven
through its REST API (onboarding, the `ollama` integration's config flows) and, for what
only its websocket API tells (the flows in progress), a minimal websocket client."""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import orjson
import requests

from tests.serving import free_port, wait_answering

CACHE = Path(os.environ.get("TOOLCALL_E2E_CACHE", Path.home() / ".cache" / "toolcall-proxy-e2e"))
CHROOT = CACHE / "sid-root"  # Debian sid (Python 3.14), made by `make ha2026-e2e-env`


@dataclass(frozen=True)
class Build:
    """One Home Assistant release as installed for the e2e: its venv, and the Debian chroot it
    runs in (None: a venv of this machine's own Python)."""

    version: str
    venv: str  # the venv's path as the process sees it
    chroot: Path | None = None
    why: str = ""  # which Python runs it, and why this release

    @property
    def hass(self) -> Path:
        """The `hass` script as this machine sees it."""
        inside = Path(self.venv) / "bin" / "hass"
        return self.chroot / inside.relative_to("/") if self.chroot else inside

    @property
    def has_api_key(self) -> bool:
        """The Ollama integration's API key field (2026.3 on: a bearer key)."""
        return not self.version.startswith("2025")

    def missing(self) -> str | None:
        """Why this build cannot run here, or None."""
        if not self.hass.exists():
            target = "ha2026-e2e-env" if self.chroot else "ha-e2e-env"
            return (f"Home Assistant {self.version} is not installed at {self.hass}: "
                    f"`make {target}` (part of `make e2e`) installs it")
        if self.chroot and (os.geteuid() != 0 or not shutil.which("unshare")):
            return f"Home Assistant {self.version} runs in a chroot: that needs root and unshare"
        return None

    def folder(self, tmp_path: Path) -> tuple[Path, str]:
        """A config folder of the test's own: as this machine sees it, as hass sees it."""
        if self.chroot is None:
            return tmp_path / "config", str(tmp_path / "config")
        inside = f"/tmp/ha-e2e-{secrets.token_hex(6)}"
        return self.chroot / inside.lstrip("/"), inside

    def command(self, config: str) -> list[str]:
        """hass on `config`; in the chroot, in a mount namespace of its own holding /proc
        (gone with the process: nothing is left mounted), the network shared (loopback)."""
        hass = [f"{self.venv}/bin/hass", "-c", config, "--log-no-color"]
        if self.chroot is None:
            return hass
        return ["unshare", "--mount", "sh", "-c",
                'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"', str(self.chroot),
                *hass]

    def environment(self) -> dict[str, str]:
        if self.chroot is None:
            return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1"}  # the chroot's own, none of this machine's


BUILDS = (
    Build("2025.4.4", str(CACHE / "homeassistant-2025.4.4"),
          why="the newest release this machine's own Pythons run (pyenv's 3.13.0; 2025.5 "
              "on need 3.13.2); no API key field in its Ollama integration"),
    Build("2026.11.0", "/opt/homeassistant-2026.11.0", CHROOT,
          why="the newest release, on Python 3.14 from Debian sid in a chroot (2026.3 on "
              "need 3.14.2, which this machine lacks); the bearer key and reauth are its"),
)

LIGHT_2025 = """\
light:
  - platform: template
    lights:
      kitchen_light:
        friendly_name: Kitchen Light
        value_template: "{{ is_state('input_boolean.kitchen', 'on') }}"
        turn_on:
          action: input_boolean.turn_on
          target:
            entity_id: input_boolean.kitchen
        turn_off:
          action: input_boolean.turn_off
          target:
            entity_id: input_boolean.kitchen
"""
# 2026 refuses template lights under `light:` ("must be configured under its own template key").
LIGHT_2026 = """\
template:
  - light:
      - name: Kitchen Light
        state: "{{ is_state('input_boolean.kitchen', 'on') }}"
        turn_on:
          action: input_boolean.turn_on
          target:
            entity_id: input_boolean.kitchen
        turn_off:
          action: input_boolean.turn_off
          target:
            entity_id: input_boolean.kitchen
"""
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
"""


class HomeAssistant:
    """One Home Assistant process on loopback, onboarded: its URL and an access token."""

    def __init__(self, build: Build, tmp_path: Path) -> None:
        self.build = build
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.root, inside = build.folder(tmp_path)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        light = LIGHT_2026 if build.has_api_key else LIGHT_2025
        (self.root / "configuration.yaml").write_text(
            CONFIGURATION.format(port=self.port) + light)
        self.log = (self.root / "hass.log").open("w")
        self.process = subprocess.Popen(build.command(inside), stdout=self.log,
                                        stderr=subprocess.STDOUT, env=build.environment())
        self.token = ""

    def wait_ready(self, seconds: float = 420) -> None:
        wait_answering(self.url + "/api/onboarding", self.process, seconds, self.tail, every=1)

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

    # -- the ollama integration ----------------------------------------------------------------

    def add_ollama(self, url: str, model: str, api_key: str | None = None) -> str:
        """The `ollama` integration through its config flow pointed at `url` (with the API
        key, 2026), an agent with Assist control on: the conversation agent's entity id."""
        if self.build.has_api_key:
            entry_id = self.ollama_entry(url, api_key)
            self.add_agent(entry_id, model)
        else:
            assert api_key is None, f"{self.build.version} has no API key field"
            self._add_ollama_2025(url, model)
        return self.agent()

    def start_ollama_flow(self, url: str, api_key: str | None) -> dict[str, Any]:
        """2026's first step (config_flow.py async_step_user: the URL and the API key)."""
        flow = self.post("/api/config/config_entries/flow", {"handler": "ollama"})
        assert (flow["type"], flow["step_id"]) == ("form", "user"), flow
        fields = {"url": url, **({"api_key": api_key} if api_key else {})}
        return self.post(f"/api/config/config_entries/flow/{flow['flow_id']}", fields)

    def ollama_entry(self, url: str, api_key: str | None) -> str:
        done = self.start_ollama_flow(url, api_key)
        assert done["type"] == "create_entry", done
        return done["result"]["entry_id"]

    def add_agent(self, entry_id: str, model: str) -> None:
        """The conversation subentry (OllamaSubentryFlowHandler.async_step_set_options)."""
        deadline = time.monotonic() + 60
        while True:  # the entry is set up just after it is made
            flow = self.post("/api/config/config_entries/subentries/flow",
                             {"handler": [entry_id, "conversation"]})
            if flow.get("reason") != "entry_not_loaded" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert (flow["type"], flow["step_id"]) == ("form", "set_options"), flow
        done = self.post(f"/api/config/config_entries/subentries/flow/{flow['flow_id']}", {
            "name": "Proxy", "model": model, "llm_hass_api": ["assist"], "num_ctx": 8192,
            "max_history": 20, "keep_alive": -1, "think": False})
        assert done["type"] == "create_entry", done

    def _add_ollama_2025(self, url: str, model: str) -> None:
        """2025.4: the URL, then the model; Assist control in the entry's options."""
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

    def agent(self, seconds: float = 60) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            agents = [s["entity_id"] for s in self.get("/api/states")
                      if s["entity_id"].startswith("conversation.")
                      and s["entity_id"] != "conversation.home_assistant"
                      and s["state"] != "unavailable"]
            if agents:
                return agents[0]
            time.sleep(0.5)
        raise AssertionError(f"no Ollama conversation agent: {self.tail()}")

    def entry(self, entry_id: str) -> dict[str, Any]:
        """The config entry as the integrations page shows it (`state`, `reason`)."""
        entries = self.get("/api/config/config_entries/entry?domain=ollama")
        return next(entry for entry in entries if entry["entry_id"] == entry_id)

    def reload(self, entry_id: str) -> None:
        self.post(f"/api/config/config_entries/entry/{entry_id}/reload", {})

    def flows_in_progress(self) -> list[dict[str, Any]]:
        """The config flows in progress (what the integrations page offers to finish):
        websocket `config_entries/flow/progress`."""
        return self.websocket({"type": "config_entries/flow/progress"})

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

    def websocket(self, command: dict[str, Any]) -> Any:
        """One command on /api/websocket (auth, then the command as id 1): its result."""
        parts = urlsplit(self.url)
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
            key = base64.b64encode(os.urandom(16)).decode()
            sock.sendall((f"GET /api/websocket HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                          "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                          ).encode())
            stream = sock.makefile("rb")
            status = stream.readline()
            assert b" 101 " in status, status
            while stream.readline() not in (b"\r\n", b""):
                pass
            assert _read_frame(stream)["type"] == "auth_required"
            _send_frame(sock, {"type": "auth", "access_token": self.token})
            assert _read_frame(stream)["type"] == "auth_ok"
            _send_frame(sock, {"id": 1, **command})
            answer = _read_frame(stream)
            assert answer["success"], answer
            return answer["result"]

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
        if self.build.chroot is not None:  # (the folder lives in the chroot, not in tmp_path)
            shutil.rmtree(self.root, ignore_errors=True)


def _send_frame(sock: socket.socket, message: dict[str, Any]) -> None:
    """A masked text frame (RFC 6455 5.2), as a client must send."""
    payload = orjson.dumps(message)
    size = len(payload)
    header = bytes([0x81]) + (bytes([0x80 | size]) if size < 126
                              else bytes([0x80 | 126]) + size.to_bytes(2, "big"))
    mask = os.urandom(4)
    sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def _read_frame(stream: BinaryIO) -> Any:
    """One whole unmasked text frame from the server, decoded."""
    first, second = stream.read(2)
    assert first == 0x81, first  # a final text frame
    size = second & 0x7F
    if size == 126:
        size = int.from_bytes(stream.read(2), "big")
    elif size == 127:
        size = int.from_bytes(stream.read(8), "big")
    return orjson.loads(stream.read(size))
