"""Open WebUI, real, for tests/e2e/test_open_webui.py: the `open-webui` package from PyPI in a
venv of its own (`make webui-e2e-env`), one server on loopback with a data folder of the
test's own, offline: no model or embedding download (OFFLINE_MODE, HF_HUB_OFFLINE, retrieval
bypassed, speech-to-text not local), no telemetry or update check, and any traffic not for
loopback sent to a dead port. The first account signed up through its API is the admin; its
two kinds of connection (Ollama API, OpenAI API) are set through the admin's API, as the
Connections page sets them."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import requests

from tests.serving import free_port, wait_answering

WEBUI_VERSION = "0.12.4"
WEBUI_HOME = Path(os.environ.get("TOOLCALL_E2E_WEBUI", Path.home() / ".cache"
                                 / "toolcall-proxy-e2e" / f"open-webui-{WEBUI_VERSION}"))
OPEN_WEBUI = WEBUI_HOME / "bin" / "open-webui"
INSTALLED = WEBUI_HOME / ".installed"  # `make webui-e2e-env` wrote it: the install ended
DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens there
OPENAI_PREFIX = "v1"  # the OpenAI connection's model ids are `v1.<model>` (its prefix_id)


def offline_env(data: Path, port: int) -> dict[str, str]:
    """Open WebUI's environment: its data in `data`, nothing fetched from outside."""
    return {
        "PATH": f"{WEBUI_HOME / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(data), "LANG": "C.UTF-8", "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "DATA_DIR": str(data), "WEBUI_SECRET_KEY": f"e2e-secret-{port}",
        "OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "false", "DO_NOT_TRACK": "true", "SCARF_NO_ANALYTICS": "true",
        "ENABLE_VERSION_UPDATE_CHECK": "false",
        # No local embedding, reranking or whisper model is loaded (none could be fetched).
        "BYPASS_EMBEDDING_AND_RETRIEVAL": "true", "RAG_EMBEDDING_ENGINE": "openai",
        "AUDIO_STT_ENGINE": "openai",
        # Both connections start pointed at nothing; `connect` sets them to the proxy.
        "ENABLE_OLLAMA_API": "true", "OLLAMA_BASE_URL": DEAD,
        "ENABLE_OPENAI_API": "true", "OPENAI_API_BASE_URL": DEAD + "/v1",
        "OPENAI_API_KEY": "sk-e2e",
        "HTTP_PROXY": DEAD, "HTTPS_PROXY": DEAD, "NO_PROXY": "127.0.0.1,localhost",
        "WEBUI_AUTH": "true", "ENABLE_SIGNUP": "true", "GLOBAL_LOG_LEVEL": "INFO",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


class OpenWebUI:
    """One `open-webui serve` on loopback: its URL and the admin's token."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.root = root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.log = (root / "open-webui.log").open("w")
        self.process = subprocess.Popen(
            [str(OPEN_WEBUI), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=root, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=offline_env(root, self.port))
        self.token = ""

    def wait_ready(self, seconds: float = 300) -> None:
        wait_answering(self.url + "/health", self.process, seconds, self.tail)

    def sign_up_admin(self) -> dict[str, Any]:
        """The first account, made through the sign-up API: Open WebUI's admin."""
        made = requests.post(self.url + "/api/v1/auths/signup", timeout=60, json={
            "name": "Admin", "email": "admin@example.com", "password": "e2e-Password-1!"})
        assert made.status_code == 200, made.text
        self.token = made.json()["token"]
        return made.json()

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def get(self, path: str) -> Any:
        answer = requests.get(self.url + path, headers=self.headers, timeout=60)
        assert answer.status_code == 200, (path, answer.status_code, answer.text)
        return answer.json()

    def post(self, path: str, body: dict[str, Any], timeout: float = 120) -> Any:
        answer = requests.post(self.url + path, json=body, headers=self.headers,
                               timeout=timeout)
        assert answer.status_code == 200, (path, answer.status_code, answer.text)
        return answer.json()

    def connect(self, proxy_url: str, key: str = "") -> None:
        """Both connections, as the admin's Connections page saves them: the Ollama API at
        the proxy's base URL, the OpenAI API at its `/v1` (model ids prefixed `v1.`); with
        `key`, both send it (`Authorization: Bearer`), else the OpenAI one any key and the
        Ollama one none."""
        ollama = {"enable": True, **({"key": key} if key else {})}
        self.post("/ollama/config/update", {
            "ENABLE_OLLAMA_API": True, "OLLAMA_BASE_URLS": [proxy_url],
            "OLLAMA_API_CONFIGS": {"0": ollama}})
        self.post("/openai/config/update", {
            "ENABLE_OPENAI_API": True, "OPENAI_API_BASE_URLS": [proxy_url + "/v1"],
            "OPENAI_API_KEYS": [key or "sk-any"],
            "OPENAI_API_CONFIGS": {"0": {"enable": True, "prefix_id": OPENAI_PREFIX}}})

    def verify(self, connection: str, url: str, key: str = "") -> Any:
        """The Connections page's check of a URL (`/ollama/verify`: its `/api/version`;
        `/openai/verify`: its `/models`), as that page sends it: the answer, as it came."""
        return requests.post(f"{self.url}/{connection}/verify", headers=self.headers,
                             timeout=60, json={"url": url, "key": key})

    def models(self) -> list[dict[str, Any]]:
        """`GET /api/models`: what the model picker lists (and what chats may name)."""
        return self.get("/api/models?refresh=true")["data"]

    def add_tool(self, tool_id: str, name: str, source: str) -> dict[str, Any]:
        """A workspace tool (Workspace → Tools → New), its Python source as given."""
        return self.post("/api/v1/tools/create", {
            "id": tool_id, "name": name, "content": source,
            "meta": {"description": name, "manifest": {}}})

    def complete(self, body: dict[str, Any]) -> requests.Response:
        """`POST /api/chat/completions`, the chat page's one endpoint."""
        return requests.post(self.url + "/api/chat/completions", json=body,
                             headers=self.headers, timeout=180, stream=bool(body.get("stream")))

    def saved_message(self, message_id: str) -> dict[str, Any]:
        """A message as its chat was saved (what the chat page shows on reload), found in
        the admin's chats by its id."""
        for listed in self.get("/api/v1/chats/"):
            chat = self.get(f"/api/v1/chats/{listed['id']}")["chat"]
            found = chat.get("history", {}).get("messages", {}).get(message_id)
            if found:
                return found
        raise AssertionError(f"no saved message {message_id}: {self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return (self.root / "open-webui.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.log.close()


def sse_chunks(answer: requests.Response) -> Iterator[dict[str, Any]]:
    """The JSON objects of an SSE answer (Open WebUI streams OpenAI's chunks, whichever
    connection served it), up to `[DONE]`."""
    for line in answer.iter_lines(decode_unicode=True):
        if not line or not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


def streamed_message(answer: requests.Response) -> dict[str, Any]:
    """A streamed chat completion folded into its message: the content and the tool calls
    (each call's argument pieces joined), as an OpenAI client folds them."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for chunk in sse_chunks(answer):
        assert "error" not in chunk, chunk
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(piece.get("index", 0), {"name": "", "arguments": ""})
                function = piece.get("function") or {}
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {"content": "".join(content), "tool_calls": [calls[i] for i in sorted(calls)],
            "finish_reason": finish}


CHROMIUM = "/usr/bin/chromium"  # Debian's, as the status page's browser test drives it
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chat_page_url(webui: OpenWebUI, model: str, tool_id: str, question: str) -> str:
    """The chat page with a model and a tool chosen and the question typed, as its own links
    set them (`models`, `tools`, `q`)."""
    return f"{webui.url}/?{urlencode({'models': model, 'tools': tool_id, 'q': question})}"
