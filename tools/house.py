"""`python -m tools.house`: the shape of the repository's code in figures, to compare two
versions of it: `proxy/`, `bench/`, `tools/` and `app.py` (`REPO`), measured as one graph.

Rooms (folders of modules), floors (the levels of the import graph: its longest chain of
arrows, once circles are folded; of the whole code, of the shell alone, and of the graph
of rooms), import arrows between modules (every import: at the top, inside a function, or
only for type checking), circles, the longest module, class and function, and the hops of a
buffered tool turn: the calls from one module of `proxy/` into another while the app answers
one chat completion whose model called a tool (the fake vLLM of the tests answers it on
loopback; `--no-turn` skips that part).

    python -m tools.house [--root DIR] [--no-turn] [--json]

`import_graph` is also what tests/house/test_import_graph.py reads (one meaning of "import").
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

PACKAGE = "proxy"
# What the figures measure: the packages and top-level modules of the repository's code (the
# tests aside: they are measured by their own guards).
REPO = ("proxy", "bench", "tools", "app")


def module_name(path: Path, root: Path) -> str:
    """`proxy/shell/web/app.py` → `proxy.shell.web.app`; a package's `__init__` is the
    package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path, package: str | Sequence[str] = PACKAGE) -> dict[str, Path]:
    """Every module of `package` under `root` (the repository), by dotted name; `package`
    may be several, each a package (a folder) or a top-level module (`app` for `app.py`)."""
    found: dict[str, Path] = {}
    for name in (package,) if isinstance(package, str) else package:
        if (root / f"{name}.py").is_file():
            found[name] = root / f"{name}.py"
            continue
        found.update({module_name(path, root): path for path in sorted((root / name).rglob("*.py"))
                      if "__pycache__" not in path.parts})
    return found


def _imported(node: ast.Import | ast.ImportFrom, name: str, is_package: bool,
              known: Mapping[str, Path]) -> set[str]:
    """The modules of `known` one import statement in module `name` loads by name."""
    if isinstance(node, ast.Import):
        targets = {alias.name for alias in node.names}
    else:
        if node.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[:len(base) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        # `from package import module` loads the module; `from module import name`, the module.
        targets = {f"{target}.{alias.name}" for alias in node.names
                   if f"{target}.{alias.name}" in known}
        if len(targets) < len(node.names):
            targets.add(target)
    return {target for target in targets if target in known}


def import_graph(root: Path, package: str | Sequence[str] = PACKAGE) -> dict[str, set[str]]:
    """Module → the modules of the package (or packages) it imports: every import statement,
    wherever it stands (module level, in a function, under `if TYPE_CHECKING`)."""
    known = modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        graph[name] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= _imported(node, name, is_package, known) - {name}
    return graph


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def room_of(module: str, rooms: Iterable[str]) -> str:
    """The declared room `module` lives in: the longest of `rooms` that is it or holds it."""
    held = [room for room in rooms if module == room or module.startswith(room + ".")]
    if not held:
        raise ValueError(f"{module} is in no declared room")
    return max(held, key=len)


def upward(graph: Mapping[str, Iterable[str]], floors: Sequence[str]) -> list[tuple[str, str]]:
    """The imports that run up the house: from a module to one in a room above its own
    (`floors`: the rooms, bottom first)."""
    level = {room: index for index, room in enumerate(floors)}
    return sorted((source, target) for source, targets in graph.items() for target in targets
                  if level[room_of(target, floors)] > level[room_of(source, floors)])


def floors(graph: Mapping[str, Iterable[str]]) -> int:
    """The levels of the graph: the most modules on one chain of imports, each circle counted
    as one module."""
    folded = {member: min(circle) for circle in circles(graph) for member in circle}
    dag: dict[str, set[str]] = {}
    for node, targets in graph.items():
        here = folded.get(node, node)
        dag.setdefault(here, set())
        dag[here] |= {folded.get(target, target) for target in targets} - {here}
    level: dict[str, int] = {}

    def depth(node: str) -> int:
        pending = [node]
        while pending:
            current = pending[-1]
            below = [target for target in dag.get(current, ()) if target not in level]
            if below:
                pending.extend(below)
                continue
            pending.pop()
            level[current] = 1 + max((level[target] for target in dag.get(current, ())),
                                     default=0)
        return level[node]

    return max((depth(node) for node in dag), default=0)


@dataclass(frozen=True)
class Figures:
    """The shape of the code (`proxy_floors`: of `proxy/` alone, as earlier rounds measured)."""

    modules: int
    rooms: int
    most_modules_in_a_room: str
    floors: int
    proxy_floors: int
    shell_floors: int
    room_floors: int
    arrows: int
    circles: list[list[str]]
    longest_module: str
    longest_class: str
    longest_function: str


def _room(name: str, known: Mapping[str, Path]) -> str:
    """The folder a module lives in, as a dotted name (a top-level module is its own)."""
    if known[name].name == "__init__.py" or "." not in name:
        return name
    return name.rpartition(".")[0]


def _longest(known: Mapping[str, Path], kinds: tuple[type[ast.AST], ...]) -> tuple[int, str]:
    """The most lines a definition of `kinds` (functions, or classes) spans, and its name."""
    best = (0, "")
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, kinds):
                assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                best = max(best, (lines, f"{name}.{node.name}"))
    return best


def _floors_within(graph: Mapping[str, Iterable[str]], package: str) -> int:
    """The floors of the graph's part inside `package`."""
    def inside(name: str) -> bool:
        return name == package or name.startswith(package + ".")
    return floors({name: {target for target in targets if inside(target)}
                   for name, targets in graph.items() if inside(name)})


def figures(root: Path, package: str | Sequence[str] = REPO) -> Figures:
    """Measure the code under `root` (the repository's, by default)."""
    known = modules(root, package)
    graph = import_graph(root, package)
    rooms: dict[str, int] = {}
    for name in known:
        if known[name].name != "__init__.py":
            rooms[_room(name, known)] = rooms.get(_room(name, known), 0) + 1
    crowded = max((count, room) for room, count in rooms.items()
                  if not room.endswith(".formats"))
    room_graph: dict[str, set[str]] = {}
    for name, targets in graph.items():
        room_graph.setdefault(_room(name, known), set()).update(
            _room(target, known) for target in targets)
    for room, targets in room_graph.items():
        targets.discard(room)
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines())
             for name, path in known.items()}
    longest = max(sizes, key=lambda name: sizes[name])
    function_lines, function = _longest(known, (ast.FunctionDef, ast.AsyncFunctionDef))
    class_lines, class_name = _longest(known, (ast.ClassDef,))
    return Figures(
        modules=len(known),
        rooms=len({_room(name, known) for name in known}),
        most_modules_in_a_room=f"{crowded[1]} ({crowded[0]}, formats aside)",
        floors=floors(graph),
        proxy_floors=_floors_within(graph, PACKAGE),
        shell_floors=_floors_within(graph, f"{PACKAGE}.shell"),
        room_floors=floors(room_graph),
        arrows=sum(len(targets) for targets in graph.values()),
        circles=circles(graph),
        longest_module=f"{longest} ({sizes[longest]} lines)",
        longest_class=f"{class_name} ({class_lines} lines)",
        longest_function=f"{function} ({function_lines} lines)",
    )


# -- the hops of one buffered tool turn ----------------------------------------------------------


def _create_app() -> object:
    """The Flask app factory, wherever this version of the package keeps it."""
    for name in ("proxy.shell.web.app", "proxy.shell.routes"):
        try:
            return importlib.import_module(name).create_app
        except ModuleNotFoundError:
            continue
    raise SystemExit("no create_app found")


def _config(**settings: object) -> object:
    for name in ("proxy.base.config", "proxy.config"):
        try:
            return importlib.import_module(name).Config(**settings)
        except ModuleNotFoundError:
            continue
    raise SystemExit("no Config found")


def turn_hops(root: Path) -> dict[str, int]:
    """Run one buffered tool turn (a chat completion, `stream: false`, the model's call in
    Hermes markup) through the app, counting the calls that cross from one module of the
    package into another: all of them, the distinct (caller, callee) functions, and the most
    module boundaries on one call stack."""
    sys.path.insert(0, str(root))
    from tests.fake_vllm import FakeVLLM, vllm_answer, vllm_completion

    fake = FakeVLLM(tool_parser=False)
    fake.answer(vllm_answer(vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>')))
    # vLLM without a tool parser refuses tools it is sent: the proxy is told so
    app = _create_app()(_config(upstream=fake.url, log_level="error", upstream_tool_parser=False))
    body = {"model": "m", "stream": False,
            "messages": [{"role": "user", "content": "read /a"}],
            "tools": [{"type": "function", "function": {
                "name": "read", "parameters": {"type": "object", "properties": {
                    "path": {"type": "string"}}}}}]}
    package_dir = str(root / PACKAGE) + os.sep
    counts = {"calls": 0, "distinct": 0, "deepest": 0}
    seen: set[tuple[str, str]] = set()

    def module_of(filename: str) -> str | None:
        return filename if filename.startswith(package_dir) else None

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        callee = module_of(frame.f_code.co_filename)
        caller_frame = frame.f_back
        if callee is None or caller_frame is None:
            return
        caller = module_of(caller_frame.f_code.co_filename)
        if caller is None or caller == callee:
            return
        counts["calls"] += 1
        seen.add((f"{caller}:{caller_frame.f_code.co_name}", f"{callee}:{frame.f_code.co_name}"))
        depth, last, walk = 0, None, frame
        while walk is not None:
            here = module_of(walk.f_code.co_filename)
            if here is not None and last is not None and here != last:
                depth += 1
            last = here or last
            walk = walk.f_back
        counts["deepest"] = max(counts["deepest"], depth)

    client = app.test_client()
    client.post("/v1/chat/completions", json=body)  # warm: imports, first-use caches
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        reply = client.post("/v1/chat/completions", json=body)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        fake.close()
    message = reply.get_json()["choices"][0]["message"]
    if not message.get("tool_calls"):
        raise SystemExit(f"the turn gave no tool call: {reply.get_data(as_text=True)[:300]}")
    counts["distinct"] = len(seen)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.house", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--root", default=".", help="the repository (default: here)")
    parser.add_argument("--no-turn", action="store_true", help="skip the turn's hops")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    result = asdict(figures(root))
    if not args.no_turn:
        result["turn_hops"] = turn_hops(root)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for key, value in result.items():
        if key == "circles":
            print(f"circles: {len(value)}")
            for circle in value:
                print("  " + " ↔ ".join(circle))
        else:
            print(f"{key.replace('_', ' ')}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
