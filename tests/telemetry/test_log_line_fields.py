"""A logfmt line writes each field as `logfmt_value` writes it, whatever its kind: plain and
quoted strings, the empty string, numbers, booleans, lists and objects; empty fields (None,
an empty list) left out."""

from __future__ import annotations

from proxy.telemetry.request_log import logfmt, logfmt_value

RECORD = {
    "plain": "chat", "spaced": "a b", "quote": 'say "hi"', "empty": "", "escape": "\x1b[31m",
    "line": "one\u2028two", "int": 200, "float": 12.5, "zero": 0, "true": True, "false": False,
    "none": None, "nothing": [], "list": ["a", "b c"], "numbers": [1, 2],
    "object": {"k": "v"}, "unicode": "café",
}


def test_each_field_is_written_as_logfmt_value_writes_it():
    expected = " ".join(f"{key}={logfmt_value(value)}" for key, value in RECORD.items()
                        if value is not None and value != [])
    assert logfmt(RECORD) == expected


def test_empty_fields_are_left_out_and_the_rest_keep_their_order():
    line = logfmt({"a": None, "b": 1, "c": [], "d": "x"})
    assert line == "b=1 d=x"


def test_a_string_that_needs_quotes_is_quoted_and_escaped():
    assert logfmt({"path": "/a b", "x": "=", "e": ""}) == 'path="/a b" x="=" e=""'
    assert "\n" not in logfmt({"forged": "ok\nstatus=200"})
