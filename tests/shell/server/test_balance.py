"""The accept-balancing decision, counts in and accept-or-defer out: a busier worker leaves a
new connection to a less busy one for a moment, never longer, and the rows of workers that
are gone, stopping or stuck count for nothing."""

from __future__ import annotations

from proxy.shell.server.balance import STALE_MS, Row, accepts_now, others_accepting

NOW = 1_000_000  # ms


def test_a_worker_alone_accepts_at_once() -> None:
    assert accepts_now(0, [])
    assert accepts_now(4000, [])


def test_a_worker_busier_than_the_least_busy_defers() -> None:
    assert not accepts_now(1, [0])
    assert not accepts_now(5, [3, 7])


def test_a_worker_as_busy_as_the_least_busy_or_less_accepts() -> None:
    assert accepts_now(3, [3])
    assert accepts_now(2, [3, 9])
    assert accepts_now(0, [0, 0, 0])


def test_a_connection_that_waited_its_patience_is_taken_by_the_busier() -> None:
    assert accepts_now(5, [0], overdue=True)


def test_the_others_are_the_live_rows_but_its_own() -> None:
    rows = [Row(pid=10, connections=4, stamp_ms=NOW), Row(pid=11, connections=2, stamp_ms=NOW),
            Row(pid=12, connections=3, stamp_ms=NOW - 500)]
    assert others_accepting(rows, 0, NOW) == [2, 3]
    assert others_accepting(rows, 1, NOW) == [4, 3]


def test_a_free_or_left_row_counts_for_nothing() -> None:
    rows = [Row(pid=10, connections=4, stamp_ms=NOW), Row(pid=0, connections=0, stamp_ms=NOW)]
    assert others_accepting(rows, 0, NOW) == []
    assert accepts_now(4, others_accepting(rows, 0, NOW))


def test_a_dead_or_stuck_worker_s_stale_count_never_holds_the_others_back() -> None:
    stale = Row(pid=11, connections=0, stamp_ms=NOW - STALE_MS - 1)
    rows = [Row(pid=10, connections=6, stamp_ms=NOW), stale]
    assert others_accepting(rows, 0, NOW) == []
    assert accepts_now(6, others_accepting(rows, 0, NOW))


def test_a_row_refreshed_within_the_stale_time_still_counts() -> None:
    rows = [Row(pid=10, connections=6, stamp_ms=NOW),
            Row(pid=11, connections=0, stamp_ms=NOW - STALE_MS)]
    assert others_accepting(rows, 0, NOW) == [0]
    assert not accepts_now(6, others_accepting(rows, 0, NOW))
