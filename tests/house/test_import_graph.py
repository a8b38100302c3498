"""The house stays a house: no import runs in a circle, and none runs up from a room to one
above it (`proxy.FLOORS`, bottom first), counting every import: at the top of a module,
inside a function, and those made only for type checking."""

from __future__ import annotations

from pathlib import Path

import pytest

import proxy
from tools.house import circles, import_graph, modules, room_of, upward

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_no_import_runs_in_a_circle(graph):
    assert circles(graph) == []


def test_no_import_runs_up_the_house(graph):
    assert upward(graph, proxy.FLOORS) == []


def test_every_module_lives_in_a_declared_room():
    """A new folder (or a module loose beside `cli`) takes its place in `FLOORS` first."""
    undeclared = sorted(name for name in modules(ROOT)
                        if name != "proxy" and room_of(name, proxy.FLOORS) == "proxy")
    assert undeclared == []


def test_no_room_holds_more_than_twelve_modules_the_formats_aside():
    folders: dict[Path, int] = {}
    for path in modules(ROOT).values():
        if path.name != "__init__.py":
            folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = {str(folder.relative_to(ROOT)): count for folder, count in folders.items()
               if count > 12 and folder.name != "formats"}
    assert crowded == {}


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package `pkg` under `tmp_path` with these modules (path → source)."""
    for name, source in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return tmp_path


def test_the_graph_sees_imports_in_functions_and_for_type_checking_alone(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def late():\n    from ..high import b\n",
        "high/__init__.py": "",
        "high/b.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from ..low.a import late\n"),
        "high/c.py": "from . import b\nimport pkg.low.a\n",
    })
    graph = import_graph(root, "pkg")
    assert graph["pkg.low.a"] == {"pkg.high.b"}
    assert graph["pkg.high.b"] == {"pkg.low.a"}
    assert graph["pkg.high.c"] == {"pkg.high.b", "pkg.low.a"}
    assert circles(graph) == [["pkg.high.b", "pkg.low.a"]]
    assert upward(graph, ("pkg", "pkg.low", "pkg.high")) == [("pkg.low.a", "pkg.high.b")]
    assert upward(graph, ("pkg", "pkg.high", "pkg.low")) == [("pkg.high.b", "pkg.low.a"),
                                                             ("pkg.high.c", "pkg.low.a")]


def test_a_module_outside_every_declared_room_is_refused():
    with pytest.raises(ValueError, match="no declared room"):
        room_of("elsewhere.module", proxy.FLOORS)
