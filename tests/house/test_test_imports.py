"""Tests share helpers through helper modules (any module of tests/ not named `test_*`, such
as `serving.py`, `clients.py`, `fake_vllm.py`) and `conftest.py`, never through each other:

- no module imports a private name (`_x`) from another module of tests/;
- no helper imports from a test module (the helper is the home, not a door into one);
- no unit test imports from an integration test module.

An integration test module is a test module under the folders whose tests run the proxy as a
server (`INTEGRATION_FOLDERS`), or one marked `integration` as a whole (its `pytestmark`);
every other test module is a unit test. A helper is a shared home wherever it lives."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
INTEGRATION_FOLDERS = ("shell", "tools", "deploy", "e2e")


@dataclass(frozen=True)
class Module:
    name: str  # dotted, from the repository root: tests.shell.test_server
    source: str

    @property
    def is_test(self) -> bool:
        return self.name.rsplit(".", 1)[-1].startswith("test_")

    @property
    def is_integration(self) -> bool:
        parts = self.name.split(".")
        return self.is_test and ((len(parts) > 2 and parts[1] in INTEGRATION_FOLDERS)
                                 or _marked_integration(ast.parse(self.source)))


def _marked_integration(tree: ast.Module) -> bool:
    """Whether the module's `pytestmark` names the integration mark."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "pytestmark"
                for target in node.targets):
            return "integration" in ast.unparse(node.value)
    return False


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name.split(".")[:-node.level]
    return ".".join([*package, *([node.module] if node.module else [])])


def _imports(module: Module, known: dict[str, Module]) -> list[tuple[Module, str, int]]:
    """(the module of tests/ imported from, the name taken, line) for each import, at any
    depth (function-local ones too); a whole module imported counts as its every use."""
    tree = ast.parse(module.source)
    found: list[tuple[Module, str, int]] = []
    aliases: dict[str, Module] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:
                if f"{source}.{alias.name}" in known:  # `from tests.proxy import test_x`
                    aliases[alias.asname or alias.name] = known[f"{source}.{alias.name}"]
                    found.append((known[f"{source}.{alias.name}"], "*", node.lineno))
                elif source in known:
                    found.append((known[source], alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    found.append((known[alias.name], "*", node.lineno))
                    if alias.asname:
                        aliases[alias.asname] = known[alias.name]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            found.append((aliases[node.value.id], node.attr, node.lineno))
    return found


def broken_rules(modules: list[Module]) -> list[str]:
    """Each import that breaks a rule of the module docstring, said in a line."""
    known = {module.name: module for module in modules}
    broken = []
    for module in modules:
        for imported, name, line in _imports(module, known):
            if imported is module:
                continue
            where = f"{module.name}:{line} imports {name} from {imported.name}"
            if name.startswith("_") and not name.endswith("__"):
                broken.append(f"{where}: a private name (move it to a helper module)")
            if imported.is_test and not module.is_test:
                broken.append(f"{where}: a helper leans on a test module")
            if module.is_test and not module.is_integration and imported.is_integration:
                broken.append(f"{where}: a unit test leans on an integration module")
    return broken


def _modules_of(folder: Path) -> list[Module]:
    root = folder.parent
    return [Module(".".join(path.relative_to(root).with_suffix("").parts),
                   path.read_text(encoding="utf-8"))
            for path in sorted(folder.rglob("*.py")) if "node_modules" not in path.parts]


def test_tests_share_helpers_only_through_helper_modules_and_conftest():
    assert broken_rules(_modules_of(TESTS)) == []


def test_the_check_finds_each_kind_of_broken_rule():
    modules = [
        Module("tests.shell.test_server", "pytestmark = 1\ndef _exchange(): ...\nLIMIT = 2\n"),
        Module("tests.proxy.test_observability",
               "import pytest\npytestmark = pytest.mark.integration\ndef _metric(): ...\n"),
        Module("tests.turn.test_thinking", "from tests.shell.test_server import LIMIT\n"),
        Module("tests.proxy.test_replay", "pytestmark = pytest.mark.integration\n"
                                          "from tests.proxy import test_observability as o\n"
                                          "def test_x():\n    o._metric()\n"),
        Module("tests.serving", "def f():\n    from .shell.test_server import LIMIT\n"),
        Module("tests.toolcalls.test_formats", "from tests.serving import f\n"),
    ]
    assert broken_rules(modules) == [
        "tests.turn.test_thinking:1 imports LIMIT from tests.shell.test_server: a unit test "
        "leans on an integration module",
        "tests.proxy.test_replay:4 imports _metric from tests.proxy.test_observability: a "
        "private name (move it to a helper module)",
        "tests.serving:2 imports LIMIT from tests.shell.test_server: a helper leans on a test "
        "module",
    ]
