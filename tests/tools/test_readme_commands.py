"""Each command the README shows runs on a fresh clone: the `make` targets the rest of the
suite does not run, each in a quick form, through make itself (so a broken target, its
wiring or what it starts fails `make test`).

Run elsewhere: `make test` is the suite; `make pyz` (what `make dist` ends with) in
`test_dist.py`; the soak, for seconds, in `tests/tools/test_soak.py`; `make run` is
`python app.py` (`tests/shell/web/test_entrypoints.py`). Not run: `make e2e` (2.8 GB of npm
agents and 5.5 GB of Home Assistant and Open WebUI: `make e2e` is its own suite) and `make lock`
(it asks PyPI)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.serving import ROOT

pytestmark = pytest.mark.integration


def _make(target: str, args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`make TARGET ARGS=…` with this interpreter's environment as the venv, taken as
    installed (`-o` its stamp: the suite never reinstalls what runs it)."""
    stamp = f"{sys.prefix}/.installed"
    return subprocess.run(["make", "--no-print-directory", "-o", stamp, target, f"ARGS={args}",
                           f"VENV={sys.prefix}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not here")
def test_make_bench_runs_its_store_section_to_the_end():
    """The store section waited 60 s for a store report /proxy/health gives only with
    ?upstream=1, and ended the run with a traceback."""
    done = _make("bench", "--quick --only store", timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "stored turn p50: SQLite | Redis" in done.stdout
    assert "Traceback" not in done.stderr


def test_make_fuzz_runs_a_small_count_without_a_failure():
    done = _make("fuzz", "--count 3000 --workers 1 --seed 7", timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "inputs: 3,000" in done.stdout
    assert "Traceback" not in done.stderr
