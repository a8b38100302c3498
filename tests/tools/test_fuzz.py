"""`make fuzz`'s prose that names an offered tool (issue 41, item 6): it makes no call, and the
fuzzer's check says so when one is found."""

from __future__ import annotations

import random

from proxy.toolcalls import extract
from tools.fuzz import TOOLS, Report, check, prose_naming_a_tool


def test_prose_that_names_an_offered_tool_gives_no_call():
    rng = random.Random(41)
    texts = [prose_naming_a_tool(rng) for _ in range(3000)]
    assert all(any(name in text for name in TOOLS) for text in texts)
    assert len(set(texts)) > 1000
    for text in texts:
        found = extract(text, TOOLS)
        assert found.calls == [], text
        assert found.content == text


def test_the_check_reports_a_call_found_in_such_prose():
    report = Report()
    check('exec(command="ls")', report, no_call=True)
    assert report.failures == {"call_in_prose": 1}
    check("I would call exec with a command.", report, no_call=True)
    assert report.failures == {"call_in_prose": 1}
