"""`stable_prefix` (proxy/turn/compat.py): the volatile lines of the system prompts Home
Assistant 2025.4 and 2026.11 and Claude Code render moved behind their stable part, word for
word, nothing dropped; two turns a minute apart (and two satellites) then share all of the
prompt up to those lines. What must never move: such words inside a line, in a user's or an
assistant's message, or a reminder block holding anything else."""

from __future__ import annotations

import pytest

from proxy.base.config import Config
from proxy.turn.compat import rewrite_request, stable_prefix, volatile_last
from tests.home_assistant import (
    NO_AREA,
    NO_TIMERS,
    area_line,
    date_time,
    prompt_2025,
    prompt_2026,
    shared,
)

CLAUDE_CODE = ("You are Claude Code, Anthropic's official CLI for Claude.\n"
               "<system-reminder>\nToken usage: {used}/200000; {left} remaining\n"
               "</system-reminder>\n"
               + "".join(f"Instruction {i}: keep the code tidy.\n" for i in range(200)))


def _lines(text: str) -> list[str]:
    return sorted(text.split("\n"))


@pytest.mark.parametrize("text", [
    prompt_2025("12:00:00", "2026-11-20", "Kitchen"),
    prompt_2025("12:00:00", "2026-11-20", None),
    prompt_2026("Kitchen", clock="12:00:00"),
    CLAUDE_CODE.format(used=1200, left=198800),
])
def test_the_same_lines_come_out_none_dropped_none_added(text):
    moved = volatile_last(text)
    assert _lines(moved) == _lines(text)
    assert len(moved) == len(text)
    assert moved.endswith("\n") == text.endswith("\n")


def test_home_assistant_2025s_time_and_area_go_behind_the_exposed_entities():
    text = prompt_2025("12:00:00", "2026-11-20", "Kitchen")
    moved = volatile_last(text)
    assert moved.endswith(date_time("12:00:00", "2026-11-20") + area_line("Kitchen") + "\n"
                          + NO_TIMERS + "\n")
    assert moved.startswith("You are a voice assistant for Home Assistant.\n")
    assert "Static Context" in moved[:moved.index("Current time is")]


def test_two_turns_a_minute_apart_share_the_whole_stable_part():
    first = prompt_2025("12:00:00", "2026-11-20", "Kitchen")
    second = prompt_2025("12:01:00", "2026-11-20", "Kitchen")
    before = shared(first, second)
    after = shared(volatile_last(first), volatile_last(second))
    assert before == len("Current time is 12:0")
    stable = len(first) - len(date_time("12:00:00", "2026-11-20")) - len(area_line(
        "Kitchen")) - len(NO_TIMERS) - 2
    assert after >= stable
    assert after > 50 * before


def test_two_satellites_share_it_too():
    kitchen = volatile_last(prompt_2025("12:00:00", "2026-11-20", "Kitchen"))
    hall = volatile_last(prompt_2025("12:00:00", "2026-11-20", None))
    assert shared(kitchen, hall) > len(kitchen) - 300
    assert NO_AREA in hall


def test_home_assistant_2026s_prompt_is_already_in_that_order_and_stays_so():
    for text in (prompt_2026("Kitchen"), prompt_2026(None), prompt_2026("Hall", clock="9:00")):
        assert volatile_last(text) == text


def test_claude_codes_token_reminder_moves_as_a_block():
    first = CLAUDE_CODE.format(used=1200, left=198800)
    second = CLAUDE_CODE.format(used=5400, left=194600)
    moved = volatile_last(first)
    assert moved.endswith("<system-reminder>\nToken usage: 1200/200000; 198800 remaining\n"
                          "</system-reminder>\n")
    assert shared(volatile_last(first), volatile_last(second)) > len(first) - 80
    assert shared(first, second) < 100


@pytest.mark.parametrize("text", [
    "The log said: Current time is 12:00:00. Today's date is 2026-11-20.\nStatic part.\n",
    "Current time is noon. Today's date is today.\nStatic part.\n",
    "You are in area 51 and nobody may know.\nStatic part.\n",
    "<system-reminder>\nToken usage: 1/2; 1 remaining\nAlso: read the README.\n"
    "</system-reminder>\nStatic part.\n",
    "Token usage: many\nStatic part.\n",
])
def test_look_alikes_stay_where_they_are(text):
    assert volatile_last(text) == text


def test_only_the_system_messages_that_open_the_conversation_are_touched():
    line = date_time("12:00:00", "2026-11-20")
    messages = [{"role": "system", "content": line + "Stable.\n"},
                {"role": "user", "content": line + "What time is it?"},
                {"role": "system", "content": line + "Later.\n"}]
    assert stable_prefix(messages)
    assert messages[0]["content"] == "Stable.\n" + line
    assert messages[1]["content"] == line + "What time is it?"
    assert messages[2]["content"] == line + "Later.\n"
    parts = [{"role": "system", "content": [{"type": "text", "text": line + "Stable."}]}]
    assert stable_prefix(parts)
    assert parts[0]["content"][0]["text"] == "Stable.\n" + line.rstrip("\n")
    assert not stable_prefix([{"role": "system", "content": "Stable.\n" + line}])


def test_the_rewrite_is_opt_in_and_named():
    def body() -> dict:
        return {"messages": [{"role": "system", "content": prompt_2025(
            "12:00:00", "2026-11-20", "Kitchen")}]}
    untouched = body()
    assert "stable_prefix" not in rewrite_request(untouched, Config(), upstream_streams=False)
    assert untouched == body()
    moved = body()
    assert "stable_prefix" in rewrite_request(moved, Config(stable_prefix=True),
                                              upstream_streams=False)
    assert moved["messages"][0]["content"].startswith("You are a voice assistant")
