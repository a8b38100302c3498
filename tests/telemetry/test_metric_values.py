"""A gevent worker's metric values, written without prometheus_client's lock: the same bytes
in the worker's file as prometheus_client's own value class writes, for any run of
increments and gauge settings."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import values

from proxy.telemetry.metrics import _one_thread_values

STEPS = st.lists(st.tuples(st.sampled_from(["inc", "set"]), st.sampled_from([0, 1]),
                           st.floats(min_value=0, max_value=1e6, allow_nan=False)),
                 max_size=30)


def _values(directory: Path, value_class: type) -> list:
    """Two values (a counter's, a gauge's) of `value_class`, in a file of `directory`."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    return [value_class(kind, "m", "m_total", ("a",), (label,), "help",
                        multiprocess_mode="mostrecent")
            for kind, label in (("counter", "x"), ("gauge", "y"))]


@settings(max_examples=60, deadline=None)
@given(steps=STEPS)
def test_one_thread_values_write_what_the_locked_ones_write(tmp_path_factory, steps) -> None:
    before = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    mine, theirs = tmp_path_factory.mktemp("mine"), tmp_path_factory.mktemp("theirs")
    try:
        ours = _values(mine, _one_thread_values(values.MultiProcessValue()))
        locked = _values(theirs, values.MultiProcessValue())
        for operation, which, amount in steps:
            for value in (ours[which], locked[which]):
                if operation == "inc":
                    value.inc(amount)
                else:
                    value.set(amount)
        assert [v.get() for v in ours] == [v.get() for v in locked]
        for name in ("counter", "gauge_mostrecent"):
            pid = os.getpid()
            assert (mine / f"{name}_{pid}.db").read_bytes() == \
                (theirs / f"{name}_{pid}.db").read_bytes()
    finally:
        if before is None:
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        else:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = before
