"""The engine's fast paths give the answers of its plain ones: the combined marker search,
repairs made at the decoder's error position, long JSON strings skipped by the C decoder, and
long pythonic literals decoded apart from ast. Each is compared with the path it shortcuts."""

from __future__ import annotations

import json
from json.decoder import scanstring  # type: ignore[attr-defined]  # C, not in typeshed

import orjson
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from proxy.toolcalls import engine, extract
from proxy.toolcalls import repair as repair_module
from proxy.toolcalls.formats import pythonic
from proxy.toolcalls.registry import MARKERS
from proxy.toolcalls.repair import NotJson, loads_repaired, python_literal
from proxy.toolcalls.repair.python_literal import _MISSING
from proxy.toolcalls.scan import Document, MarkerIndex, decode, json_spans, markers, markers_present

from .bracket_count import plain_end
from .test_formats import NEGATIVE, POSITIVE, TOOLS

ALL_MARKERS = frozenset(m for markers in MARKERS.values() for m in markers if len(m) > 1)


def outcome(text: str, **kwargs: object) -> tuple:
    found = extract(text, TOOLS, **kwargs)
    return (found.content, [(c.name, c.arguments, c.format, c.repairs) for c in found.calls],
            [(x.format, x.start, x.end, x.reason, x.name) for x in found.left_as_text])


# --- the combined marker search ---------------------------------------------------------------

CASES = [case[1] for case in POSITIVE] + [case[1] for case in NEGATIVE]


@pytest.mark.parametrize("text", CASES)
def test_combined_search_finds_what_one_search_per_marker_finds(text, monkeypatch):
    plain = outcome(text)
    monkeypatch.setattr(MarkerIndex, "COMBINED_SEARCH_FROM", 0)
    assert outcome(text) == plain
    assert markers_present(text, ALL_MARKERS) == {m for m in ALL_MARKERS if m in text}


@pytest.mark.parametrize(("fmt", "text"), [(case[0], case[1]) for case in POSITIVE])
def test_every_frame_holds_one_of_its_formats_markers(fmt, text):
    markers = MARKERS[fmt]
    assert not markers or any(marker in text for marker in markers)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(sorted(ALL_MARKERS)),
                          st.sampled_from(["<", "|", "[", "=", "_", "tool", "x", "▁", "｜"]),
                          st.text(max_size=4)), max_size=30).map("".join))
def test_markers_present_is_exact(text):
    assert markers_present(text, ALL_MARKERS) == {m for m in ALL_MARKERS if m in text}
    # The same with every group searched by the combined regex, however dense its anchor.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(markers, "_ALONE_UP_TO", 0)
        patch.setattr(markers, "_ATTEMPT_COST", 0)
        assert markers_present(text, ALL_MARKERS) == {m for m in ALL_MARKERS if m in text}


@pytest.mark.parametrize("text", CASES)
def test_listed_anchors_find_what_the_regex_search_finds(text, monkeypatch):
    plain = outcome(text)
    monkeypatch.setattr(MarkerIndex, "COMBINED_SEARCH_FROM", 0)
    assert outcome(text) == plain  # anchors listed: patterns tried at each marker only
    monkeypatch.setattr(MarkerIndex, "ANCHOR_HITS", -(1 << 40))
    assert outcome(text) == plain  # no anchor listed: every pattern searched through the text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(sorted(ALL_MARKERS)),
                          st.sampled_from(["<", "|", "[", "=", "_", "tool", "x", "▁", "｜"]),
                          st.text(max_size=4)), max_size=30).map("".join),
       st.integers(min_value=-3, max_value=8))
def test_document_marker_positions_are_exact(text, anchor_hits):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MarkerIndex, "COMBINED_SEARCH_FROM", 0)
        patch.setattr(MarkerIndex, "ANCHOR_HITS", anchor_hits)  # often too few: the slow path
        doc = Document(text, ALL_MARKERS)
        assert doc.present == {m for m in ALL_MARKERS if m in text}
        for marker in sorted(ALL_MARKERS):
            listed = doc.occurrences(marker)
            naive = [i for i in range(len(text)) if text.startswith(marker, i)]
            assert listed is None or listed == naive
            assert doc.has(marker) == bool(naive)
            assert doc.crowded(marker) is False


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(sorted(ALL_MARKERS)),
                          st.sampled_from(['"', '"name"', "name", "<", "]<]", "|", ":", "\n"]),
                          st.text(max_size=3)), max_size=40).map("".join),
       st.integers(min_value=0, max_value=64))
def test_present_from_anchor_slices_is_exact(text, anchor_hits):
    """A long text's markers, found from the slices around their listed anchors (or, anchored
    on a quote, by str.find), are the ones it holds: a marker whose anchor stands too close
    to the start to hold it is not found at a wrapped slice."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MarkerIndex, "COMBINED_SEARCH_FROM", 0)
        patch.setattr(MarkerIndex, "ANCHOR_HITS", anchor_hits)
        assert MarkerIndex(text, ALL_MARKERS).present == {m for m in ALL_MARKERS if m in text}


def test_a_long_text_runs_only_formats_whose_markers_occur():
    prose = "Some prose with <b>tags</b>, [links] and a = b; " * 400
    call = '<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>'
    found = extract(prose + call, TOOLS)
    assert [(c.name, c.format) for c in found.calls] == [("read", "hermes")]
    assert found.content == prose.rstrip()


# --- repairs at the decoder's error position ------------------------------------------------

def _plain_loads(text: str, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as patch:
        patch.setattr(repair_module, "_repaired_at_errors", lambda text, error: None)
        try:
            return loads_repaired(text)
        except NotJson:
            return "not json"


def _fast_loads(text: str) -> object:
    try:
        return loads_repaired(text)
    except NotJson:
        return "not json"


@pytest.mark.parametrize("text", [
    '{"a": 1,}', "[1, ]", '{"a": [1,2,],}', '{"a": True, "b": None,}', '{"a":"x\ny",}',
    '{"function=read","arguments":{"a":1,}}', '{"a": "True",}', '{"a":"\t",\n}',
    '{"a":1,,}', '{"a":1, ,}', "[1,]]", '{"a": Truex}', "[1,\x01 2]", '{"a": 1,\xa0}',
    "[,]", "{,}", '{"a": 1e999,}', "{'a': 1}", '{"a": None, \'b\': 1}', "[" + "1," * 40 + "]",
    "[" + "[1,]," * 40 + "]", '{"a": "x"\n,}', '{"a": [True, False, None],}',
])
def test_repairs_at_error_positions_equal_the_whole_text_repairs(text, monkeypatch):
    assert _fast_loads(text) == _plain_loads(text, monkeypatch)


PIECES = ["{", "}", "[", "]", ",", ",", ":", '"a"', '"a":', '"x\ny"', "True", "None", "1",
          " ", "\n", "'b'", '"function=read"', "\x01", "Truex", "null", ",}", ",]", "\xa0"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14).map("".join))
def test_repairs_at_error_positions_on_generated_text(text):
    with pytest.MonkeyPatch.context() as patch:
        assert repr(_fast_loads(text)) == repr(_plain_loads(text, patch))


def test_a_megabyte_with_a_trailing_comma_is_repaired_once():
    body = orjson.dumps("x\\" * 300_000).decode()
    value, repairs = loads_repaired('{"text": ' + body + ",}")
    assert (len(value["text"]), repairs) == (600_000, ("trailing_comma",))


# --- long JSON strings in the bracket scanner -------------------------------------------------

ESCAPED = '\\"x' * 100  # a string with more escapes than the step regex reads itself


@pytest.mark.parametrize(("text", "end"), [
    ('{"a": "' + ESCAPED + '", "b": [1,]} tail', 320),
    ('{"a": "' + "\\q" * 100 + '"},', 209),  # escapes JSON does not define: the regex skips
    ('[{"a": "' + "\n\\n" * 50 + '", "b": "}"}, 2] x', 174),
    ('{"a": "' + ESCAPED + "} ] never closed", None),
    ('{"a": "' + ESCAPED + '", "b": "' + ESCAPED, None),
])
def test_long_strings_end_where_the_regex_scanner_ends_them(text, end):
    doc = Document(text)
    doc.budget.decoder_failures = 0  # the bracket scanner, not the C decoder's whole parse
    assert doc.json_end(0) == end
    if end is not None:
        assert text[end - 1] in "]}"


_STRING_PIECES = st.one_of(
    st.sampled_from(['\\"', "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude80", "\\ud800", "\\q",
                     "\\u12", "\\", "\n", "\x01", '"', "é", "😀", " ", "}", "x" * 300]),
    st.text(max_size=3))


@settings(max_examples=600, deadline=None)
@given(st.lists(_STRING_PIECES, max_size=24).map("".join), st.sampled_from([4, 64, 4096]))
@example('"' + "\\n" * 5_000 + '", 1', 4096)  # past the first windows: read in wider ones
@example('"' + "é\\t" * 3_000 + '"}' + "\x01" * 20, 4096)
def test_strings_end_where_the_stdlib_scanner_ends_them(text: str, width: int) -> None:
    """decode.string_end, where it tells, is scanstring's end (lenient: raw control
    characters, lone surrogates); whatever the window it starts from."""
    text = text if text.startswith('"') else '"' + text
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decode, "_WINDOW", width)
        found = decode.string_end("ab" + text, 2)
    try:
        expected: int | None = scanstring(text, 1, False)[1] + 2
    except ValueError:
        expected = None
    assert found is None or found == expected


def test_a_megabyte_string_with_many_escapes_is_ended_by_orjson():
    text = '{"a": ' + orjson.dumps('say "hi"\n' * 100_000).decode() + ",}"
    assert decode.string_end(text, 6) == len(text) - 2 == scanstring(text, 7, False)[1]


# --- long pythonic literals -----------------------------------------------------------------

LONG = "x" * 1500


@pytest.mark.parametrize("text", [
    f'[read(path="{LONG}\\n\\"q\\" \\\\ \\t \\u00e9")]',
    f'[read(path="{LONG} \\ud83d\\ude80 \\ud83d")]',
    f'[read(path="{LONG}\\/")]',  # `\/`: Python keeps the backslash, JSON does not
    f'[read(path="{LONG}\\x41 \\N{{BULLET}} \\U0001F680")]',
    f"[read(path='{LONG}\\'\"')]",
    f'[read(path=r"{LONG}\\q")]', f'[read(path=b"{LONG}")]', f'[read(path=f"{LONG}")]',
    f'[read(path="""{LONG}""")]', f'[read(path="{LONG}" "tail")]',
    f'[read(path={{"{LONG}": ["{LONG}", 1]}})]', f'[read(path="{LONG}".upper())]',
    f'["{LONG}"(path=1)]', f'[read(path="{LONG}", _tc_literal_0_=1)]',
    f'[read(path=_tc_literal_0_, x="{LONG}")]', f'[read(path="{LONG}")]  # it\'s "done"',
    f'[read(path="{LONG}\n")]', f'[read(path="{LONG}\x00")]', f'[read(path="{LONG}\\\n")]',
    f'[read(path="{LONG}"), get_weather(city="{LONG}é", days=2)]',
    f"[read(path='{LONG}'), read(path=\"{LONG}\\\"\")]",
])
def test_long_literals_read_as_ast_reads_them(text, monkeypatch):
    fast = outcome(text)
    monkeypatch.setattr(pythonic, "_LONG_LITERAL", 1 << 30)  # ast reads every literal
    assert fast == outcome(text)


def test_a_megabyte_pythonic_literal_is_read():
    body = "line \"one\"\n\ttwo \\ ✓\n" * 40_000
    text = f"[read(path={orjson.dumps(body).decode()})]"
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [("read", {"path": body})]


# --- every repair at once (str.replace, the lenient decoder) --------------------------------

ONCE_PIECES = [*PIECES, '"\\q"', '"\\\\"', '"\\u12"', '"C:\\U"', "\t", '"a\tb"', '"True"',
                        '",]"', "\r", '"\\r"']


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(ONCE_PIECES), min_size=1, max_size=14).map("".join))
# found by the property: a comma made trailing by a replacement is not one the regex drops
@example("{,,}")
@example("[,,]")
@example('{"a":1,,}')
def test_repairs_at_once_equal_the_repairs_in_turn(text):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repair_module, "_repaired_at_errors", lambda text, error: None)
        at_once = repr(_fast_loads(text))
        patch.setattr(repair_module, "_repaired_at_once", lambda text: None)
        assert at_once == repr(_fast_loads(text))


# --- Python literals read as JSON ---------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
_PY_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | _TEXT
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12)


@pytest.mark.parametrize("text", ["{'a': 1,,}", "{'a': [1,,]}", "{'a': 'x',,}", "{'a': True,,}",
                                  "{'a': 1, ,}"])
def test_a_python_literal_with_two_commas_is_refused_as_python_refuses_it(text):
    # the literal at once dropped both commas (the first made trailing by the second's marker)
    with pytest.raises(NotJson):
        loads_repaired(text)
    with pytest.MonkeyPatch.context() as patch:  # string by string, as the fast path does
        patch.setattr(python_literal, "_single_quoted_at_once", lambda source: _MISSING)
        with pytest.raises(NotJson):
            loads_repaired(text)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_TEXT, _PY_VALUES, min_size=1, max_size=4))
def test_python_literals_read_as_python_reads_them(value):
    text = repr(value)  # Python's own spelling: quotes, escapes, True/None, big integers
    # Python style (`{'…`); a text opening with a double-quoted key is JSON to the engine,
    # its `\x1f` an escape JSON does not define (a literal backslash), not Python's.
    assume(text.startswith("{'"))
    expected = json.loads(json.dumps(value))
    read, _ = loads_repaired(text)
    assert json.loads(orjson.dumps(read)) == expected  # as a call carries it
    with pytest.MonkeyPatch.context() as patch:  # string by string, as the fast path does
        patch.setattr(python_literal, "_single_quoted_at_once", lambda source: _MISSING)
        assert json.loads(orjson.dumps(loads_repaired(text)[0])) == expected


# --- the span scanner and the decoders agree with a plain bracket count --------------------

SPAN_PIECES = ["{", "}", "[", "]", '"', "'", "\\", "a", "x" * 300, "1,", ":", " ", "\n",
               '"s"', "'q'", '\\"', "\\'", '"' + "y" * 300 + '"', "\\q", "True", ",]",
               '{"a": [1, {"b": "c"}]}', "[1],", "None"]


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["{", "[", "{'", "['", "[{'"]),
       st.lists(st.sampled_from(SPAN_PIECES), max_size=30).map("".join))
def test_value_ends_where_its_brackets_balance(opening, rest):
    text = opening + rest
    doc = Document(text)
    python = json_spans._PYTHON_STYLE.match(text) is not None
    end = doc.json_end(0)
    assert doc.budget_exhausted or end == plain_end(text, "\"'" if python else '"')


# --- the content without the frames -----------------------------------------------------------


def _without_as_before(text, spans, joined=()):
    """engine._without as it was, every piece cut and then stripped (the reference)."""
    if not spans:
        return text
    merged = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces = []
    pos = 0
    for start, end in merged:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    glued = [any(start <= a and b <= end for a, b in joined) for start, end in merged]
    out = pieces[0] if glued[:1] == [True] else pieces[0].rstrip()
    for i, piece in enumerate(pieces[1:]):
        last = i + 1 == len(merged)
        if glued[i]:
            if not last and glued[i + 1] and not piece.strip():
                continue
            out += piece if last or glued[i + 1] else piece.rstrip()
            continue
        piece = piece.lstrip() if last or glued[i + 1] else piece.strip()
        if piece:
            out = f"{out.rstrip()}\n{piece}" if out.strip() else piece
    return out if out.strip() else ""


@st.composite
def _text_and_spans(draw):
    text = draw(st.lists(st.sampled_from(["a", "b c", " ", "\n", "\t", "\u3000", "\x85", "x" * 70,
                                          " " * 70]), max_size=20).map("".join))
    bound = st.integers(min_value=0, max_value=len(text))
    spans = [tuple(sorted(pair)) for pair in draw(st.lists(st.tuples(bound, bound), max_size=4))]
    joined = draw(st.lists(st.sampled_from(spans), max_size=len(spans))) if spans else []
    return text, spans, joined


@settings(max_examples=1000, deadline=None)
@given(_text_and_spans())
def test_the_content_without_frames_is_as_before(case):
    text, spans, joined = case
    assert engine._without(text, spans, joined) == _without_as_before(text, spans, joined)
