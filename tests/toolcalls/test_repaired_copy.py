"""A value the scan reads only repaired is read once (issue 21, item 8): the document's repaired
copy finds its end and keeps its value for the engine (scan.repaired, Document.loads_repaired),
and the repairs are made where the decoder reports errors (repair.RepairedText). Each path is
compared with the one it shortcuts: the same calls, repairs, refusals and content, over the
bench's inputs and generated ones."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import extraction
from proxy.toolcalls import exact_json, extract
from proxy.toolcalls import repair as repair_module
from proxy.toolcalls.repair import NotJson, loads_repaired
from proxy.toolcalls.repair import regexes as regex_repairs
from proxy.toolcalls.repair.at_errors import RepairedText
from proxy.toolcalls.repair.python_literal import NotLiteral, read_python_literal
from proxy.toolcalls.scan import Document, MarkerIndex, json_spans, repaired
from proxy.toolcalls.scan.decode import UNKNOWN

from .bracket_count import plain_end
from .test_fast_paths import ALL_MARKERS, ONCE_PIECES, SPAN_PIECES
from .test_properties import documents, texts

TOOLS = {"read": {}, "write": {}, "get_weather": {}}
GENERATED = settings(max_examples=300, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


def outcome(text: str, tools: dict | None = None) -> tuple:
    found = extract(text, TOOLS if tools is None else tools)
    return (found.content,
            [(c.name, c.arguments, c.format, c.repairs, c.start, c.end) for c in found.calls],
            [(x.format, x.start, x.end, x.reason, x.name) for x in found.left_as_text])


@contextmanager
def without_repaired_copy() -> Iterator[None]:
    """The path before the repaired copy: ends found by the patched copies and the bracket
    scanner, every payload repaired and decoded by the engine."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repaired.RepairedSpans, "end", lambda self, start, python: UNKNOWN)
        yield


@contextmanager
def probe_steps(steps: int) -> Iterator[None]:
    """Values left to the decoders after `steps` steps of the bracket scanner (0: every value
    a decoder fails on is read in the repaired copy, however small)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(json_spans.JsonSpans, "PROBE_STEPS", steps)
        yield


@contextmanager
def counting_reads() -> Iterator[list[bool]]:
    """Whether each payload the engine decoded came from the repaired copy."""
    reads: list[bool] = []
    value = repaired.RepairedSpans.value

    def spy(self: repaired.RepairedSpans, payload: str) -> object:
        found = value(self, payload)
        reads.append(found is not None)
        return found
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repaired.RepairedSpans, "value", spy)
        yield reads


def same_either_way(text: str) -> None:
    shared = outcome(text)
    with without_repaired_copy():
        assert outcome(text) == shared


# --- the bench's inputs ----------------------------------------------------------------------

@cache
def bench_inputs() -> list[tuple[str, str]]:
    """The bench's inputs at 16 KB, (label, text). Not a module-level list: the streamed
    mode's tests read every text this module holds (tests/streamed_cases.corpus), and push
    each one character at a time."""
    return list(extraction.cases(16_384))


@pytest.mark.parametrize("index", range(len(bench_inputs())),
                         ids=[label for label, _ in bench_inputs()])
def test_every_bench_input_is_read_as_without_the_repaired_copy(index):
    same_either_way(bench_inputs()[index][1])


@pytest.mark.parametrize("label", ["rows_needing_repairs", "single_quoted_rows"])
def test_a_large_call_needing_repairs_is_decoded_from_the_repaired_copy(label):
    text = dict(bench_inputs())[label]
    with counting_reads() as reads:
        found = extract(text, extraction.TOOLS)
    assert [call.name for call in found.calls] == ["read"]
    assert reads == [True]  # the engine repaired and decoded nothing itself
    rows = orjson.loads(found.calls[0].arguments)["path"]
    assert rows[0] == {"id": 1, "ok": True, "tags": ["a", "b"], "meta": {"x": None}}


JSON_ROW = '{"id": %d, "ok": True, "n": %s, "s": %s, "tags": ["a",], "meta": {"x": None}}'
PY_ROW = "{'id': %d, 'ok': True, 'n': %s, 's': %s, 'tags': ['a',], 'meta': {'x': None}}"


@pytest.mark.parametrize(("before", "number", "json_string", "py_string"), [
    ("", "1", '"plain"', "'plain'"),
    ('None of this is "True": {"a": None} [1, 2] ', "2", '"x"', "'x'"),  # before the frame
    ("Sure — it’s “done”. ", "123456789012345678901234567890", '"big"', "'big'"),  # > 64 bits
    ("", "-1.5e3", '"True, None,] \\"q\\""', "'True, None,] \"q\"'"),  # what is repaired
    ("", "0", '"tab\there"', "'it\\'s'"),  # a raw control character; an escaped quote
    ("CRLF\r\n", "3", '"x"', "'x'"),  # a carriage return: no repaired copy of the document
])
def test_large_frames_needing_repairs_read_as_without_the_repaired_copy(
        before, number, json_string, py_string):
    rows = ", ".join(JSON_ROW % (i, number, json_string) for i in range(300))
    py_rows = ", ".join(PY_ROW % (i, number, py_string) for i in range(300))
    hermes = f'<tool_call>{{"name": "read", "arguments": {{"rows": [{rows}, ]}}}}</tool_call>'
    for text in (hermes + "\nDone [x].",
                 f'{{"name": "read", "arguments": {{"rows": [{rows}]}}}}',
                 f"<tool_call>{{'name': 'read', 'arguments': {{'rows': [{py_rows}]}}}}"
                 "</tool_call>"):
        same_either_way(before + text)
    row = json.loads(extract(before + hermes, TOOLS).calls[0].arguments)["rows"][7]
    assert row == {"id": 7, "ok": True, "n": json.loads(number),
                   "s": json.loads(json_string, strict=False), "tags": ["a"],
                   "meta": {"x": None}}


# --- generated inputs --------------------------------------------------------------------------

@GENERATED
@given(texts)
def test_generated_text_is_read_as_without_the_repaired_copy(text):
    with probe_steps(0):
        same_either_way(text)


@GENERATED
@given(documents())
def test_well_formed_frames_are_read_as_without_the_repaired_copy(document):
    with probe_steps(0):
        same_either_way(document[0])


_ROWS = ['{"id": 1, "ok": True, "tags": ["a", "b"], "meta": {"x": None}}', "[1, 2,]",
         '{"a": False,}', '{"a": 1 ,}', '"True"', '{"s": "True is None,]"}', "None",
         '{"a": "\\q"}', '{"k": "é日本"}', "123456789012345678901234", "[,]", "[1,,]",
         '{"a": Truex}', '{"x": "a\tb"}', '{"c": "a\\"b"}', "{'a': 1}"]
_PY_ROWS = ["{'id': 1, 'ok': True, 'meta': {'x': None}}", "[1, 2,]", "{'s': 'it\\'s'}",
            "{'s': 'say \"hi\"'}", "{'a': False,}", "'True'", "(1, 2)", "{'s': 'a\\nb'}",
            "[,]", "{'a': 1e5}", "{'a': 'é'}"]


@st.composite
def frames_needing_repairs(draw: st.DrawFn) -> str:
    python = draw(st.booleans())
    rows = draw(st.lists(st.sampled_from(_PY_ROWS if python else _ROWS), min_size=1,
                         max_size=5))
    body = draw(st.sampled_from([", ", ",", " , "])).join(rows * draw(st.integers(1, 4)))
    q = "'" if python else '"'
    payload = (f"{{{q}name{q}: {q}{draw(st.sampled_from(['read', 'nope']))}{q}, "
               f"{q}arguments{q}: {{{q}rows{q}: [{body}{draw(st.sampled_from(['', ',', ' ,']))}"
               "]}}")
    prose = draw(st.sampled_from(["", "Sure. ", 'It is "True": [1] ', "Done {x}.\n"]))
    wrap = draw(st.sampled_from(["<tool_call>{}</tool_call>", "{}", "```json\n{}\n```",
                                 "<tool_call>{} and [more]", "[TOOL_CALLS]{}"]))
    return prose + wrap.replace("{}", payload, 1)


@GENERATED
@given(frames_needing_repairs(), st.sampled_from([0, 64]))
def test_frames_needing_repairs_are_read_as_without_the_repaired_copy(text, steps):
    with probe_steps(steps):
        same_either_way(text)


# What may stand before a text's last closing brackets: a comma the decoder calls a trailing
# one (after a value), and commas it does not (after a comma, a bracket, a key, in a string).
_ENDINGS = [",", " , ", ",\n", ",,", ", ,", "[,", '"k",', '"k":,', '", ]"', "True,", "1,",
            "1e,", '"\\",', "}", "]", " ", "\n", '",', "{,"]


@GENERATED
@given(frames_needing_repairs(), st.lists(st.sampled_from(_ENDINGS), max_size=3).map("".join),
       st.sampled_from(["", "]", "}", "]}", "}}", " ] } ", "]" * 70]),
       st.sampled_from(["", "</tool_call>", " and [x]", "\n```", '"]', "[1,]", ' {"a": [1] ,}']))
def test_commas_before_the_last_brackets_are_read_as_without_the_repaired_copy(
        frame, ending, closers, after):
    cut = max(frame.rfind("]"), frame.rfind("}"))
    with probe_steps(0):
        same_either_way(frame[:cut] + ending + closers + frame[cut:] + after)


@pytest.mark.parametrize("quote", ['"', "'"])
@pytest.mark.parametrize("prose_after", [False, True])  # True: the comma in the first half
@pytest.mark.parametrize("trailer", ["[1,]", '{"a": 1 ,}', "\n[[1], 2,]"])
def test_names_before_a_trailing_comma_after_the_frame_are_read_as_without_the_repaired_copy(
        quote, prose_after, trailer):
    # the copy repairs the comma among the last brackets first; the names fixed afterwards,
    # in the frame before it, move it
    frame = ('{"name": "read", "arguments": {"path": [' + "True, None, " * 300 + "False]}}"
             ).replace('"', quote)
    for wrapped in (frame, f"<tool_call>{frame}</tool_call>"):
        for steps in (0, 64):
            with probe_steps(steps):
                same_either_way(wrapped + trailer + " Done." * (1_000 if prose_after else 0))


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["{", "[", "{'", "['", "[{'"]),
       st.lists(st.sampled_from(SPAN_PIECES), max_size=30).map("".join))
def test_values_read_in_the_repaired_copy_end_where_their_brackets_balance(opening, rest):
    text = opening + rest
    python = json_spans._PYTHON_STYLE.match(text) is not None
    with probe_steps(0):
        doc = Document(text)
        end = doc.json_end(0)
    assert doc.budget_exhausted or end == plain_end(text, "\"'" if python else '"')


# --- repairs where the decoder reports errors --------------------------------------------------

def exact(value: object) -> object:
    """`value` with each type spelled out and each orjson.Fragment (an integer past 64 bits)
    as the literal it writes: Fragments compare and print by identity."""
    if isinstance(value, orjson.Fragment):
        return "fragment", orjson.dumps(value)
    if isinstance(value, dict):
        return "dict", [(key, exact(item)) for key, item in value.items()]
    if isinstance(value, list | tuple):
        return type(value).__name__, [exact(item) for item in value]
    return type(value).__name__, value


def _loads(text: str) -> object:
    try:
        value, repairs = loads_repaired(text)
    except NotJson:
        return "not json"
    return exact(value), repairs


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from([*ONCE_PIECES, "False", "'", "\\", "\\'", "é"]), min_size=1,
                max_size=14).map("".join))
def test_repairs_where_the_decoder_reports_errors_equal_the_repairs_at_once(text):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repair_module, "_repaired_at_errors", lambda text, error: None)
        fast = _loads(text)
        patch.setattr(RepairedText, "value", lambda self: None)
        assert fast == _loads(text)


_LITERAL_PIECES = ["{", "}", "[", "]", ",", ", ", ":", "'a'", "'a': ", "True", "None", "False",
                   "1", "'it\\'s'", "'say \"hi\"'", "'\\\\'", "'\\n'", "'True'", "',]'", "(",
                   ")", "'é'", "12345678901234567890123"]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["{", "["]),
       st.lists(st.sampled_from(_LITERAL_PIECES), max_size=14).map("".join))
def test_single_quoted_literals_read_the_same_where_the_decoder_reports_errors(opening, rest):
    def read(text: str) -> object:
        try:
            return exact(read_python_literal(text))
        except NotLiteral:
            return "not a literal"
    text = opening + rest
    fast = read(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RepairedText, "value", lambda self: None)
        assert fast == read(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["\\", "\\\\", "q", "n", "u", "u00e9", '"', "/", "x", "\x00",
                                 "é", "b", " "]), max_size=20).map("".join))
def test_invalid_escapes_doubled_at_once_equal_the_general_rewrite(text):
    fast = regex_repairs._invalid_escapes(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(regex_repairs, "_no_json_escape", lambda text: False)
        assert regex_repairs._invalid_escapes(text) == fast


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(sorted(ALL_MARKERS)),
                          st.sampled_from(["<", "|", "[", "=", "_", "tool", "x", "▁", "｜"]),
                          st.text(max_size=4)), max_size=30).map("".join),
       st.sampled_from(["<tool_call>", ">>>", '"name"', ";", "<|python_start|>", "x=", "é"]))
def test_markers_outside_the_documents_set_are_found_exactly(text, marker):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MarkerIndex, "COMBINED_SEARCH_FROM", 0)
        index = MarkerIndex(text, frozenset())
        assert index.has(marker) == (marker in text)


# --- numbers kept exact ----------------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.integers(1, 24).map(lambda n: "7" * n),
                          st.sampled_from([" ", ",", "é", "日", "\ud800", "x" * 97, "1e5"]),
                          st.integers(0, 40).map(lambda n: "-" * n)), max_size=60).map("".join),
       st.integers(0, 5_000))
def test_long_digit_runs_are_found_as_a_regex_finds_them(text, padding):
    for padded in (text, "a" * padding + text, text + "é" * padding):
        expected = re.search("[0-9]{19}", padded) is not None
        assert exact_json.has_long_digit_run(padded) == expected


@pytest.mark.parametrize("length", [18, 19, 20])
def test_a_long_digit_run_is_found_wherever_it_starts(length):
    for offset in range(24):
        text = "x" * 5_000 + "-" * offset + "7" * length + "-" * 100
        assert exact_json.has_long_digit_run(text) == (length >= 19)
