"""What a production install gets: requirements.lock agrees with requirements.txt, and
requirements.txt alone, in a fresh venv, starts the production server (offline, from the
wheelhouse `make test` fetched)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.serving import answer_hermes_call, free_port, serve_one_tool_turn

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / "build" / "wheels"
FROM_REQUIREMENTS = "-r requirements.txt"


@dataclass
class Locked:
    """One pinned package of requirements.lock."""

    version: str
    marker: str
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)

    def applies_here(self) -> bool:
        return not self.marker or Requirement(f"x; {self.marker}").marker.evaluate()


def _lock() -> dict[str, Locked]:
    entries: dict[str, Locked] = {}
    current: Locked | None = None
    in_via = False
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        text = line.strip()
        if not line.startswith((" ", "#")) and text:
            pin = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+?)\s*(?:;\s*(.*?))?\s*\\?", text)
            assert pin, f"not an exact pin: {line!r}"
            current = entries[canonicalize_name(pin[1])] = Locked(pin[2], pin[3] or "")
            in_via = False
        elif current is not None and text.startswith("--hash=sha256:"):
            current.hashes.append(text.removeprefix("--hash=sha256:").rstrip(" \\"))
        elif current is not None and text.startswith("# via"):
            rest = text.removeprefix("# via").strip()
            in_via = not rest
            if rest:
                current.via.append(rest)
        elif current is not None and in_via and text.startswith("#   "):
            current.via.append(text.removeprefix("#").strip())
    return entries


def _requirements() -> dict[str, Requirement]:
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            requirement = Requirement(text)
            out[canonicalize_name(requirement.name)] = requirement
    return out


def test_every_requirement_is_locked_within_its_range():
    lock = _lock()
    for name, requirement in _requirements().items():
        assert name in lock, f"{name} is required but not locked: run `make lock`"
        assert requirement.specifier.contains(lock[name].version, prereleases=True), (
            f"{name}=={lock[name].version} is outside {requirement.specifier}: run `make lock`")
        assert FROM_REQUIREMENTS in lock[name].via, name


def test_the_lock_holds_nothing_requirements_txt_does_not_lead_to():
    lock = _lock()
    required = set(_requirements())
    for name, entry in lock.items():
        assert entry.hashes, f"{name} has no hash"
        assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in entry.hashes), name
        assert entry.via, f"{name} says nothing of why it is locked"
        if FROM_REQUIREMENTS in entry.via:
            assert name in required, f"{name} is no longer in requirements.txt: run `make lock`"
        for parent in entry.via:
            assert parent == FROM_REQUIREMENTS or canonicalize_name(parent) in lock, (name, parent)


def test_the_lock_is_closed_on_this_platform_extras_included():
    """Every dependency that requirements.txt (with its extras, such as gunicorn's `gevent`,
    which brings `packaging`) and the locked packages need here is locked, in range. Read
    from the venv `make test` installed from the lock."""
    lock = _lock()
    todo = [(requirement, requirement.extras) for requirement in _requirements().values()]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        requirement, extras = todo.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(extras))
        if key in seen:
            continue
        seen.add(key)
        assert name in lock, f"{name} (needed here) is not locked: run `make lock`"
        installed = metadata.version(name)
        assert installed == lock[name].version, (
            f"the test venv has {name} {installed}, the lock {lock[name].version}: `make test` "
            "installs the lock")
        for text in metadata.requires(name) or ():
            dependency = Requirement(text)
            marker = dependency.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in
                                     (extras or {""})):
                dep = canonicalize_name(dependency.name)
                assert dep in lock, f"{name} needs {dep}, which is not locked: run `make lock`"
                assert dependency.specifier.contains(lock[dep].version, prereleases=True), (
                    f"{name} needs {dependency}, the lock has {lock[dep].version}")
                todo.append((dependency, dependency.extras))
    applicable = {name for name, entry in lock.items() if entry.applies_here()}
    assert applicable == {name for name, _ in seen}


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory) -> Path:
    """A fresh venv holding `pip install -r requirements.txt` alone, from the wheelhouse."""
    if not (WHEELS / ".complete").exists():
        pytest.fail("no wheelhouse: `make test` (or `make wheels`) fetches it before the tests")
    venv = tmp_path_factory.mktemp("runtime") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index",
         "--find-links", str(WHEELS), "-r", str(ROOT / "requirements.txt")],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return venv


def test_requirements_txt_alone_installs_the_locked_runtime_and_nothing_else(runtime_venv):
    listed = subprocess.run([str(runtime_venv / "bin" / "python"), "-m", "pip", "list",
                             "--format=freeze", "--no-index", "--disable-pip-version-check"],
                            capture_output=True, text=True, check=True,
                            env={**os.environ, "PIP_CONFIG_FILE": os.devnull}).stdout
    installed = {canonicalize_name(line.split("==")[0]): line.split("==")[1]
                 for line in listed.split()}
    installed.pop("pip", None)
    installed.pop("setuptools", None)
    expected = {name: entry.version for name, entry in _lock().items() if entry.applies_here()}
    assert installed == expected


@pytest.mark.integration
@pytest.mark.parametrize("command", [["app.py"], ["-m", "gunicorn", "-c", "deploy/gunicorn.conf.py",
                                                  "app:app"]], ids=["app.py", "gunicorn"])
def test_the_production_server_starts_from_requirements_txt_alone(runtime_venv, fake, command):
    answer_hermes_call(fake)
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TOOLCALL_PROXY_", "GUNICORN_", "PROMETHEUS_", "PYTHON"))}
    env.update(TOOLCALL_PROXY_UPSTREAM=fake.url, TOOLCALL_PROXY_PORT=str(port),
               GUNICORN_WORKERS="2")
    _, log = serve_one_tool_turn([str(runtime_venv / "bin" / "python"), *command], cwd=ROOT,
                                 env=env, port=port)
    assert "Using worker: ProxyGeventWorker" in log
    assert "Traceback" not in log
