"""A proxy server started as a command, as users start it: a free port, waiting for it to be
healthy, stopping it, one streaming tool turn through it (shared by the entry point, server,
store, status, single-file, install and container tests); the proxy served the production
way (`served`), for the tests that attack it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import openai
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, FakeVLLM, vllm_completion

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, seconds: float = 20) -> None:
    """Wait until the proxy started as `process` answers /proxy/health with a 200."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"exited early: {process.stderr.read().decode()}")
        try:  # a worker still starting (a loaded machine) may not answer within the second
            if requests.get(url + "/proxy/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            time.sleep(0.1)
    raise AssertionError("the proxy did not come up")


def wait_answering(url: str, process: subprocess.Popen, seconds: float,
                   tail: Callable[[], str], every: float = 0.5) -> None:
    """Wait until the server started as `process` answers `url` with a 200 (its log's
    `tail` in the failure when it exits or does not answer in time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{url} exited: {tail()}")
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(every)
    raise AssertionError(f"{url} did not answer in {seconds:.0f} s: {tail()}")


def stop(process: subprocess.Popen) -> str:
    """Stop `process` with SIGTERM (SIGKILL after 15 s): what it wrote to stderr."""
    process.terminate()
    try:
        _, err = process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
    return err.decode()


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait until `condition()` holds, polling; AssertionError after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {condition.__doc__ or condition}")
        time.sleep(0.02)


def tool_turn(url: str) -> None:
    """One streaming `read` tool turn through the proxy at `url`, read by the openai SDK (the
    upstream answers as `answer_hermes_call` sets it)."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=20)
    stream = client.chat.completions.create(model="q", messages=[{"role": "user", "content": "?"}],
                                            tools=TOOLS, stream=True)
    names, arguments, finish = [], "", None
    for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or ():
                if call.function.name:
                    names.append(call.function.name)
                arguments += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert names == ["read"]
    assert json.loads(arguments) == {"path": "a"}
    assert finish == "tool_calls"


def answer_hermes_call(fake: FakeVLLM) -> None:
    """Have `fake` answer the next request with a Hermes-format `read` call."""
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')))


def serve_one_tool_turn(command: Sequence[str], *, cwd: Path, env: dict[str, str], port: int,
                        seconds: float = 30,
                        meanwhile: Callable[[str], None] | None = None) -> tuple[int, str]:
    """Start `command` (listening on `port`), wait for /proxy/health, run the `read` tool turn
    with the openai SDK (and `meanwhile(url)`), stop it with SIGTERM: its exit status and log."""
    process = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, seconds=seconds)
        tool_turn(url)
        if meanwhile is not None:
            meanwhile(url)
    finally:
        log = stop(process)
    return process.returncode, log


@dataclass
class Served:
    """A proxy started as `python app.py` (gunicorn, gevent workers: production)."""

    url: str
    port: int
    process: subprocess.Popen
    log: str = ""


@contextmanager
def served(upstream: str, env: Mapping[str, str] | None = None, *, workers: int = 1,
           seconds: float = 30, healthy: bool = True) -> Iterator[Served]:
    """`python app.py` serving `upstream` with `env` added to this environment (no run
    directory of the tests' own unless `env` names one; a state folder of its own unless
    `env` names one), until the block ends; its log then in `.log`. The block begins once
    /proxy/health answers 200 (`healthy`), or at once."""
    port = free_port()
    environ = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": upstream,
               "TOOLCALL_PROXY_PORT": str(port), "GUNICORN_WORKERS": str(workers)}
    environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    environ.update(env or {})
    with contextlib.ExitStack() as stack:
        if "XDG_STATE_HOME" not in (env or {}):  # (its own profiles, its own answers)
            environ["XDG_STATE_HOME"] = stack.enter_context(tempfile.TemporaryDirectory())
        yield from _served(environ, port, seconds, healthy)


def _served(environ: dict[str, str], port: int, seconds: float,
            healthy: bool) -> Iterator[Served]:
    with tempfile.TemporaryFile() as log:  # (a pipe no one reads would stall the server)
        process = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=environ,
                                   stdout=log, stderr=subprocess.STDOUT)
        server = Served(f"http://127.0.0.1:{port}", port, process)
        try:
            deadline = time.monotonic() + seconds
            while healthy and not _answers(server.url + "/proxy/health"):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise AssertionError("the proxy did not come up: "
                                         + log.read().decode(errors="replace")[-3000:])
                time.sleep(0.1)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.seek(0)
            server.log = log.read().decode(errors="replace")


def _answers(url: str) -> bool:
    try:  # a worker still starting (a loaded machine) may not answer within the second
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False
