"""The single file: `make pyz` builds dist/toolcall-proxy.pyz from the locked wheelhouse
(offline), and the file alone in an empty directory, run by a bare interpreter, serves, probes
and replays."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_vllm import Answer, vllm_completion
from tests.serving import serve_one_tool_turn
from tests.test_entrypoints import _free_port, _hermes

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / "build" / "wheels" / ".complete"
FIXTURE = ROOT / "tests" / "fixtures" / "replay_hermes_stream.json"
# The interpreter the venv was made from: no venv, and with -I -S no site-packages at all,
# so everything the proxy imports must come from the file.
BARE = Path(sys._base_executable).resolve()
PYTHON = [str(BARE), "-I", "-S"]


@pytest.fixture(scope="module")
def pyz(tmp_path_factory) -> Path:
    if not WHEELHOUSE.exists():
        pytest.fail("no wheelhouse: `make test` (or `make wheels`) fetches it before the tests")
    build = tmp_path_factory.mktemp("build")
    done = subprocess.run(
        ["make", "--no-print-directory", "pyz", f"DIST={build / 'dist'}",
         f"STAGE={build / 'stage'}", f"VENV={sys.prefix}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    built = build / "dist" / "toolcall-proxy.pyz"
    assert built.read_bytes().startswith(b"#!/usr/bin/env python%d.%d\n" % sys.version_info[:2])
    return built


@pytest.fixture
def alone(pyz, tmp_path) -> tuple[Path, dict[str, str]]:
    """An empty directory holding only the file, and a bare environment: no venv, no
    PYTHONPATH, a home and a shiv cache of its own."""
    here = tmp_path / "empty"
    here.mkdir()
    shutil.copy(pyz, here / pyz.name)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "SHIV_ROOT": str(tmp_path / "shiv"), "GUNICORN_WORKERS": "2"}
    return here, env


def _run(alone: tuple[Path, dict[str, str]], *args: str) -> subprocess.CompletedProcess[str]:
    here, env = alone
    return subprocess.run([*PYTHON, "toolcall-proxy.pyz", *args], cwd=here, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_file_alone_serves_a_streaming_tool_turn(alone, fake):
    _hermes(fake)
    here, env = alone
    port = _free_port()
    status, log = serve_one_tool_turn(
        [*PYTHON, "toolcall-proxy.pyz", "--upstream", fake.url, "--port", str(port)],
        cwd=here, env=env, port=port, seconds=60)
    assert status == 0, log
    assert f"Listening at: http://127.0.0.1:{port}" in log
    assert "Using worker: ProxyGeventWorker" in log
    assert any(json.loads(line)["tool_calls"] == 1
               for line in log.splitlines() if line.startswith("{"))
    assert [p.name for p in here.iterdir()] == ["toolcall-proxy.pyz"]  # nothing written here


def test_the_file_alone_runs_doctor_and_replay(alone, fake):
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')))
    doctor = _run(alone, "doctor", "--upstream", fake.url, "--json")
    assert doctor.returncode == 0, doctor.stderr
    assert json.loads(doctor.stdout)["call_format"] == "hermes"

    shutil.copy(FIXTURE, alone[0] / FIXTURE.name)
    replay = _run(alone, "replay", FIXTURE.name)
    assert replay.returncode == 0, replay.stderr
    assert "tool calls  1: get_weather" in replay.stdout
    assert replay.stdout.rstrip().endswith("data: [DONE]")


def _other_pythons() -> list[str]:
    """Working CPython interpreters of another version than this one (on PATH, or beside
    this one as pyenv and similar installers keep them)."""
    mine = "{}.{}".format(*sys.version_info[:2])
    candidates = [shutil.which(f"python3.{minor}") for minor in range(10, 16)]
    candidates += glob.glob(str(Path(sys.base_prefix).parent / "3.*" / "bin" / "python3"))
    found = []
    for path in filter(None, candidates):
        try:
            version = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info"
                                      "[:2])"], capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if version.returncode == 0 and version.stdout.strip() not in ("", mine):
            found.append(path)
    return found


def test_another_python_is_told_which_one_the_file_needs(alone):
    others = _other_pythons()
    if not others:
        pytest.skip("no CPython of another version on this machine")
    here, env = alone
    done = subprocess.run([others[0], "-I", "toolcall-proxy.pyz", "--help"], cwd=here, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("toolcall-proxy: this file was built for cpython-{}{}"
                                  .format(*sys.version_info[:2]))
    assert "make dist PYTHON=" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert os.listdir(here) == ["toolcall-proxy.pyz"]
