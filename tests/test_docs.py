"""The documentation holds together: README.md fits on a screen; every relative link and
`#anchor` in it and in docs/ resolves as GitHub renders them; every `make` target, `python
app.py` command and flag, `python -m` module and repository path the pages show exists."""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.docs_pages import (
    README,
    ROOT,
    code_blocks,
    headings,
    lines_outside_fences,
    markdown_files,
    page,
    section,
    table,
)

README_MAX_LINES = 250
PROXY = "http://127.0.0.1:8003"  # where the pages point agents
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE_OPEN = re.compile(r"^ {0,3}(```|~~~)")
# Where the pages name a file or folder of this repository (placeholders such as NAME aside).
REPO_PATH = re.compile(r"(?:proxy|tests|deploy|bench|tools|docs)/[\w./-]*|[\w.-]+\.(?:py|json|lock"
                       r"|txt|toml|yaml|md)|Dockerfile|Makefile")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def github_slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: the rendered text (code spans and links as
    their text, emphasis marks dropped), lowercased, punctuation other than `-` and `_`
    dropped, spaces to `-`."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), title)
    text = LINK.sub(lambda m: m.group(1), text)
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page's headings make, duplicates numbered `-1`, `-2`, … as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for _, title in headings(path.read_text(encoding="utf-8")):
        slug = github_slug(title)
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}-{seen[slug]}"
        else:
            seen[slug] = 0
        found.add(slug)
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link outside code, its text on one line or several."""
    lines = lines_outside_fences(path.read_text(encoding="utf-8"))
    text = "\n".join(CODE_SPAN.sub("", line) for _, line in lines)
    return [(lines[text.count("\n", 0, match.end())][0], match.group(2))
            for match in LINK.finditer(text)]


def code(path: Path) -> list[str]:
    """The code the page shows: each line of its fenced blocks and each inline code span (a
    span may run over lines of its paragraph)."""
    text = path.read_text(encoding="utf-8")
    outside = lines_outside_fences(text)
    numbers = {number for number, _ in outside}
    shown = [line for number, line in enumerate(text.splitlines(), 1)
             if number not in numbers and not FENCE_OPEN.match(line)]
    prose = "\n".join(line for _, line in outside)
    for paragraph in re.split(r"\n\s*\n", prose):
        shown += [" ".join(match.group(2).split())
                  for match in CODE_SPAN.finditer(paragraph.replace("\n", " "))]
    return shown


def test_the_slug_rules_are_githubs():
    assert github_slug("Coverage: vLLM, SGLang, llama.cpp") == "coverage-vllm-sglang-llamacpp"
    assert github_slug("`python app.py doctor`: probe a live server") == (
        "python-apppy-doctor-probe-a-live-server")
    assert github_slug("The answer's markup") == "the-answers-markup"
    assert github_slug("systemd + nginx") == "systemd--nginx"
    assert github_slug("Add a [front](x.md) _now_") == "add-a-front-_now_"


def test_duplicate_headings_are_numbered(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Setup\n\n## Setup\n\n```\n# Setup\n```\n\n### Setup\n")
    assert anchors(page) == {"setup", "setup-1", "setup-2"}


def test_links_are_read_outside_code_and_across_lines(tmp_path):
    page_ = tmp_path / "page.md"
    page_.write_text("See [the\nrest](a.md#x) and `[not](b.md)`.\n\n```\n[no](c.md)\n```\n"
                     "![img](d.png) [web](https://example.com)\n")
    assert links(page_) == [(2, "a.md#x"), (7, "d.png"), (7, "https://example.com")]


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_each_page_has_one_title_and_its_sections_under_it(path: Path):
    levels = [level for level, _ in headings(path.read_text(encoding="utf-8"))]
    assert levels[0] == 1
    assert levels.count(1) == 1
    assert all(after <= before + 1 for before, after in itertools.pairwise(levels))


def test_the_readme_fits_on_a_screen():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_every_relative_link_and_anchor_resolves(path: Path):
    broken = []
    for number, target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not this repository's
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{_rel(path)}:{number}: no file {target}")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{_rel(path)}:{number}: no anchor #{anchor} in {_rel(linked)}")
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme_or_the_index():
    linked = set()
    for index in (README, ROOT / "docs" / "README.md"):
        for _, target in links(index):
            file_part = target.partition("#")[0]
            if file_part:
                linked.add((index.parent / file_part).resolve())
    assert [_rel(path) for path in markdown_files() if path not in linked and path != README] == []


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {match.group(1) for match in re.finditer(r"^([A-Za-z0-9_.-]+):(?!=)", text, re.M)}


@functools.cache
def _help(*command: str) -> str:
    """What `python app.py COMMAND --help` prints (the CLI as users run it, wherever its
    modules live)."""
    result = subprocess.run([sys.executable, "app.py", *command, "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _app_commands(shown: list[str]) -> list[tuple[str | None, list[str]]]:
    """Each `python app.py …` the code shows: (its subcommand or None for serving, its flags)."""
    found = []
    for line in shown:
        for match in re.finditer(r"python3? app\.py((?: +[^\s#;&|)]+)*)", line):
            words = match.group(1).split()
            command = words[0] if words and re.fullmatch(r"[a-z]+", words[0]) else None
            flags = [word.split("=")[0] for word in words if word.startswith("--")]
            found.append((command, flags))
    return found


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_every_make_target_shown_exists(path: Path):
    shown = {target for line in code(path)
             for target in re.findall(r"(?:^|[\s;&(])make ([a-z][\w-]*)", line)}
    assert shown - _make_targets() == set()


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_every_app_command_and_flag_shown_exists(path: Path):
    top = _help()
    missing = []
    for command, flags in _app_commands(code(path)):
        if command is not None and not re.search(rf"\b{command}\b", top):
            missing.append(f"python app.py {command}")
            continue
        # a subcommand with a parser of its own prints its own usage
        usage = _help(command) if command and f"app.py {command}" in _help(command) else top
        missing += [f"python app.py {command or ''} {flag}" for flag in flags
                    if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", usage)]
    assert missing == []


def test_the_readme_shows_the_commands_a_fresh_machine_needs():
    shown = code(README)
    assert {"make run", "make test"} <= {line.split("#")[0].strip() for line in shown}
    assert {command for command, _ in _app_commands(shown)} >= {"doctor"}


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_every_python_module_shown_exists(path: Path):
    """Each `python -m` module a page shows is there, and this repository's own also import
    (a name it imports that a rename took away fails here, not in a reader's shell)."""
    modules = {match for line in code(path)
               for match in re.findall(r"python3? -m ([\w.]+)", line)}
    assert [name for name in sorted(modules) if name not in ("pip", "venv", "sglang.launch_server",
                                                             "sglang_router.launch_router")
            and importlib.util.find_spec(name) is None] == []
    ours = sorted(name for name in modules if (ROOT / name.split(".")[0]).is_dir())
    if ours:
        done = subprocess.run([sys.executable, "-c", "; ".join(f"import {name}" for name in ours)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_every_repository_path_shown_exists(path: Path):
    """A code span that is a path of this repository (`proxy/shell/store/sqlite.py`,
    `tests/fixtures/`, `config.example.json`) names a file or folder that is there."""
    missing = []
    for span in code(path):
        if " " in span or "NAME" in span or "*" in span or not REPO_PATH.fullmatch(span):
            continue
        if not (ROOT / span).exists() and "/" in span:
            missing.append(span)
    assert missing == []


def test_the_operating_page_lists_every_metric_the_proxy_exports():
    from proxy.telemetry.metrics import Metrics

    exported = {family.name + ("_total" if family.type == "counter" else "")
                for family in Metrics().registry.collect()}
    rows = table(page("operating.md"), "| metric | labels | what |")
    assert sorted(row[0].strip("`") for row in rows) == sorted(exported)


def test_the_errors_page_names_every_code_the_proxy_raises():
    """Each `code="…"` an error of the proxy is made with has a row on docs/errors.md."""
    raised = {match for path in (ROOT / "proxy").rglob("*.py")
              for match in re.findall(r"\bcode=\"([a-z_]+)\"", path.read_text(encoding="utf-8"))}
    documented = {code for row in table(page("errors.md"), "| status | `code` | when |")
                  for code in re.findall(r"`([a-z_]+)`", row[1])}
    assert raised - documented == set()


def test_the_chat_agents_page_shows_the_setups_make_e2e_runs(tmp_path):
    """Qwen Code's settings, opencode's config and Continue's config.yaml on
    docs/clients/chat-agents.md are the files `make e2e` writes for each agent."""
    from tests.e2e.chat_agents import AGENTS, CONTINUE_CONFIG
    from tests.fake_vllm import MODEL

    text = page("clients/chat-agents.md")
    qwen, opencode = (json.loads(block) for block in code_blocks(text, "json"))
    AGENTS["qwen-code"].setup(tmp_path, PROXY, "hi")
    assert json.loads((tmp_path / ".qwen" / "settings.json").read_text()) == qwen
    AGENTS["opencode"].setup(tmp_path, PROXY, "hi")
    assert json.loads((tmp_path / "opencode.json").read_text()) == opencode
    assert code_blocks(text, "yaml") == [CONTINUE_CONFIG.format(model=MODEL, url=PROXY,
                                                                key="anything")]


def test_the_cline_and_kilo_code_pages_show_the_setups_make_e2e_runs(tmp_path):
    """docs/clients/cline.md's providers.json and global settings, and kilo-code.md's
    kilo.json, are the files `make e2e` writes (its key where the page says `anything`); each
    page's command shows every switch and variable the test runs the agent with."""
    from tests.e2e.chat_agents import KEY
    from tests.e2e.cline_kilo import CLINE, KILO

    for agent, name, files in ((CLINE, "cline.md", [".cline/data/settings/providers.json",
                                                     ".cline/data/settings/global-settings.json"]),
                               (KILO, "kilo-code.md", ["kilo.json"])):
        home = tmp_path / agent.binary
        home.mkdir()
        argv, env = agent.setup(home, PROXY, "hi")
        text = page(f"clients/{name}")
        shown = [json.loads(block.replace('"anything"', json.dumps(KEY)))
                 for block in code_blocks(text, "json")]
        assert shown == [json.loads((home / file).read_text()) for file in files]
        commands = "".join(code_blocks(text, "sh"))
        assert all(flag in commands for flag in argv if flag.startswith("-")), argv
        assert all(f"{variable}=" in commands for variable in env), env


def test_the_codex_pages_show_the_setup_make_e2e_runs():
    """docs/clients/codex.md's config.toml, pointed at the proxy, is the one `make e2e` gives
    Codex (with `--strict-config`: tests/e2e/test_codex.py reads it from the page), and the
    README's is a part of it."""
    (full,) = code_blocks(page("clients/codex.md"), "toml")
    whole = tomllib.loads(full)
    assert whole["model_providers"][whole["model_provider"]]["base_url"] == PROXY + "/v1"
    assert whole["model_providers"][whole["model_provider"]]["wire_api"] == "responses"
    (short,) = code_blocks(README.read_text(encoding="utf-8"), "toml")
    assert {key: whole[key] for key in tomllib.loads(short)} == tomllib.loads(short)


def test_the_operating_page_names_every_field_of_status_json():
    """Each top-level field of `/proxy/status.json`, and each field of its rows, is named in
    the row of docs/operating.md's field table that describes it."""
    from proxy.telemetry.status import MinuteCount, StatusInput, TurnRecord, document

    turn = TurnRecord(ts=1.0, request_id="r", front="chat", mode="buffered", model="m",
                      stream=True, status=502, upstream="u", upstream_status=502,
                      upstream_ms=5.0, total_ms=6.0, error="upstream_cut", capture="k")
    doc = document(StatusInput([turn], [MinuteCount(0, 1, 1)], ["u"], captures=True), now=60.0)
    cells = {}
    for name, what in table(page("operating.md"), "| field | what |"):
        for field in re.findall(r"`(\w+)(?:\[\])?`", name):
            cells[field] = name + what
    missing = [key for key in doc if key not in cells]
    for key, value in doc.items():
        rows = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
        missing += [f"{key}.{field}" for row in rows for field in row
                    if f"`{field}`" not in cells.get(key, "")]
    assert missing == []


def test_the_architecture_page_places_every_module_of_the_proxy():
    """Each module of `proxy/` (or the folder holding it) is named in the row of its package
    in the architecture page's table, so the table cannot fall behind the code."""
    rows = {row[0].strip("`"): row[1]
            for row in table(page("architecture.md"), "| package | what it is | knows HTTP? |")}
    missing = []
    for path in sorted((ROOT / "proxy").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        relative = path.relative_to(ROOT).as_posix()
        package = max((name for name in rows if name.endswith("/") and relative.startswith(name)),
                      key=len)
        first = relative.removeprefix(package).split("/")[0].removesuffix(".py")
        if f"`{first}`" not in rows[package] and f"`{first}/`" not in rows[package]:
            missing.append(relative)
    assert missing == []


def test_the_install_page_names_the_server_variables_the_cli_reads():
    serving = section(page("install.md"), "Serving")
    assert set(re.findall(r"GUNICORN_\w+", serving)) == set(re.findall(r"GUNICORN_\w+", _help()))
