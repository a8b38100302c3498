"""The container: the Dockerfile and deploy/compose.yaml. No Docker engine runs on these
machines, so the files are read as Docker would read them, and the image's entrypoint and
health check are run outside a container, on a tree made by the Dockerfile's COPY lines."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.serving import answer_hermes_call, free_port, serve_one_tool_turn
from tests.shipped import (
    compose_default,
    dockerfile_arguments,
    dockerfile_env,
    dockerfile_instructions,
)

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose.yaml"


def _healthcheck_command() -> list[str]:
    (check,) = dockerfile_arguments("HEALTHCHECK")
    return json.loads(check.split(" CMD ", 1)[1])


def test_image_is_slim_unprivileged_and_installs_the_lock():
    (base,) = dockerfile_arguments("FROM")
    assert re.fullmatch(r"python:\$\{PYTHON_VERSION\}-slim-\w+|python:3\.\d+-slim(-\w+)?", base)
    installs = [run for run in dockerfile_arguments("RUN") if "pip install" in run]
    assert installs == ["pip install --require-hashes --only-binary=:all: -r requirements.lock "
                        "-r requirements-redis.lock"]
    (user,) = dockerfile_arguments("USER")
    assert user not in ("root", "0")
    assert "useradd" in next(run for run in dockerfile_arguments("RUN") if user in run)
    names = [name for name, _ in dockerfile_instructions()]
    assert names.index("USER") > max(i for i, name in enumerate(names) if name == "RUN")
    env = dockerfile_env()
    assert env["TOOLCALL_PROXY_HOST"] == "0.0.0.0"
    # The proxy's port, and Ollama's for TOOLCALL_PROXY_OLLAMA_PORT=11434 (off by default).
    assert dockerfile_arguments("EXPOSE") == [env["TOOLCALL_PROXY_PORT"], "11434"]
    assert "TOOLCALL_PROXY_OLLAMA_PORT" not in env
    # Listening beyond loopback: the file says to set keys.
    assert "TOOLCALL_PROXY_API_KEYS" in (ROOT / "Dockerfile").read_text()
    assert _healthcheck_command() == ["python", "app.py", "healthcheck"]


def _dockerignored(path: str, patterns: list[str]) -> bool:
    """.dockerignore's rule: the last pattern matching the path or a folder above it wins;
    `!` takes back in, `**/` matches at any depth."""
    parts = path.split("/")
    ignored = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw.removeprefix("!").strip("/")
        anywhere = pattern.startswith("**/")
        pattern = pattern.removeprefix("**/")
        spans = [(j, i) for i in range(1, len(parts) + 1) for j in (range(i) if anywhere else (0,))]
        if any(fnmatch.fnmatchcase("/".join(parts[j:i]), pattern) for j, i in spans):
            ignored = not negate
    return ignored


def _image_tree(workdir: Path) -> None:
    """What the Dockerfile's COPY lines put in the image, from the build context as
    .dockerignore leaves it."""
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for rest in dockerfile_arguments("COPY"):
        *sources, dest = shlex.split(rest)
        for source in sources:
            origin = ROOT / source
            files = sorted(origin.rglob("*")) if origin.is_dir() else [origin]
            for path in files:
                relative = path.relative_to(ROOT).as_posix()
                if path.is_dir() or _dockerignored(relative, patterns):
                    continue
                inside = path.relative_to(origin) if origin.is_dir() else Path(path.name)
                target = workdir / dest / inside
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)


def test_dockerignore_keeps_the_context_to_what_the_image_needs():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for kept in ("app.py", "proxy/shell/server/serve.py", "proxy/toolcalls/formats/hermes.py",
                 "requirements.lock", "requirements-redis.lock", "deploy/gunicorn.conf.py"):
        assert not _dockerignored(kept, patterns), kept
    for left in (".venv/bin/python", ".git/config", "tests/shell/web/test_server.py", "config.json",
                 "proxy/__pycache__/server.cpython-311.pyc", "build/wheels/x.whl", "dist/x.pyz"):
        assert _dockerignored(left, patterns), left


@pytest.mark.integration
def test_the_images_entrypoint_and_health_check_work_outside_a_container(tmp_path, fake):
    """The image's command, in a tree made by its COPY lines, with its environment (the
    listen address on loopback here, port and upstream as `docker run -e` would set them),
    on this venv's interpreter, which holds exactly the lock as the image's does."""
    answer_hermes_call(fake)
    workdir = tmp_path / "app"
    _image_tree(workdir)
    assert sorted(p.name for p in workdir.iterdir()) == [
        "app.py", "deploy", "proxy", "requirements-redis.lock", "requirements.lock"]
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TOOLCALL_PROXY_", "GUNICORN_", "PROMETHEUS_"))}
    env.update(dockerfile_env())
    env.update(TOOLCALL_PROXY_HOST="127.0.0.1", TOOLCALL_PROXY_PORT=str(port),
               TOOLCALL_PROXY_UPSTREAM=fake.url, GUNICORN_WORKERS="2")

    def command(exec_form: list[str]) -> list[str]:
        assert exec_form[0] == "python"
        return [sys.executable, *exec_form[1:]]

    (entrypoint,) = dockerfile_arguments("ENTRYPOINT")
    check = command(_healthcheck_command())

    def healthy(url: str) -> None:
        done = subprocess.run(check, cwd=workdir, env=env, capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr

    _, log = serve_one_tool_turn(command(json.loads(entrypoint)), cwd=workdir, env=env,
                                 port=port, meanwhile=healthy)
    assert "Using worker: ProxyGeventWorker" in log
    unhealthy = subprocess.run(check, cwd=workdir, env=env, capture_output=True, timeout=30)
    assert unhealthy.returncode == 1


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_runs_vllm_and_the_proxy_on_one_network():
    services = _compose()["services"]
    assert set(services) == {"vllm", "proxy"}
    vllm, proxy = services["vllm"], services["proxy"]
    image = compose_default(vllm["image"])
    assert image.startswith("vllm/vllm-openai:v")  # the official image, a pinned release
    command = [compose_default(part) for part in vllm["command"]]
    assert "--enable-auto-tool-choice" in command
    assert command[command.index("--tool-call-parser") + 1]
    vllm_port = command[command.index("--port") + 1]
    assert "ports" not in vllm  # reached through the proxy only
    networks = set(vllm["networks"]) & set(proxy["networks"])
    assert networks
    assert networks <= set(_compose()["networks"])
    assert proxy["environment"]["TOOLCALL_PROXY_UPSTREAM"] == f"http://vllm:{vllm_port}"
    assert "vllm" in proxy["depends_on"]
    assert vllm_port in " ".join(vllm["healthcheck"]["test"])


def test_compose_publishes_the_proxy_on_8003_with_keys_and_its_health_check():
    proxy = _compose()["services"]["proxy"]
    build = proxy["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == (
        ROOT / "Dockerfile")
    assert proxy["ports"] == [f"127.0.0.1:8003:{dockerfile_env()['TOOLCALL_PROXY_PORT']}",
                              "127.0.0.1:11434:11434"]
    # Ollama's port answers only when asked for (OLLAMA_PORT=11434): off by default.
    assert proxy["environment"]["TOOLCALL_PROXY_OLLAMA_PORT"] == "${OLLAMA_PORT:-0}"
    # The proxy listens beyond its container's loopback: compose refuses to start without keys.
    assert re.fullmatch(r"\$\{TOOLCALL_PROXY_API_KEYS:\?.+\}",
                        proxy["environment"]["TOOLCALL_PROXY_API_KEYS"])
    assert proxy["healthcheck"]["test"] == ["CMD", *_healthcheck_command()]
    grace = re.fullmatch(r"(\d+)s", proxy["stop_grace_period"])
    assert grace
    assert int(grace[1]) > 30  # past gunicorn's graceful timeout: a stop drains
    assert proxy["read_only"] is True
    assert "/tmp" in proxy["tmpfs"]
    # Read-only, but the Responses store writes: its directory is a volume of its own.
    store = dockerfile_env()["TOOLCALL_PROXY_RESPONSES_STORE_PATH"]
    assert any(store.startswith(volume.split(":")[1] + "/") for volume in proxy["volumes"])
    assert dockerfile_arguments("VOLUME") == [str(Path(store).parent)]
