"""bulk_decode.loads: orjson's value, with the collector's state as the caller left it."""

from __future__ import annotations

import gc

import orjson
import pytest

from proxy.base import bulk_decode

LARGE = "[" + ",".join(['{"id": 1, "tags": ["a", {"b": null}]}'] * 4_000) + "]"


@pytest.fixture
def collector():
    """Restore the collector's state whatever a test leaves."""
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("text", ['{"a": [1, 2.5, "x", null, true]}', LARGE])
def test_the_value_is_orjsons(text: str, collector: None) -> None:
    assert len(LARGE) > bulk_decode.PAUSE_FROM
    assert bulk_decode.loads(text) == orjson.loads(text)
    assert bulk_decode.loads(text.encode()) == orjson.loads(text)
    assert gc.isenabled()


def test_the_collector_runs_again_after_a_large_document_fails(collector: None) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        bulk_decode.loads(LARGE[:-1])
    assert gc.isenabled()


def test_the_collector_paused_by_the_operator_stays_paused(collector: None) -> None:
    gc.disable()
    assert bulk_decode.loads(LARGE) == orjson.loads(LARGE)
    assert not gc.isenabled()


def test_no_collection_runs_while_a_large_document_decodes(collector: None) -> None:
    """The decode's own containers start no collection (each would walk the heap); at most
    one runs once the collector is back, at the next allocation."""
    starts: list[int] = []

    def started(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            starts.append(info["generation"])

    small = orjson.dumps([[i] for i in range(2_000)]).decode()  # below PAUSE_FROM
    gc.callbacks.append(started)
    try:
        gc.collect()
        starts.clear()
        orjson.loads(LARGE)
        by_orjson = len(starts)
        starts.clear()
        bulk_decode.loads(LARGE)
        paused = len(starts)
        starts.clear()
        bulk_decode.loads(small)
        unpaused_small = len(starts)
    finally:
        gc.callbacks.remove(started)
    assert by_orjson > 5  # the document is large enough to start collections unpaused
    assert paused <= 1
    assert unpaused_small > 0  # a small one is decoded as orjson does, collector running


def test_a_block_over_a_large_document_runs_with_the_collector_paused(collector: None) -> None:
    with bulk_decode.collector_paused(bulk_decode.PAUSE_FROM):
        assert not gc.isenabled()
    assert gc.isenabled()
    with bulk_decode.collector_paused(bulk_decode.PAUSE_FROM - 1):
        assert gc.isenabled()  # small: the collector runs as usual


def test_a_block_that_fails_starts_the_collector_again(collector: None) -> None:
    with pytest.raises(KeyError), bulk_decode.collector_paused(bulk_decode.PAUSE_FROM):
        raise KeyError("x")
    assert gc.isenabled()


def test_a_block_leaves_the_collector_the_operator_paused_paused(collector: None) -> None:
    gc.disable()
    with bulk_decode.collector_paused(bulk_decode.PAUSE_FROM):
        assert not gc.isenabled()
    assert not gc.isenabled()
