"""Large inputs of the shapes a review found slow or refused: their results, never their time
(the cost of each shape is shown by `python -m proxy.toolcalls.bench`)."""

from __future__ import annotations

import orjson

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
