"""A package's docstring names only modules that exist: every `proxy/**/__init__.py` says what
its room holds by naming its modules in backticks (`runtime` (work beside a request), ...),
or in a `modules:` list, and a module moved or gone must not stay named there.

A backticked lowercase name (`plan`, `interface.ResponseStore`, `formats/`, `proxy.turn`) is
read as a module, or as a name in one, of the package or of a package above it; it may also be
a setting (`responses_store_url`). The words of the wires and of the CLI that the docstrings
quote in backticks, which are no module, are listed below, per package."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from pathlib import Path

import pytest

from proxy.base.config import Config

ROOT = Path(__file__).resolve().parents[2]
# `name`, `name.attr`, `folder/` (not `Name`, `name()`, `--flag`, `GET /path`).
BACKTICKED = re.compile(r"`([a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)/?`")
MODULES_LIST = re.compile(r"^\s*modules:\s*(.+)$", re.MULTILINE | re.IGNORECASE)
SETTINGS = frozenset(field.name for field in dataclasses.fields(Config))
# Backticked words that are no module: what a wire, a tool or the CLI calls something.
NOT_MODULES = {
    "proxy.diagnose.doctor": {"get_weather", "auto", "none", "tool_calls"},  # the probe's turn
    "proxy.fronts": {"parse", "render_json", "error_response"},  # a front's fields
    "proxy.fronts.messages": {  # Anthropic's endpoint, blocks and events
        "count_tokens", "message", "message_start", "content_block_start",
        "content_block_delta", "thinking_delta", "text_delta", "input_json_delta",
        "content_block_stop", "message_delta", "message_stop"},
    "proxy.fronts.responses": {"response", "store", "previous_response_id"},  # the API's
}


def _defines(dotted: str) -> bool:
    """Whether `dotted` is a module of the repository, or a name defined in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:cut])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            found: object = importlib.import_module(".".join(parts[:cut]))
            for attribute in parts[cut:]:
                if not hasattr(found, attribute):
                    return False
                found = getattr(found, attribute)
            return True
    return False


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _scopes(package: str) -> list[str]:
    """The package and every package above it, nearest first."""
    parts = package.split(".")
    return [".".join(parts[:cut]) for cut in range(len(parts), 0, -1)]


def named(docstring: str) -> tuple[set[str], set[str]]:
    """(the backticked lowercase names, the names of a `modules:` list) of a docstring."""
    listed = {name.strip(" `.") for match in MODULES_LIST.finditer(docstring)
              for name in match.group(1).split(",")}
    return set(BACKTICKED.findall(docstring)), {name for name in listed if name}


def unresolved(package: str, docstring: str, not_modules: frozenset[str] = frozenset(),
               ) -> list[str]:
    """The names `package`'s docstring gives that are no module (nor a name in one) of it
    or of a package above it, no setting and none of `not_modules`; and the names of its
    `modules:` list that are no module of it."""
    backticked, listed = named(docstring)
    missing = [name for name in sorted(backticked - not_modules - SETTINGS)
               if not any(_defines(f"{scope}.{name}") for scope in _scopes(package))
               and not _defines(name)]
    return missing + [name for name in sorted(listed) if not _is_module(f"{package}.{name}")]


def _packages() -> list[Path]:
    return sorted(path for path in (ROOT / "proxy").rglob("__init__.py")
                  if "__pycache__" not in path.parts)


@pytest.mark.parametrize("init", _packages(),
                         ids=lambda path: str(path.parent.relative_to(ROOT)))
def test_a_package_docstring_names_only_modules_that_exist(init):
    package = ".".join(init.parent.relative_to(ROOT).parts)
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    assert unresolved(package, docstring, frozenset(NOT_MODULES.get(package, ()))) == []


def test_the_words_kept_as_no_modules_are_in_their_docstrings():
    """A word listed here that its docstring no longer quotes goes from the list too."""
    for package, words in NOT_MODULES.items():
        init = ROOT.joinpath(*package.split(".")) / "__init__.py"
        backticked, _ = named(ast.get_docstring(ast.parse(init.read_text())) or "")
        assert words <= backticked, (package, words - backticked)


def test_a_module_gone_is_found_in_backticks_and_in_a_modules_list():
    assert unresolved("proxy.turn", "`plan` (request → plan), `openers` (gone)") == ["openers"]
    assert unresolved("proxy.shell", "`web` serves, `server` runs it, `proxy.turn` decides") == []
    assert unresolved("proxy.shell.store", "`interface.ResponseStore`, `interface.Nothing`, "
                      "set by `responses_store_url`") == ["interface.Nothing"]
    assert unresolved("proxy.toolcalls", "Modules: engine, framing, bench") == ["bench"]
    assert unresolved("proxy.toolcalls", "`formats/` and `Document`, `extract()`") == []
