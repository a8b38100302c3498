"""The type check `make test` runs (mypy, configured in pyproject's [tool.mypy]) covers the
code it should, at the strictness it promises, and silences nothing in bulk: every module of
`proxy/` and `app.py` is checked, no module is excluded or has its errors ignored, the
promised flags are on, and each `# type: ignore` names its error code and says why."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
CHECKED = ("proxy", "app.py")
# What a default mypy run misses and these catch: bodies of unannotated functions, a partly
# annotated signature, an implicit Optional, comparisons that can never be true, stale or
# redundant silencing, code mypy finds unreachable.
FLAGS = ("check_untyped_defs", "disallow_untyped_defs", "disallow_incomplete_defs",
         "disallow_untyped_calls", "disallow_untyped_decorators", "disallow_subclassing_any",
         "no_implicit_optional", "strict_equality", "strict_bytes", "extra_checks",
         "warn_unused_ignores", "warn_redundant_casts", "warn_unreachable")
_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def _python_files(*places: str) -> list[Path]:
    """The Python files of `places` (folders, or single files)."""
    return sorted(path for place in places
                  for path in ([ROOT / place] if place.endswith(".py")
                               else (ROOT / place).rglob("*.py")))


def test_the_proxy_and_its_entry_point_are_checked_whole():
    assert set(CHECKED) <= set(CONFIG["files"])
    assert "exclude" not in CONFIG
    assert all(path.is_file() for path in _python_files(*CHECKED))
    assert len(_python_files("proxy")) > 100  # (the package itself, not an empty folder)


def test_the_promised_flags_are_on_and_nothing_is_ignored_in_bulk():
    assert {flag: CONFIG.get(flag) for flag in FLAGS} == dict.fromkeys(FLAGS, True)
    assert not CONFIG.get("ignore_errors")
    assert not CONFIG.get("ignore_missing_imports")
    for override in CONFIG.get("overrides", ()):
        assert not override.get("ignore_errors"), override
        assert override.get("follow_imports") not in ("skip", "silent"), override


def test_make_test_runs_the_check_with_a_pinned_mypy():
    target = re.search(r"^test:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert target is not None
    assert "$(VENV)/bin/mypy" in target.group(1)
    requirements = (ROOT / "requirements-dev.txt").read_text()
    assert re.search(r"^mypy>=[\d.]+,<[\d.]+$", requirements, re.M)


def test_every_type_ignore_names_its_code_and_says_why():
    bare = []
    for path in _python_files(*CHECKED):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            found = _IGNORE.search(line)
            if found is None:
                continue
            said = found["rest"].strip().startswith("#") or (
                number > 1 and lines[number - 2].strip().startswith("#"))
            if not found["codes"] or not said:
                bare.append(f"{path.relative_to(ROOT)}:{number}")
    assert bare == []


def test_the_ignore_pattern_reads_the_spellings_in_use():
    assert _IGNORE.search("x = f()  # type: ignore[attr-defined]  # not in the stubs")
    assert _IGNORE.search("x = f()  # type: ignore")["codes"] is None
    assert _IGNORE.search("x = f()  # an ordinary comment") is None
