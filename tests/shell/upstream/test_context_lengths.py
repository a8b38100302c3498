"""`ContextLengths`: a client's window above the upstream's is said once per model the
upstream lists, and what it keeps is bounded by those models, whatever windows and names the
clients send (issue 42's minor: each distinct `num_ctx` wrote a line and grew a set)."""

from __future__ import annotations

import dataclasses

from proxy.base.config import Config
from proxy.fronts import ModelCard
from proxy.shell.upstream.catalog import ContextLengths
from proxy.turn.plan import plan_turn

CARDS = (ModelCard("qwen3", 32768), ModelCard("gemma3", 8192))


def _plan(model: str, window: int | None):
    plan = plan_turn({"model": model, "messages": [{"role": "user", "content": "hi"}]},
                     Config(), client_stream=False, include_usage=False)
    return dataclasses.replace(plan, context_asked=window)


def test_a_window_above_the_upstreams_is_said_once_per_model():
    lengths = ContextLengths()
    said = [lengths.above(_plan(model, window), lambda: CARDS)
            for model, window in [("qwen3", 65536), ("qwen3", 65536), ("qwen3", 131072),
                                  ("qwen3", 8192), ("gemma3", 16384), ("gemma3", 32768)]]
    assert said == [(65536, 32768), None, None, None, (16384, 8192), None]


def test_a_window_within_the_upstreams_or_none_is_never_said():
    lengths = ContextLengths()
    assert lengths.above(_plan("qwen3", 32768), lambda: CARDS) is None
    assert lengths.above(_plan("qwen3", None), lambda: CARDS) is None


def test_windows_and_names_clients_make_up_grow_nothing():
    lengths = ContextLengths()
    for n in range(5000):
        lengths.above(_plan(f"made-up-{n}", 40000 + n), lambda: CARDS)
        lengths.above(_plan("qwen3", 40000 + n), lambda: CARDS)
    assert len(lengths._said) == 1  # the set the issue found unbounded
