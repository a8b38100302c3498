"""Large inputs of the shapes a review found slow or refused: their results, never their time
(the cost of each shape is shown by `python -m bench.extraction`)."""

from __future__ import annotations

import gc

import orjson
import pytest

from proxy.toolcalls import extract

TOOLS = {
    "f": {"type": "object", "properties": {"rows": {"type": "array"}}},
    "write": {"type": "object", "properties": {"path": {"type": "string"},
                                               "text": {"type": "string"}}},
}


def arguments(found) -> list[tuple[str, object]]:
    return [(call.name, orjson.loads(call.arguments)) for call in found.calls]


# --- whitespace tails (bare JSON walks lines from the end) -------------------------------------

def test_content_ending_in_200k_newlines_stays_text():
    text = "Sure, here it is." + "\n" * 200_000
    found = extract(text, TOOLS)
    assert (found.content, found.calls, found.left_as_text) == (text, [], [])


def test_call_line_above_200k_blank_lines_is_read():
    text = 'Calling it:\n{"name": "f", "arguments": {"rows": []}}' + " \n" * 100_000
    found = extract(text, TOOLS)
    assert arguments(found) == [("f", {"rows": []})]
    assert found.content == "Calling it:"


def test_call_lines_separated_by_blank_runs_are_all_read():
    line = '{"name": "f", "arguments": {"rows": [1]}}'
    text = "Two calls:\n" + line + "\n" * 50_000 + line + "\n\n"
    assert arguments(extract(text, TOOLS)) == [("f", {"rows": [1]})] * 2


# --- large payloads that need a repair (found by the decoder on a patched copy) --------------

ROWS = [{"id": i, "ok": True, "tags": ["a", "b"], "meta": {"x": None}} for i in range(3000)]


def _rows(row: str) -> str:
    return ", ".join(row % i for i in range(3000))


@pytest.mark.parametrize(("payload", "repair"), [
    ('{"rows": [' + _rows('{"id": %d, "ok": true, "tags": ["a", "b"], "meta": {"x": null}}')
     + ",]}", "trailing_comma"),
    ('{"rows": [' + _rows('{"id": %d, "ok": True, "tags": ["a", "b"], "meta": {"x": None}}')
     + "]}", "python_literals"),
    ('{"re": "\\d+", "rows": ['
     + _rows('{"id": %d, "ok": true, "tags": ["a", "b"], "meta": {"x": null}}') + "]}",
     "invalid_escape"),
    ("{'rows': [" + _rows("{'id': %d, 'ok': True, 'tags': ['a', 'b'], 'meta': {'x': None}}")
     + "]}", "python_dict_literal"),
])
def test_a_payload_of_3000_rows_needing_a_repair_is_read(payload, repair):
    quote = "'" if payload.startswith("{'") else '"'
    text = (f"<tool_call>{{{quote}name{quote}: {quote}f{quote}, {quote}arguments{quote}: "
            f"{payload}}}</tool_call>")
    found = extract(text, TOOLS)
    assert [x.reason for x in found.left_as_text] == []
    [(name, args)] = arguments(found)
    assert (name, args["rows"]) == ("f", ROWS)
    assert repair in found.calls[0].repairs


def test_a_large_payload_is_read_with_no_collection_walking_its_rows():
    """What the decode of a long text builds is dropped before extract returns, with the
    collector paused (bulk_decode.collector_paused): no collection starts, and the young
    generation's count is as extract found it, but for its result."""
    payload = '{"rows": [' + _rows('{"id": %d, "ok": True, "tags": ["a"], "meta": {}}') + "]}"
    text = f'<tool_call>{{"name": "f", "arguments": {payload}}}</tool_call>'
    starts: list[int] = []

    def started(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            starts.append(info["generation"])

    extract(text, TOOLS)  # caches warmed
    gc.collect()
    gc.callbacks.append(started)
    try:
        before = gc.get_count()[0]
        found = extract(text, TOOLS)
        after = gc.get_count()[0]
    finally:
        gc.callbacks.remove(started)
    assert len(arguments(found)[0][1]["rows"]) == 3000  # (decoded again by the test)
    assert starts == []
    assert after - before < 1_000  # not the 9000 containers of the rows
    assert gc.isenabled()


def test_unbalanced_rows_stay_text():
    text = '<tool_call>{"name": "f", "arguments": {"rows": [' + "[1], " * 50_000
    found = extract(text, TOOLS)
    assert (found.calls, found.content) == ([], text)
    assert "incomplete_frame" in [x.reason for x in found.left_as_text]


# --- single-quoted payloads: their strings are strings to the span scanner -------------------

CODE = 'def f(x):\n\tif x > 1:\n\t\treturn {"a": [x, "b\'c"]}  # ]} \'\n\treturn None\n'


@pytest.mark.parametrize(("payload", "expected"), [
    ("{'s': 'say \"hi'}", {"s": 'say "hi'}),
    ("{'s': 'a]'}", {"s": "a]"}),
    ("{'s': 'a}', 't': '{['}", {"s": "a}", "t": "{["}),
    ("{'s': 'it\\'s [x'}", {"s": "it's [x"}),
    ("{'path': 'a.py', 'text': " + repr(CODE * 4_000) + "}",
     {"path": "a.py", "text": CODE * 4_000}),
])
def test_single_quoted_payloads_are_found_and_read(payload, expected):
    text = "<tool_call>{'name': 'write', 'arguments': " + payload + "}</tool_call>"
    found = extract(text, TOOLS)
    assert arguments(found) == [("write", expected)]
    assert found.content == ""


# --- megabyte shapes the review timed: their results --------------------------------------

def test_a_megabyte_of_python_names_in_a_frame_is_read():
    text = ('<tool_call>{"name": "f", "arguments": {"rows": [' + "True, " * 200_000
            + "None]}}</tool_call>")
    assert arguments(extract(text, TOOLS)) == [("f", {"rows": [True] * 200_000 + [None]})]


def test_a_megabyte_string_with_raw_tabs_and_newlines_is_read():
    body = "x\ty\n" * 250_000
    text = ('<tool_call>{"name": "write", "arguments": {"path": "a", "text": "' + body
            + '"}}</tool_call>')
    found = extract(text, TOOLS)
    assert arguments(found) == [("write", {"path": "a", "text": body})]
    assert found.calls[0].repairs == ("raw_control_chars_in_string",)


def test_a_megabyte_of_invalid_escapes_is_read_as_backslashes():
    text = ('<tool_call>{"name": "write", "arguments": {"path": "a", "text": "'
            + "\\q" * 300_000 + '"}}</tool_call>')
    found = extract(text, TOOLS)
    assert arguments(found) == [("write", {"path": "a", "text": "\\q" * 300_000})]
    assert found.calls[0].repairs == ("invalid_escape",)


def test_a_large_single_quoted_list_of_numbers_is_read():
    text = "<tool_call>{'name': 'f', 'arguments': {'rows': [" + "1, " * 125_000 + "2]}}</tool_call>"
    assert arguments(extract(text, TOOLS)) == [("f", {"rows": [1] * 125_000 + [2]})]


def test_a_large_single_quoted_frame_with_python_syntax_stays_text():
    text = "<tool_call>{'name': 'f', 'arguments': {'rows': [" + "(1, " * 60_000 + "]}}</tool_call>"
    found = extract(text, TOOLS)
    assert (found.calls, found.content) == ([], text)


def test_a_flood_of_repairs_is_not_decoded_as_a_payload():
    # a repair every five characters: no payload rows, a flood; it stays text, found or not
    text = '<tool_call>{"name": "f", "arguments": {"rows": [' + "[1,]," * 200_000 + "]}}"
    found = extract(text, TOOLS)
    assert (found.calls, found.content) == ([], text)


def test_a_large_payload_with_raw_newlines_and_a_repair_is_read():
    rows = [{"id": i, "text": f"line {i}\nnext"} for i in range(6000)]  # about 200 KB
    body = ", ".join(f'{{"id": {i}, "text": "line {i}\nnext"}}' for i in range(6000))
    text = '<tool_call>{"name": "f", "arguments": {"rows": [' + body + ",]}}</tool_call>"
    found = extract(text, TOOLS)
    assert arguments(found) == [("f", {"rows": rows})]
    assert found.calls[0].repairs == ("trailing_comma", "raw_control_chars_in_string")


@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_windows_path_in_a_long_payload_keeps_its_backslashes_on_every_scan_path(quote):
    """Issue 37, item 5: past the decoders' windows the scan finds the payload's end on a
    patched copy (scan/decode.py, scan/repaired.py); the value is still read as written."""
    q = quote
    rows = ", ".join(f"{{{q}id{q}: {i}, {q}ok{q}: true}}" for i in range(3000))
    path = "C:\\Users\\ana\\new\\notes.txt"
    text = (f"<tool_call>{{{q}name{q}: {q}f{q}, {q}arguments{q}: {{{q}path{q}: {q}{path}{q}, "
            f"{q}rows{q}: [{rows}]}}}}</tool_call>")
    [(name, args)] = arguments(extract(text, TOOLS))
    assert (name, args["path"], len(args["rows"])) == ("f", path, 3000)
