"""Shared fixtures: a fake vLLM and the proxy, both real HTTP servers on loopback."""

from __future__ import annotations

import json
import logging
import os
import pwd
import secrets
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from werkzeug.serving import make_server

from proxy.base.config import Config
from proxy.shell.config_load import build_config
from proxy.shell.web.app import create_app
from tests.fake_vllm import FakeVLLM
from tests.fakes.base import FakeServer

pytest_plugins = ["tests.redis_server"]  # a real redis-server for the Redis store's tests

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]},
    },
}
TOOLS = [WEATHER_TOOL, READ_TOOL]


class RunningProxy:
    """The proxy app served by Werkzeug's threaded server on a free loopback port."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.server = make_server("127.0.0.1", 0, create_app(config), threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def client(self, **kwargs: Any) -> openai.OpenAI:
        """The official OpenAI SDK pointed at the proxy."""
        return openai.OpenAI(base_url=self.url + "/v1", api_key="sk-test", max_retries=0,
                             timeout=kwargs.pop("timeout", 20), **kwargs)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def own_state_folder(tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test's proxies keep their state (the SQLite store, its upstream profiles) in a
    folder of that test's own (0700): a fake reusing another test's port never reads that
    test's profile. Proxies started as another user get one of theirs (`as_user`)."""
    folder = tmp_path_factory.mktemp("state")
    folder.chmod(0o700)
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    return str(folder)


@pytest.fixture
def fake() -> Iterator[FakeVLLM]:
    server = FakeVLLM()
    yield server
    server.close()


@pytest.fixture
def start_proxy(fake: FakeVLLM) -> Iterator[Callable[..., RunningProxy]]:
    started: list[RunningProxy] = []

    def start(**settings: Any) -> RunningProxy:
        file_values = {"upstream": fake.url, "log_level": "warning", **settings}
        proxy = RunningProxy(build_config(file_values))
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.close()


@pytest.fixture
def proxy(start_proxy: Callable[..., RunningProxy]) -> RunningProxy:
    return start_proxy()


@pytest.fixture
def client(proxy: RunningProxy) -> openai.OpenAI:
    return proxy.client()


@pytest.fixture(scope="session")
def os_users() -> Iterator[tuple[pwd.struct_passwd, pwd.struct_passwd]]:
    """Two throwaway OS users, (attacker, victim), for attacks from one local user on
    another; removed after the session. Run as one with `as_user`."""
    if os.geteuid() != 0:
        pytest.skip("making OS users for an attack across users needs root")
    names = [f"tcp{secrets.token_hex(3)}{role}" for role in ("a", "v")]
    for name in names:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True)
    try:
        yield pwd.getpwnam(names[0]), pwd.getpwnam(names[1])
    finally:
        for name in names:
            subprocess.run(["userdel", name], check=False, capture_output=True)


def as_user(user: pwd.struct_passwd, command: list[str]) -> list[str]:
    """`command` run as `user` alone (its ids, no supplementary groups), with a state folder
    of that user's (the test's own is this user's, 0700: another cannot use it)."""
    state = os.path.join(tempfile.gettempdir(), f"tcp-state-{user.pw_uid}")
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
            "--", "env", f"XDG_STATE_HOME={state}", *command]


@pytest.fixture
def log_lines(caplog):
    """The proxy's structured log lines, decoded."""
    logger = logging.getLogger("toolcall_proxy")
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="toolcall_proxy")

    def lines(count: int) -> list[dict]:
        # A line is written when the server closes the response, just after the client has
        # read it: wait (briefly) for the expected count.
        deadline = time.monotonic() + 5
        while True:
            found = [json.loads(r.getMessage()) for r in caplog.records
                     if r.name == "toolcall_proxy" and r.getMessage().startswith("{")]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    yield lines
    logger.removeHandler(caplog.handler)


@pytest.fixture
def serve() -> Iterator[Callable[..., Any]]:
    """`serve(FakeX, **options)`: a started fake, closed after the test."""
    started: list[FakeServer] = []

    def start(kind: Callable[..., FakeServer], **options: Any) -> Any:
        server = kind(**options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
