"""The score's suite as data: what each turn asks, what a right answer to it is, and the
page that lists it (docs/score.md)."""

from __future__ import annotations

import re
from typing import Any

from proxy.diagnose.score.checks import CHECKS
from proxy.diagnose.score.fronts import WAYS
from proxy.diagnose.score.suite import SUITE, VERSION
from proxy.diagnose.score.tools import TOOLS
from proxy.toolcalls.validity import check
from tests.diagnose.score.suite_models import arguments
from tests.docs_pages import page, section, table

PLAIN_FIELDS = {"model", "messages", "tools", "tool_choice", "max_tokens", "temperature",
                "stream", "chat_template_kwargs"}


def test_the_suite_holds_at_least_forty_turns_of_every_kind_the_issue_names():
    assert len(SUITE) >= 40
    assert any(len(t.calls) >= 2 and len({c.tool for c in t.calls}) == 1 for t in SUITE)
    assert any(len({c.tool for c in t.calls}) >= 2 for t in SUITE)
    assert sum(1 for t in SUITE if not t.calls) >= 6
    assert any(t.tool_choice == "required" for t in SUITE)
    assert any(isinstance(t.tool_choice, dict) for t in SUITE)
    assert any(t.tool_choice == "none" for t in SUITE)
    assert any(t.thinking and t.calls for t in SUITE)
    assert any(len(t.tools) >= 30 and len(t.calls) == 1 for t in SUITE)
    assert any(m["role"] == "tool" for t in SUITE for m in t.messages)
    assert any(re.search(r"[^\x00-\x7f]", str(dict(c.fixed))) for t in SUITE for c in t.calls)
    assert any("\\" in str(v) and "\n" in str(v) for t in SUITE for c in t.calls
               for v in c.fixed.values())


def test_each_right_answer_calls_a_tool_its_turn_offers_with_arguments_that_fit():
    for turn in SUITE:
        assert set(turn.tools) <= set(TOOLS), turn.id
        for expected in turn.calls:
            assert expected.tool in turn.tools, turn.id
            schema = TOOLS[expected.tool]["function"]["parameters"]
            validity = check(arguments(expected), schema)
            assert validity.problems == (), turn.id
            assert validity.coerced == 0, turn.id


def _leaves(value: Any, schema: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        return [leaf for k, v in value.items() for leaf in _leaves(v, props.get(k, {}))]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v, schema.get("items") or {})]
    return [(value, schema)]


def test_every_fixed_value_is_stated_in_the_turn_itself():
    """A value a right answer must hold is one the conversation gives (an enum value may
    be said in words: `miles` is `mi`); none is guessed."""
    for turn in SUITE:
        said = "\n".join(str(m.get("content") or "") for m in turn.messages)
        for expected in turn.calls:
            schema = TOOLS[expected.tool]["function"]["parameters"]
            for value, where in _leaves(dict(expected.fixed), schema):
                if isinstance(value, bool) or "enum" in where:
                    continue
                shown = f"{value:g}" if isinstance(value, float) else str(value)
                assert shown in said, (turn.id, value)


def test_each_request_is_what_a_plain_client_sends():
    for turn in SUITE:
        for stream in (False, True):
            body = turn.request("m", 256, stream)
            assert set(body) <= PLAIN_FIELDS, turn.id
            assert body["stream"] is stream
            assert body["model"] == "m"
            assert ("tool_choice" in body) == (turn.tool_choice is not None)
            assert ("chat_template_kwargs" in body) == turn.thinking
            assert [t["function"]["name"] for t in body["tools"]] == list(turn.tools)


def test_each_front_says_every_turn_its_api_can():
    for way in WAYS.values():
        for turn in SUITE:
            request = way.request(turn, "m", 256, True)
            if request is None:
                assert way.name == "ollama"
                assert turn.tool_choice is not None
                continue
            assert request["model"] == "m"
            assert request["stream"] is True


SCORE = page("score.md")


def test_the_page_lists_the_suite_s_turns_and_what_a_right_answer_is():
    rows = table(SCORE, "| turn | what it tries | tools | a right answer |")
    assert [row[0].strip("`") for row in rows] == [turn.id for turn in SUITE]
    for row, turn in zip(rows, SUITE, strict=True):
        assert row[1] == turn.about
        assert row[2] == str(len(turn.tools))
        assert re.findall(r"`(\w+)`", row[3]) == [c.tool for c in turn.calls], turn.id
        assert (row[3] == "no call") == (not turn.calls)
    assert f"Version {VERSION}: {len(SUITE)} turns" in section(SCORE, "The suite")


def test_the_page_explains_every_check():
    rows = table(SCORE, "| check | passes when |")
    assert {row[0].strip("`"): row[1] for row in rows} == CHECKS


def test_the_page_names_every_front_the_score_drives():
    flags = {row[0]: row[1] for row in table(SCORE, "| flag | what it does |")}
    named = set(re.findall(r"`(\w+)`", flags["`--fronts [LIST]`"]))
    assert named == set(WAYS) - {"chat"}
