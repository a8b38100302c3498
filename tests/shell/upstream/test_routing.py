"""The replica choice as data → data (`proxy.shell.upstream.choice`): affinity by rendezvous
hashing, bounded load, replicas down, least busy, round robin; and the affinity keys."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.shell.upstream.choice import (
    ReplicaLoad,
    by_affinity,
    capacity,
    choose,
    preference,
    replica_name,
    session_key,
)
from proxy.turn.plan import conversation_key
from tests.conftest import TOOLS

URLS = ["http://gpu1:8000", "http://gpu2:8000", "http://gpu3:8000"]
KEYS = [f"prefix:{i}" for i in range(300)]


def loads(*in_flight: int, down: tuple[int, ...] = ()) -> list[ReplicaLoad]:
    return [ReplicaLoad(url, i not in down, n) for i, (url, n) in
            enumerate(zip(URLS, in_flight, strict=False))]


def conversation(first_user: str, turns: int, system: str = "You are an agent.") -> dict:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": first_user}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "read", "arguments": f'{{"path": "f{i}"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x" * i})
    return {"model": "qwen", "messages": messages, "tools": TOOLS}


def test_a_conversation_keeps_its_key_while_its_history_grows():
    keys = {conversation_key(conversation("fix the bug", turns)) for turns in range(6)}
    assert len(keys) == 1


@pytest.mark.parametrize("change", [
    lambda body: body["messages"][1].update(content="another task"),
    lambda body: body["messages"][0].update(content="another system prompt"),
    lambda body: body.update(tools=TOOLS[:1]),
    lambda body: body.update(model="other"),
])
def test_another_conversation_has_another_key(change):
    body = conversation("fix the bug", 2)
    before = conversation_key(body)
    change(body)
    assert conversation_key(body) != before


def test_no_messages_no_key():
    assert conversation_key({"model": "m", "prompt": "hi"}) is None
    assert conversation_key({"model": "m", "messages": []}) is None


def test_a_session_key_is_the_header_value_hashed():
    assert session_key("ses_1") == session_key("ses_1") != session_key("ses_2")
    assert "ses_1" not in session_key("ses_1")


def test_the_order_is_the_same_in_every_process():
    """No per-process salt (Python's hash() has one): another interpreter, the same order."""
    code = ("from proxy.shell.upstream.choice import preference; "
            f"print([preference(k, {URLS!r}) for k in {KEYS[:20]!r}])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert other == str([preference(key, URLS) for key in KEYS[:20]])


def test_conversations_spread_over_the_replicas():
    firsts = Counter(preference(key, URLS)[0] for key in KEYS)
    assert set(firsts) == set(URLS)
    assert min(firsts.values()) > len(KEYS) / len(URLS) / 2


def test_taking_a_replica_out_moves_only_its_conversations():
    before = {key: preference(key, URLS)[0] for key in KEYS}
    after = {key: preference(key, URLS[:2])[0] for key in KEYS}
    moved = [key for key in KEYS if before[key] != after[key]]
    assert moved
    assert all(before[key] == URLS[2] for key in moved)


def test_credentials_do_not_move_a_replica():
    assert replica_name("http://user:secret@gpu1:8000/") == "http://gpu1:8000"
    with_key = preference("k", ["http://u:p@gpu1:8000", URLS[1]])
    assert [replica_name(url) for url in with_key] == preference("k", URLS[:2])


def test_affinity_follows_the_order_while_there_is_room():
    key = KEYS[0]
    first, _second, _ = preference(key, URLS)
    assert by_affinity(key, loads(0, 0, 0), 0.25) == first
    # 4 + 4 + 4 in flight, the new one makes 13: room is ⌈1.25 × 13 / 3⌉ = 6 each
    assert by_affinity(key, loads(4, 4, 4), 0.25) == first


def test_a_replica_over_its_bound_passes_the_turn_to_the_next():
    key = KEYS[0]
    order = preference(key, URLS)
    heavy = [ReplicaLoad(url, True, 10 if url == order[0] else 1) for url in URLS]
    assert capacity(heavy, 0.25) == 6  # ⌈1.25 × 13 / 3⌉
    assert by_affinity(key, heavy, 0.25) == order[1]
    # a looser bound keeps it home
    assert by_affinity(key, heavy, 2.0) == order[0]


def test_a_replica_down_is_passed_over():
    key = KEYS[0]
    order = preference(key, URLS)
    down = [ReplicaLoad(url, url != order[0], 0) for url in URLS]
    assert by_affinity(key, down, 0.25) == order[1]


def test_every_replica_down_still_gets_the_first_in_order():
    key = KEYS[0]
    down = [ReplicaLoad(url, False, 0) for url in URLS]
    assert by_affinity(key, down, 0.25) == preference(key, URLS)[0]


def test_without_a_key_the_least_busy_up_replica():
    assert choose("affinity", None, loads(3, 1, 2), load_factor=0.25) == URLS[1]
    assert choose("affinity", None, loads(3, 1, 2, down=(1,)), load_factor=0.25) == URLS[2]
    assert choose("least_busy", KEYS[0], loads(3, 1, 2), load_factor=0.25) == URLS[1]


def test_round_robin_takes_the_up_replicas_in_turn():
    picks = [choose("round_robin", KEYS[0], loads(0, 0, 0, down=(1,)), load_factor=0.25,
                    turn=turn) for turn in range(4)]
    assert picks == [URLS[0], URLS[2], URLS[0], URLS[2]]


def test_one_replica_is_always_that_one():
    only = [ReplicaLoad(URLS[0], False, 50)]
    assert choose("affinity", KEYS[0], only, load_factor=0.0) == URLS[0]


@given(st.lists(st.integers(0, 50), min_size=3, max_size=3),
       st.floats(0, 3), st.sampled_from(KEYS))
def test_the_bound_is_kept_whenever_a_replica_has_room(in_flight, factor, key):
    """The chosen replica, counting the new turn, never exceeds ⌈(1+ε) × average⌉ (some
    replica always has room: the least loaded is at most the average)."""
    state = loads(*in_flight)
    chosen = by_affinity(key, state, factor)
    held = next(load.in_flight for load in state if load.url == chosen)
    assert held + 1 <= capacity(state, factor)


def test_the_affinity_key_is_the_first_configured_session_header_sent():
    from proxy.shell.config_load import build_config
    from proxy.shell.upstream.replicas import affinity_key

    config = build_config({"upstream": URLS[:2]})
    both = {"x-claude-code-session-id": "cc", "X-Session-Affinity": "oc"}
    assert affinity_key(config, both, "prefix:1") == session_key("oc")  # the list's order
    assert affinity_key(config, {"session-id": " codex "}, "prefix:1") == session_key("codex")
    assert affinity_key(config, {"X-Session-Affinity": " "}, "prefix:1") == "prefix:1"
    assert affinity_key(config, {}, None) is None
    one = build_config({"upstream": URLS[0]})  # one upstream: nothing to choose, no key
    assert affinity_key(one, both, "prefix:1") is None
