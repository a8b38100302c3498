"""No module of the package is over 500 lines: a file that long holds several jobs (issue 27)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "proxy"
LIMIT = 500


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_of_the_package_is_over_500_lines():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50  # the package, not an empty glob
    too_long = {str(path.relative_to(PACKAGE)): _lines(path) for path in modules
                if _lines(path) > LIMIT}
    assert not too_long, f"modules over {LIMIT} lines: {too_long}"


def test_the_count_is_of_lines_as_an_editor_shows_them(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("a = 1\n" * LIMIT + "b = 2", encoding="utf-8")
    assert _lines(sample) == LIMIT + 1
    sample.write_text("a = 1\n" * LIMIT, encoding="utf-8")
    assert _lines(sample) == LIMIT
