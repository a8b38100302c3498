"""A format is declared once, in its module's SPEC (issue 27): the registry lists the modules,
the aliases, hold-back openers and doctor's tables are read from the specs, the tables of
docs/formats.md agree with them, and no module outside `proxy/toolcalls/formats/` names a format."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bench import extraction
from proxy.diagnose.doctor.probe import FOREIGN_MARKERS, VLLM_TOOL_PARSERS
from proxy.toolcalls import registry
from proxy.toolcalls.engine import extract
from proxy.toolcalls.formats.spec import FormatSpec, StructuralTag
from proxy.toolcalls.opener_patterns import alt, lit, opt, run, seq
from proxy.toolcalls.registry import ALIASES, OPENERS, SPECS, resolve
from tests.docs_pages import page, section, table

ROOT = Path(__file__).resolve().parents[2]
FORMATS_PAGE = page("formats.md")
FORMATS_DIR = "proxy/toolcalls/formats/"
# Modules outside the formats that may spell a format's name or marker, and why.
ALLOWED = {
    # a model family's name (GLM), for the reasoning parser doctor recommends
    ("proxy/diagnose/doctor/findings.py", "glm"),
}
# Markers that are no format's own token: JSON's and prose's shapes (several formats share).
GENERIC_MARKERS = {'"name"', "\n{", ";", "call:"}  # (Gemma 4's bare `call:` is a word)


def _own_markers(spec: FormatSpec) -> set[str]:
    found = {*spec.markers, *(marker for marker, _ in spec.doctor_markers)}
    return {marker for marker in found if len(marker) >= 4 and marker not in GENERIC_MARKERS}


def format_mentions(source: str) -> list[tuple[int, str]]:
    """(line, what) for each string constant of `source` (docstrings aside) that is a
    format's name or holds one of its own markers."""
    names = {spec.name for spec in SPECS}
    markers = {marker for spec in SPECS for marker in _own_markers(spec)}
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            hits = [node.value] if node.value in names else sorted(
                marker for marker in markers if marker in node.value)
            found += [(node.lineno, hit) for hit in hits]
    return found


def test_each_module_of_the_registry_declares_its_format_in_a_spec():
    assert len(SPECS) == len(registry._MODULES) > 30
    for module, spec in zip(registry._MODULES, SPECS, strict=True):
        assert isinstance(spec, FormatSpec)
        assert spec.name == module.NAME == module.__name__.rsplit(".", 1)[1]
        assert spec.find_frames is module.find_frames
        assert spec.openers, spec.name  # the streamed mode must know where its frames begin
    assert len({spec.name for spec in SPECS}) == len(SPECS)
    assert list(registry.FORMATS) == [spec.name for spec in SPECS]
    assert {spec.name: spec.openers for spec in SPECS} == OPENERS


def test_no_module_outside_the_formats_names_a_format():
    offenders = []
    for path in sorted((ROOT / "proxy").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(FORMATS_DIR) or (rel, None) in ALLOWED:
            continue
        offenders += [(rel, line, what)
                      for line, what in format_mentions(path.read_text(encoding="utf-8"))
                      if (rel, what) not in ALLOWED]
    assert not offenders, offenders


def test_the_check_finds_a_name_or_a_marker_in_code_but_not_in_a_docstring():
    assert format_mentions('FORMAT = "hermes"\n') == [(1, "hermes")]
    assert format_mentions('X = ("a", f"{1}[TOOL_CALLS]")\n') == [(1, "[TOOL_CALLS]")]
    assert format_mentions('"""`hermes` and <tool_call> in prose."""\n'
                           'def f():\n    """hermes"""\n    return "hermetic"\n') == []
    assert format_mentions('KEY = "name"\nSEP = ";"\n') == []  # shapes, no format's own


def test_engine_names_resolve_to_the_specs_that_list_them():
    for spec in SPECS:
        for name in spec.engine_names:
            assert spec.name in [found for found, _ in resolve([name])], (spec.name, name)
    # a parser several formats read (xLAM's) stands for all of them, in name order
    readers = sorted(spec.name for spec in SPECS if "xlam" in spec.vllm)
    assert readers == ["bare_json", "code_fence", "hermes", "mistral"]
    assert ALIASES["xlam"] == tuple(readers)
    assert ALIASES["qwen3_coder"] == "qwen_xml"
    assert "hermes" not in ALIASES  # a format's own name is no alias


def test_doctor_reads_its_parsers_and_markers_from_the_specs():
    assert {spec.name: spec.doctor_parser for spec in SPECS} == VLLM_TOOL_PARSERS
    assert {marker: parser for spec in SPECS
                               for marker, parser in spec.doctor_markers} == FOREIGN_MARKERS
    assert FOREIGN_MARKERS["[TOOL_CALLS]"] == "mistral"
    for parser in {*filter(None, VLLM_TOOL_PARSERS.values()), *FOREIGN_MARKERS.values()}:
        assert resolve([parser])  # a name the `formats` setting accepts too


def _names(cell: str) -> list[str]:
    return [name.strip(" `") for name in re.split(r",\s*(?![^()]*\))", cell) if name.strip()]


def _coverage() -> list[list[str]]:
    """The coverage table's rows that name formats of ours (not the rows of what none reads)."""
    rows = table(section(FORMATS_PAGE, "Coverage: vLLM, SGLang, llama.cpp"), "| ours |")
    return [row for row in rows if row[0].startswith("`")]


def test_the_docs_format_table_lists_the_specs_in_order():
    rows = table(FORMATS_PAGE, "| format | what the model writes | models |")
    assert [row[0].strip("`") for row in rows] == [spec.name for spec in SPECS]


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_the_docs_coverage_rows_of_a_format_are_its_spec(spec):
    """The engines' names in the coverage rows that name a format (its own row, and a row of
    several formats a parser reads) are its spec's, in order."""
    rows = [row for row in _coverage() if spec.name in _names(row[0])]
    assert rows
    assert [name for row in rows for name in _names(row[1])] == list(spec.vllm)
    assert [name for row in rows for name in _names(row[2])] == list(spec.sglang)
    assert [cell.strip() for row in rows for cell in re.split(r",\s*(?![^()]*\))", row[3])
            if cell.strip()] == list(spec.llama_cpp)


def test_a_call_written_to_a_format_s_structural_tag_is_read_back_by_that_format():
    """What an engine writes under the tag (begin, an arguments object, end), after prose,
    is one call of the format, with the tool's name and arguments."""
    tagged = [spec for spec in SPECS if spec.structural_tag is not None]
    assert len(tagged) >= 3
    for spec in tagged:
        tag = spec.structural_tag
        assert tag.begin.startswith(tag.trigger), spec.name
        text = "Let me look.\n" + tag.begin_for("read_file") + '{"path": "/a b"}' + tag.end
        found = extract(text, {"read_file": {"type": "object"}}, formats=[spec.name])
        assert [(c.name, c.arguments, c.format) for c in found.calls] == [
            ("read_file", '{"path":"/a b"}', spec.name)], spec.name


def test_a_tool_name_goes_into_a_tag_escaped_as_json_string_content():
    tag = StructuralTag("<t>", '<t>{"name": "{name}", "arguments": ', "}</t>")
    assert tag.begin_for('say"hi\\') == '<t>{"name": "say\\"hi\\\\", "arguments": '


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_the_extraction_bench_writes_every_opener_and_marker_of_a_spec(spec):
    """The bench's pathological openers are the specs' own: a new format is benched with
    no edit to bench/extraction.py."""
    openers = set(extraction.OPENERS)
    samples = {text for opener in spec.openers for text in opener.pattern.samples}
    assert samples
    assert samples <= openers
    assert set(spec.markers) <= openers
    if spec.structural_tag is not None:
        assert spec.structural_tag.begin_for("read") in openers
    labels = {label for label, _ in extraction.cases(256)}
    assert {f"{text!r}+{suffix!r}" for text in samples
            for suffix in extraction.SUFFIXES} <= labels


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_every_sample_of_an_opener_is_an_opener_whole(spec):
    for opener in spec.openers:
        for text in opener.pattern.samples:
            assert re.fullmatch(opener.pattern.full, text, re.S), (spec.name, text)


def test_a_pattern_samples_each_alternative_and_a_run_as_a_name():
    pattern = seq(alt("<a>", "<b>"), opt(" "), run(r"\w", 1, 200), "(")
    assert pattern.samples == ("<a> read(", "<a>read(", "<b> read(", "<b>read(")
    assert lit("x").samples == ("x",)
    assert run(r"\d", 2, 3).samples == ()  # none fits: nothing sampled, never a wrong one
    assert seq("<", run(r"\d", 2, 3)).samples == ()
