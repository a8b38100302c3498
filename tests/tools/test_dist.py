"""The single file: `make pyz` builds dist/toolcall-proxy.pyz from the locked wheelhouse
(offline), and the file alone in an empty directory, run by a bare interpreter, serves, probes
and replays."""

from __future__ import annotations

import ast
import glob
import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import as_user
from tests.fake_vllm import Answer, vllm_completion
from tests.serving import serve_one_tool_turn
from tests.shell.test_entrypoints import _free_port, _hermes

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / "build" / "wheels" / ".complete"
FIXTURE = ROOT / "tests" / "fixtures" / "replay_hermes_stream.json"
# The interpreter the venv was made from: no venv, and with -I -S no site-packages at all,
# so everything the proxy imports must come from the file.
BARE = Path(sys._base_executable).resolve()
PYTHON = [str(BARE), "-I", "-S"]


def _build(build: Path, umask: int) -> Path:
    """`make pyz` into `build`, offline, under `umask`."""
    if not WHEELHOUSE.exists():
        pytest.fail("no wheelhouse: `make test` (or `make wheels`) fetches it before the tests")
    done = subprocess.run(
        ["make", "--no-print-directory", "pyz", f"DIST={build / 'dist'}",
         f"STAGE={build / 'stage'}", f"VENV={sys.prefix}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, umask=umask)
    assert done.returncode == 0, done.stdout + done.stderr
    built = build / "dist" / "toolcall-proxy.pyz"
    assert built.read_bytes().startswith(b"#!/usr/bin/env python%d.%d\n" % sys.version_info[:2])
    return built


@pytest.fixture(scope="module")
def pyz(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("build"), 0o022)


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


def _run(alone: tuple[Path, dict[str, str]], *args: str, python: Sequence[str] = PYTHON,
         env: dict[str, str] | None = None, **options: Any) -> subprocess.CompletedProcess[str]:
    """The file run alone with `args` (by `python`; `env` in place of the folder's own)."""
    here, own = alone
    return subprocess.run([*python, "toolcall-proxy.pyz", *args], cwd=here,
                          env=own if env is None else env, capture_output=True, text=True,
                          timeout=120, **options)


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
    here, _ = alone
    done = _run(alone, "--help", python=[others[0], "-I"])
    assert done.returncode == 2
    assert done.stderr.startswith("toolcall-proxy: this file was built for cpython-{}{}"
                                  .format(*sys.version_info[:2]))
    assert "make dist PYTHON=" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert os.listdir(here) == ["toolcall-proxy.pyz"]


# --- the file runs only code it unpacked itself (issue 30, item 7) ----------------------------

PREAMBLE = ROOT / "deploy" / "pyz_preamble.py"
MAIN = ROOT / "deploy" / "pyz_main.py"


@pytest.mark.parametrize("path", [PREAMBLE, MAIN], ids=lambda path: path.name)
def test_what_runs_before_the_version_check_parses_as_python_3_7(path):
    ast.parse(path.read_text(), str(path), feature_version=(3, 7))


def test_a_python_too_old_to_parse_newer_syntax_gets_the_one_line_message(alone):
    old = [path for path in _other_pythons() if "3.7" in Path(path).resolve().parts[-3]
           or Path(path).name == "python3.7"]
    if not old:
        pytest.skip("no Python 3.7 on this machine")
    done = _run(alone, "--help", python=[old[0], "-I"])
    assert done.returncode == 2
    assert done.stderr.startswith("toolcall-proxy: this file was built for cpython-")
    assert "cpython-37" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def _unpack_folder(pyz: Path, root: Path) -> Path:
    """Where the file unpacks under `root` (its build id is public: in the archive)."""
    with zipfile.ZipFile(pyz) as archive:
        build_id = json.loads(archive.read("environment.json"))["build_id"]
    return root / f"toolcall-proxy.pyz_{build_id}"


def _planted(folder: Path, marker: Path) -> None:
    """Code another user leaves in the unpack folder: a `.pth` line that runs at start."""
    site = folder / "site-packages"
    site.mkdir(parents=True)
    (site / "evil.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")


def _refused(alone, root: Path) -> str:
    _, env = alone
    done = _run(alone, "--help", env={**env, "SHIV_ROOT": str(root)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("toolcall-proxy: will not run code from ")
    return done.stderr


@pytest.fixture
def shared_root(tmp_path) -> Path:
    """A root every local user may write to, as /tmp is (sticky)."""
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o1777)
    return root


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user owns needs root")
def test_an_unpack_folder_another_user_made_first_is_refused(pyz, alone, shared_root, tmp_path):
    folder = _unpack_folder(pyz, shared_root)
    marker = tmp_path / "ran"
    _planted(folder, marker)
    nobody = pwd.getpwnam("nobody")
    for path in (folder, folder / "site-packages", folder / "site-packages" / "evil.pth"):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    folder.chmod(0o755)
    assert f"{folder}, which is owned by another user" in _refused(alone, shared_root)
    assert not marker.exists()


def test_an_unpack_folder_others_can_write_to_is_refused(pyz, alone, shared_root, tmp_path):
    folder = _unpack_folder(pyz, shared_root)
    marker = tmp_path / "ran"
    _planted(folder, marker)
    folder.chmod(0o777)
    assert f"{folder}, which is writable by its group or by others" in _refused(
        alone, shared_root)
    assert not marker.exists()


def test_a_root_others_can_write_to_and_not_sticky_is_refused(alone, tmp_path):
    root = tmp_path / "open"
    root.mkdir()
    root.chmod(0o777)
    assert "which is writable by others and not sticky" in _refused(alone, root)
    assert list(root.iterdir()) == []  # nothing unpacked there


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user owns needs root")
def test_a_sticky_root_another_user_owns_is_refused(alone, shared_root):
    """Sticky keeps others from renaming what a user keeps in a folder, but not the folder's
    owner: the owner of a shared sticky root could swap the unpack folder for one of theirs
    between the checks and the start."""
    nobody = pwd.getpwnam("nobody")
    os.chown(shared_root, nobody.pw_uid, nobody.pw_gid)
    shared_root.chmod(0o1777)  # (chown clears the sticky bit's company on some systems)
    assert f"{shared_root}, which is owned by another user" in _refused(alone, shared_root)
    assert list(shared_root.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user owns needs root")
def test_a_private_root_inside_a_folder_another_user_owns_is_refused(alone, shared_root):
    """A root of the user's own is no better than the folder holding it: whoever owns (or may
    write to) a folder above it can rename it away and put another in its place."""
    root = shared_root / "mine"
    root.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody")
    os.chown(shared_root, nobody.pw_uid, nobody.pw_gid)
    shared_root.chmod(0o1777)
    refusal = _refused(alone, root)
    assert f"{root}, which is in {shared_root}, which is owned by another user" in refusal
    assert list(root.iterdir()) == []


def test_the_file_unpacks_privately_into_a_shared_root_and_runs(pyz, alone, shared_root):
    _, env = alone
    done = _run(alone, "--help", env={**env, "SHIV_ROOT": str(shared_root)}, umask=0o002)
    assert done.returncode == 0, done.stderr
    folder = _unpack_folder(pyz, shared_root)
    for path in (folder, folder / "site-packages", folder / "site-packages" / "proxy"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    sse = folder / "site-packages" / "proxy" / "base" / "sse.py"
    assert stat.S_IMODE(sse.stat().st_mode) == 0o644


def test_a_root_made_with_the_folders_above_it_is_private_whatever_the_umask(alone, tmp_path):
    _, env = alone
    root = tmp_path / "made" / "for" / "shiv"
    done = _run(alone, "--help", env={**env, "SHIV_ROOT": str(root)}, umask=0o002)
    assert done.returncode == 0, done.stderr
    for folder in (root, root.parent, root.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_the_default_root_is_private(pyz, alone):
    env = {key: value for key, value in alone[1].items() if key != "SHIV_ROOT"}
    default = Path(env["HOME"]) / ".shiv"
    default.mkdir(parents=True)
    default.chmod(0o755)  # as an earlier version left it
    done = _run(alone, "--help", env=env)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(default.stat().st_mode) == 0o700
    assert _unpack_folder(pyz, default).is_dir()


def _entries(archive: Path) -> list[tuple[str, int, str]]:
    with zipfile.ZipFile(archive) as opened:
        return [(info.filename, info.external_attr >> 16,
                 hashlib.sha256(opened.read(info)).hexdigest()) for info in opened.infolist()]


def test_the_archives_files_carry_fixed_modes_whatever_the_umask(pyz, tmp_path):
    private = _build(tmp_path / "private", 0o077)
    entries = _entries(pyz)
    assert _entries(private) == entries
    assert private.read_bytes() == pyz.read_bytes()
    modes = {mode for _, mode, _ in entries}
    assert modes <= {stat.S_IFREG | 0o644, stat.S_IFREG | 0o755}
    assert stat.S_IFREG | 0o644 in modes
    main = dict((name, digest) for name, _, digest in entries)["__main__.py"]
    assert main == hashlib.sha256(MAIN.read_bytes()).hexdigest()


def _system_python() -> str:
    """An interpreter of this ABI that any user may run (the venv's may be under /root)."""
    ours = sysconfig.get_config_var("SOABI")
    for candidate in (f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
                      f"/usr/local/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        if os.access(candidate, os.X_OK):
            done = subprocess.run([candidate, "-I", "-S", "-c",
                                   "import sysconfig; print(sysconfig.get_config_var('SOABI'))"],
                                  capture_output=True, text=True)
            if done.stdout.strip() == ours:
                return candidate
    pytest.skip(f"no interpreter for {ours} that another user may run")


@pytest.fixture
def open_place() -> Iterator[Path]:
    """A folder every user may reach (pytest's own tmp_path is root's alone)."""
    place = Path(tempfile.mkdtemp(prefix="toolcall-dist-"))
    place.chmod(0o755)
    yield place
    shutil.rmtree(place, ignore_errors=True)


def test_a_temporary_unpack_folder_another_user_planted_is_never_run(pyz, os_users,
                                                                      open_place):
    """On a shared sticky root, another user makes shiv's temporary unpack folder first
    (`<name>_<build id>.tmp`, open to all) with a `.pth` in it. Two starts of the file by the
    victim unpack into folders of the victim's own and never run the planted line."""
    attacker, victim = os_users
    python = _system_python()
    shared, app, home, marks = (open_place / name for name in ("shared", "app", "home", "marks"))
    for folder, mode in ((shared, 0o1777), (app, 0o755), (home, 0o700), (marks, 0o1777)):
        folder.mkdir()
        folder.chmod(mode)
    os.chown(home, victim.pw_uid, victim.pw_gid)
    shutil.copy(pyz, app / pyz.name)
    (app / pyz.name).chmod(0o755)
    marker = marks / "ran"
    planted = Path(str(_unpack_folder(pyz, shared)) + ".tmp")
    plant = ("import os, sys; folder, line = sys.argv[1:]; site = folder + '/site-packages'; "
             "os.makedirs(site); os.chmod(folder, 0o777); os.chmod(site, 0o777); "
             "open(site + '/evil.pth', 'w').write(line); os.chmod(site + '/evil.pth', 0o666)")
    line = f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n"
    subprocess.run(as_user(attacker, [python, "-I", "-S", "-c", plant, str(planted), line]),
                   check=True, capture_output=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "SHIV_ROOT": str(shared)}
    starts = [subprocess.run(as_user(victim, [python, "-I", "-S", pyz.name, "--help"]),
                             cwd=app, env=env, capture_output=True, text=True, timeout=120)
              for _ in range(2)]
    assert not marker.exists(), "the planted .pth ran as the victim"
    assert [done.returncode for done in starts] == [0, 0], starts[0].stderr
    folder = _unpack_folder(pyz, shared)
    info = folder.lstat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (victim.pw_uid, 0o700)
    assert not (folder / "site-packages" / "evil.pth").exists()
