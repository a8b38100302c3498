"""The log line as written: JSON made printable in one scan where it can be (the same text as
`printable` makes of it), and a request's line written straight to the proxy's own handler
(the same bytes the logging module's way writes)."""

from __future__ import annotations

import io
import logging

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.telemetry.request_log import (
    LOGGER_NAME,
    RequestLog,
    _printable_json,
    make_logger,
    printable,
)

TEXTS = st.text(st.characters(codec="utf-8") | st.sampled_from(
    ["\x7f", "\x85", "\u2028", "\u202e", "\x1b", "\n", "é", "~"]))


@settings(max_examples=400, deadline=None)
@given(st.recursive(TEXTS | st.integers(-2**63, 2**63 - 1) | st.booleans() | st.none(),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(TEXTS, inner, max_size=4), max_leaves=12))
def test_json_is_made_printable_as_printable_makes_it(value) -> None:
    data = orjson.dumps(value)
    assert _printable_json(data) == printable(data.decode())


def _log() -> RequestLog:
    log = RequestLog("req-1", "POST", "/v1/chat/completions", started=0.0)
    log.front, log.mode, log.model, log.status = "chat", "buffered", "qw\u2028en\x7f", 200
    return log


def test_a_line_written_straight_is_the_line_the_logging_module_writes(monkeypatch) -> None:
    monkeypatch.setattr("time.time", lambda: 1700000000.0)
    monkeypatch.setattr("time.monotonic", lambda: 1.0)
    logger = make_logger("info")
    handler = logger.handlers[0]
    for fmt in ("json", "logfmt"):
        straight, through = io.StringIO(), io.StringIO()
        old = handler.setStream(straight)
        try:
            _log().emit(logger, fmt)
            handler.setStream(through)
            handler.addFilter(lambda _record: True)  # a filter: the logging module's way
            try:
                _log().emit(logger, fmt)
            finally:
                handler.filters.clear()
        finally:
            handler.setStream(old)
        assert straight.getvalue() == through.getvalue()
        assert straight.getvalue().count("\n") == 1
    assert logging.getLogger(LOGGER_NAME) is logger
