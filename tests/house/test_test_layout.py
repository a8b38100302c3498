"""The tests are laid out like the house: each test module lives in the folder of tests/ that
mirrors the room of `proxy/` it tests (`tests/shell/web/` for `proxy/shell/web/`), or in one
of the few folders beside the rooms (`BESIDE_THE_ROOMS`, each saying why), and is named for
the behaviour it pins, never for the round of work that wrote it (`test_hardening_four.py`).
Every folder holding test modules is a package, so that modules of one name in two folders
(`tests/fronts/test_ollama.py`, `tests/e2e/test_ollama_clients.py`) keep apart.

Helper modules (any module of tests/ not named `test_*`) and `conftest.py` are not held to a
folder: a helper is a shared home wherever it lives (tests/house/test_test_imports.py)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS.parent / "proxy"

# Folders of tests/ that mirror no room of `proxy/`, and why each stands beside the rooms.
BESIDE_THE_ROOMS = {
    "house": "the structural guards: the import graph, module sizes, how tests share "
             "helpers, this layout (the house as a whole, no one room)",
    "deploy": "the shipped deployment files of deploy/ and the Dockerfile",
    "tools": "what ships around the package: the single file, install, the README's "
             "commands, `make fuzz` and `make soak` (tools/)",
    "fakes": "the faithful fakes of the inference servers and their own tests",
    "e2e": "real agents driven through the proxy (`make e2e`)",
}
# Test modules at tests/'s root: the documentation's, which is no room's.
AT_THE_ROOT = {"test_docs.py"}

# The words of a module's name that count rounds of work, not behaviour: a round, a probe, a
# hardening pass, an issue or a follow-up anywhere in it; a number (in digits, as a word or
# an ordinal) as its last word, where a round's count goes (`test_hardening_four.py`).
ROUND_WORD = re.compile(r"rounds?|probes?|hardening|issues?\d*|again|followup|part\d+")
ROUND_COUNT = re.compile(
    r"\d{1,3}|v\d+|one|two|three|four|five|six|seven|eight|nine|ten|first|second|third"
    r"|fourth|fifth|sixth|seventh|eighth|ninth|tenth")


def rooms(package: Path) -> set[str]:
    """Each room of the package (a folder with an `__init__.py`), as a path from its root:
    `shell/web`."""
    return {path.parent.relative_to(package).as_posix()
            for path in package.rglob("__init__.py") if path.parent != package}


def modules_of(tests: Path) -> list[str]:
    """Every test module of tests/, as a path from its root: `shell/web/test_server.py`."""
    return sorted(path.relative_to(tests).as_posix() for path in tests.rglob("test_*.py")
                  if "node_modules" not in path.parts)


def misplaced(modules: list[str], known_rooms: set[str]) -> list[str]:
    """The test modules in a folder that mirrors no room and stands in none beside them."""
    wrong = []
    for module in modules:
        folder, _, name = module.rpartition("/")
        if not folder:
            if name not in AT_THE_ROOT:
                wrong.append(f"{module}: at the root of tests/ (tests/<room>/ is its place)")
        elif folder not in known_rooms and folder.split("/")[0] not in BESIDE_THE_ROOMS:
            wrong.append(f"{module}: proxy/{folder}/ is no room of the package")
    return wrong


def round_named(modules: list[str]) -> list[str]:
    """The test modules whose name counts a round of work instead of saying a behaviour."""
    wrong = []
    for module in modules:
        words = module.rpartition("/")[2].removesuffix(".py").split("_")[1:]
        counted = [word for at, word in enumerate(words, 1) if ROUND_WORD.fullmatch(word)
                   or (at == len(words) and ROUND_COUNT.fullmatch(word))]
        if counted:
            wrong.append(f"{module}: named for a round ({', '.join(counted)}), not a behaviour")
    return wrong


def not_packages(modules: list[str], tests: Path) -> list[str]:
    """The folders of tests/ that hold test modules but are no package."""
    folders = {module.rpartition("/")[0] for module in modules} - {""}
    return sorted(folder for folder in folders if not (tests / folder / "__init__.py").exists())


def test_every_test_module_lives_in_the_folder_of_its_room_or_beside_the_rooms():
    assert misplaced(modules_of(TESTS), rooms(PACKAGE)) == []


def test_no_test_module_is_named_for_a_round():
    assert round_named(modules_of(TESTS)) == []


def test_every_folder_of_test_modules_is_a_package():
    assert not_packages(modules_of(TESTS), TESTS) == []


def test_the_folders_beside_the_rooms_exist_and_are_no_room():
    """The list stays true: each folder is there, and none is a room (which would mirror)."""
    for folder in BESIDE_THE_ROOMS:
        assert (TESTS / folder).is_dir(), folder
        assert folder not in rooms(PACKAGE), folder
    assert all((TESTS / name).is_file() for name in AT_THE_ROOT)


def test_the_rooms_are_read_from_the_package():
    found = rooms(PACKAGE)
    assert {"base", "shell", "shell/web", "shell/store", "diagnose/doctor",
            "toolcalls/formats"} <= found
    assert "" not in found
    assert not any(room.startswith(("tests", "__pycache__")) for room in found)


def test_the_checks_find_each_kind_of_misplaced_and_round_named_module(tmp_path):
    known = {"base", "shell", "shell/web", "turn", "toolcalls"}
    modules = ["shell/web/test_server.py", "shell/test_config.py", "base/test_sse.py",
               "house/test_import_graph.py", "e2e/test_codex.py", "test_docs.py",
               "proxy/test_sse.py", "shell/webs/test_x.py", "test_loose.py",
               "shell/web/test_hardening_four.py", "shell/test_hardening.py",
               "turn/test_round_two.py", "base/test_fixes_issue44.py", "base/test_sse_2.py",
               "turn/test_fifth_probe.py", "turn/test_reask_again.py",
               "base/test_one_line_per_request.py", "turn/test_first_turn_streams.py",
               "base/test_sse_large_events.py", "toolcalls/test_formats_2026.py",
               "turn/test_reask_budget.py", "shell/web/test_status_server.py",
               "turn/test_thinking.py", "base/test_json_depth.py", "base/test_ids.py"]
    assert misplaced(modules, known) == [
        "proxy/test_sse.py: proxy/proxy/ is no room of the package",
        "shell/webs/test_x.py: proxy/shell/webs/ is no room of the package",
        "test_loose.py: at the root of tests/ (tests/<room>/ is its place)",
    ]
    assert round_named(modules) == [
        "shell/web/test_hardening_four.py: named for a round (hardening, four), not a "
        "behaviour",
        "shell/test_hardening.py: named for a round (hardening), not a behaviour",
        "turn/test_round_two.py: named for a round (round, two), not a behaviour",
        "base/test_fixes_issue44.py: named for a round (issue44), not a behaviour",
        "base/test_sse_2.py: named for a round (2), not a behaviour",
        "turn/test_fifth_probe.py: named for a round (probe), not a behaviour",
        "turn/test_reask_again.py: named for a round (again), not a behaviour",
    ]
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "__init__.py").write_text("")
    (tmp_path / "turn").mkdir()
    assert not_packages(["base/test_sse.py", "turn/test_plan.py", "test_docs.py"],
                        tmp_path) == ["turn"]
