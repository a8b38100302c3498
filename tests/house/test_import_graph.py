"""The house stays a house: no import runs in a circle, and none runs up from a room to one
above it (`proxy.FLOORS`, bottom first), counting every import: at the top of a module,
inside a function, and those made only for type checking. The same holds for the code beside
the package (`bench/`, `tools/`, `app.py`): no circle there either, and they stand above
`proxy/`, which never imports them."""

from __future__ import annotations

from pathlib import Path

import pytest

import proxy
from tools.house import REPO, circles, import_graph, modules, room_of, upward

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_no_import_runs_in_a_circle(graph):
    assert circles(graph) == []


@pytest.fixture(scope="module")
def repo_graph() -> dict[str, set[str]]:
    return import_graph(ROOT, REPO)


def test_no_import_runs_in_a_circle_in_bench_tools_or_the_entry_point(repo_graph):
    assert {"bench.run", "tools.house", "app"} <= set(repo_graph)  # (the whole code is read)
    assert circles(repo_graph) == []


def test_the_package_imports_nothing_beside_it(repo_graph):
    """`bench/`, `tools/` and `app.py` may import `proxy`; `proxy` never imports them (what
    ships is `proxy/` alone)."""
    outside = {(source, target) for source, targets in repo_graph.items()
               if source.split(".")[0] == "proxy" for target in targets
               if target.split(".")[0] != "proxy"}
    assert outside == set()


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


def test_the_graph_reads_several_packages_and_a_top_level_module(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "core.py": ""})
    (tmp_path / "side").mkdir()
    (tmp_path / "side" / "__init__.py").write_text("")
    (tmp_path / "side" / "run.py").write_text("from pkg import core\nfrom . import late\n")
    (tmp_path / "side" / "late.py").write_text("def f():\n    from side import run\n")
    (tmp_path / "entry.py").write_text("import side.run\n")
    graph = import_graph(root, ("pkg", "side", "entry"))
    assert graph["entry"] == {"side.run"}
    assert graph["side.run"] == {"pkg.core", "side.late"}
    assert circles(graph) == [["side.late", "side.run"]]


def test_a_module_outside_every_declared_room_is_refused():
    with pytest.raises(ValueError, match="no declared room"):
        room_of("elsewhere.module", proxy.FLOORS)
