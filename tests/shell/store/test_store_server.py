"""The response store as the real server runs it: gunicorn's gevent worker (SQLite in the
hub's thread pool, two API keys, files private), and a store in one process's memory
refused when several workers would serve."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import openai
import pytest

from proxy.shell.config_load import ConfigError, build_config
from proxy.shell.server.serve import gunicorn_settings
from tests.fake_vllm import Answer, vllm_completion
from tests.serving import ROOT, free_port, stop, wait_healthy

pytestmark = pytest.mark.integration
KEY_A, KEY_B = "sk-alpha-0123456789", "sk-beta-9876543210"


@pytest.mark.parametrize(("settings", "workers", "refused"), [
    ({"responses_store_path": ":memory:"}, "2", True),
    ({"responses_store_url": "sqlite://:memory:"}, "3", True),
    ({"responses_store_path": ":memory:"}, "1", False),
    ({"responses_store_path": ":memory:", "responses_mode": "relay"}, "2", False),
    ({"responses_store_path": "/tmp/r.sqlite3"}, "2", False),
])
def test_a_memory_store_with_several_workers_is_refused(settings, workers, refused):
    config = build_config(settings)
    if not refused:
        assert gunicorn_settings(config, {"GUNICORN_WORKERS": workers})["workers"] == int(workers)
        return
    with pytest.raises(ConfigError) as caught:
        gunicorn_settings(config, {"GUNICORN_WORKERS": workers})
    assert "\n" not in str(caught.value)
    assert "GUNICORN_WORKERS=1" in str(caught.value)


def test_python_app_py_refuses_to_start_with_a_memory_store_and_two_workers():
    env = {**os.environ, "TOOLCALL_PROXY_RESPONSES_STORE_PATH": ":memory:",
           "GUNICORN_WORKERS": "2"}
    done = subprocess.run([sys.executable, "app.py", "--port", str(free_port())], cwd=ROOT,
                          env=env, capture_output=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("toolcall-proxy: the response store ':memory:'")


def test_gunicorn_gevent_keeps_answers_per_key_in_private_files(fake, tmp_path):
    folder = tmp_path / "state" / "toolcall-proxy"
    port = free_port()
    env = {**os.environ, "GUNICORN_WORKERS": "1", "TOOLCALL_PROXY_API_KEYS": f"{KEY_A},{KEY_B}",
           "TOOLCALL_PROXY_RESPONSES_STORE_URL": f"sqlite://{folder}/responses.sqlite3"}
    process = subprocess.Popen([sys.executable, "app.py", "--port", str(port), "--upstream",
                                fake.url], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process)
        alice, bob = (openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0,
                                    timeout=20) for key in (KEY_A, KEY_B))
        fake.answer(Answer(body=vllm_completion("Kept under gevent.")))
        first = alice.responses.create(model="qwen", input="hello")
        assert alice.responses.retrieve(first.id).output_text == "Kept under gevent."
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(first.id)
        second = alice.responses.create(model="qwen", input="more",
                                        previous_response_id=first.id)
        assert second.previous_response_id == first.id
        assert fake.chat_requests()[-1].json["messages"][0]["content"] == "hello"
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(folder / "responses.sqlite3").st_mode) == 0o600
    finally:
        log = stop(process)
    assert "Traceback" not in log
