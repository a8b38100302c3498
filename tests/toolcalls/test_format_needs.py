"""A format's `needs` (FormatSpec) keeps it from running on a text that holds none of its
groups of literals whole. The declaration must be true of the format's own reader: on such a
text it finds no frame, refused ones included (a property over pieces of every format's
frames), and extract's answer is the one it gives with the gate switched off (every format
run as its markers alone allow)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.toolcalls import extract, registry
from proxy.toolcalls.registry import NEEDS, SPECS, resolved_markers
from proxy.toolcalls.scan import Document
from tools.fuzz import SEEDS, TOOLS

GATED = tuple(spec for spec in SPECS if spec.needs)
LITERALS = sorted({m for spec in GATED for group in spec.needs for m in group})
# Frames of every kind, the needed literals whole and cut, and the prose and lines around them.
PIECES = [*SEEDS, *LITERALS, *(m[1:] for m in LITERALS if len(m) > 1),
          *(m[:-1] for m in LITERALS if len(m) > 1), '[read(path="/tmp/a")]', "]", ")", "(",
          '{"name": "read", "arguments": {"path": "a"}}', "read(", "\n", " ", "Sure.\n",
          "```json\n", "\n```", "<tool_call>", "</tool_call>", "<tool_call>\n",
          '[{"name": "read", "arguments": {"path": "a"}}]',
          '<tool_call>\n[{"name": "read", "arguments": {"path": "a"}}]\n</tool_call>',
          *(f'<{tag}>\n{{"name": "read", "arguments": {{"path": "a"}}}}\n</{tag}>'
            for spec in GATED for tag in spec.wrapper_tags)]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)
# Some pieces with one of the needed literals taken out wherever it stands.
STRIPPED = st.builds(lambda text, literal: text.replace(literal, ""), TEXTS,
                     st.sampled_from(LITERALS))
ANY_TEXT = st.one_of(TEXTS, STRIPPED)


def _needs_met(needs: tuple[tuple[str, ...], ...], text: str) -> bool:
    return any(all(m in text for m in group) for group in needs)


def test_the_gated_formats_are_declared():
    assert {spec.name for spec in GATED} == {"granite", "pythonic", "tools_wrapper"}
    assert set(NEEDS) == {spec.name for spec in GATED}


@pytest.mark.parametrize("spec", GATED, ids=lambda spec: spec.name)
@settings(max_examples=500, deadline=None)
@given(text=ANY_TEXT)
def test_no_frame_without_what_a_format_needs(spec, text):
    doc = Document(text, resolved_markers(("auto",)), frozenset(TOOLS), TOOLS)
    frames = list(spec.find_frames(doc))
    if not _needs_met(spec.needs, text):
        assert frames == []


def _ungated(patched: pytest.MonkeyPatch) -> None:
    patched.setattr(registry, "NEEDS", {})
    for cached in (registry.runnable, registry.markers_of, registry.resolved_markers):
        cached.cache_clear()


@settings(max_examples=600, deadline=None)
@given(text=ANY_TEXT, truncated=st.booleans())
def test_extract_answers_as_without_the_gate(text, truncated):
    found = extract(text, TOOLS, truncated=truncated)
    try:
        with pytest.MonkeyPatch.context() as patched:
            _ungated(patched)
            assert extract(text, TOOLS, truncated=truncated) == found
    finally:
        for cached in (registry.runnable, registry.markers_of, registry.resolved_markers):
            cached.cache_clear()
