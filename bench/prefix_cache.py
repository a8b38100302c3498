"""`make bench`, the prefix cache across an assistant's turns (issue 43, item 6): how much of
the prompt two requests share, from where the upstream's prefix cache can reuse what it
computed, without and with `stable_prefix`.

Each scenario is a pair of requests as the client's source renders them (tests/home_assistant.py:
Home Assistant 2025.4's and 2026.11's system prompts with 120 exposed entities; Claude Code's
system prompt with its token reminder): two turns a minute apart from one satellite, and two
satellites in other areas. Each request goes through the same request rewrites as a turn
(`proxy.turn.compat.rewrite_request`, with `stable_prefix` off, then on), is rendered by the
fake vLLM's chat template (tests/fakes/template.py, Qwen's ChatML), and cut into tokens the
way this bench counts them (words, marks and runs of spaces: close to a BPE tokenizer's count
for English and YAML). A row gives the tokens the pair shares as a prefix, of the prompt's
total: 'direct' without the setting, 'proxy' with it. Nothing is timed: prefill saved is
proportional to the shared tokens.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from bench.harness import Bench
from proxy.base.config import Config
from proxy.turn.compat import rewrite_request
from tests.fakes.template import ChatTemplate
from tests.home_assistant import TURN_ON, prompt_2025, prompt_2026, shared

_TOKEN = re.compile(r"\w+|[^\w\s]|\s+")
_CLAUDE_CODE = ("You are Claude Code, Anthropic's official CLI for Claude.\n"
                "<system-reminder>\nToken usage: {used}/200000; {left} remaining\n"
                "</system-reminder>\n"
                + "".join(f"- Rule {i}: read a file before editing it; keep diffs small.\n"
                          for i in range(300)))


def _request(system: str, user: str) -> dict[str, Any]:
    return {"model": "qwen", "tools": [TURN_ON], "messages": [
        {"role": "system", "content": system}, {"role": "user", "content": user}]}


PAIRS: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("Home Assistant 2025.4, one satellite, a minute apart",
     _request(prompt_2025("12:00:00", "2026-11-20", "Kitchen"), "turn on the kitchen light"),
     _request(prompt_2025("12:01:00", "2026-11-20", "Kitchen"), "turn it off")),
    ("Home Assistant 2025.4, two satellites",
     _request(prompt_2025("12:00:00", "2026-11-20", "Kitchen"), "turn on the light"),
     _request(prompt_2025("12:00:00", "2026-11-20", "Bedroom"), "turn on the light")),
    ("Home Assistant 2026.11, two satellites",
     _request(prompt_2026("Kitchen"), "turn on the light"),
     _request(prompt_2026("Bedroom"), "turn on the light")),
    ("Claude Code, token reminder in the system prompt",
     _request(_CLAUDE_CODE.format(used=1200, left=198800), "run the tests"),
     _request(_CLAUDE_CODE.format(used=5400, left=194600), "run the tests")),
)


def tokens(text: str) -> list[str]:
    """`text` cut as this bench counts tokens."""
    return _TOKEN.findall(text)


def shared_tokens(first: dict[str, Any], second: dict[str, Any], stable: bool,
                  ) -> tuple[int, int]:
    """(tokens the two rendered requests share as a prefix, tokens of the first) once each
    went through the request rewrites, `stable_prefix` on or off."""
    template = ChatTemplate()
    rendered = []
    for request in (first, second):
        body = copy.deepcopy(request)
        rewrite_request(body, Config(stable_prefix=stable), upstream_streams=False)
        rendered.append(tokens(template.render(body["messages"], body["tools"])))
    return shared(*rendered), len(rendered[0])


def section(bench: Bench, row: Any) -> None:
    """The prefix-cache rows: shared tokens without (`direct`) and with (`proxy`) the
    setting, and the ratio."""
    bench.section("prefix cache across turns (tokens two requests share as a prefix, of the "
                  "prompt; 'direct': stable_prefix off, 'proxy': on)")
    for label, first, second in PAIRS:
        before, total = shared_tokens(first, second, stable=False)
        after, _ = shared_tokens(first, second, stable=True)
        ratio = after / before if before else float("inf")
        bench.rows.append(row(label, f"{before:,} of {total:,}", f"{after:,} of {total:,}",
                              f"{ratio:.1f}×", ">= 1.0×", "pass" if after >= before else
                              "FAIL"))
