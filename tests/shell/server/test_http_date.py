"""A response's Date value, made once a second: the same as gunicorn's `util.http_date` at
every time, in any order the times come (the value kept from an earlier second never
serves a later one), a time a hair before the next second included (gunicorn's formatting
rounds it into that second)."""

from __future__ import annotations

from types import SimpleNamespace

from gunicorn import util
from gunicorn.http.wsgi import Response
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.shell.server import response
from proxy.shell.server.response import OneSendResponse, http_date

_SECONDS = st.integers(0, 2 ** 34)
# A time within a few microseconds of a whole second, either side, or anywhere in one.
_TIMES = st.one_of(
    st.builds(lambda s, d: max(0.0, s + d), _SECONDS, st.floats(-3e-6, 3e-6)),
    st.builds(lambda s, f: s + f, _SECONDS, st.floats(0, 1, exclude_max=True)),
    st.floats(0, 2 ** 34),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_TIMES, min_size=1, max_size=8))
def test_the_date_gunicorn_formats_for_each_time(times):
    for now in times:
        assert http_date(now) == util.http_date(now)


def test_a_second_s_date_is_made_once(monkeypatch):
    made = []
    formatted = util.http_date
    monkeypatch.setattr(response.util, "http_date",
                        lambda second: made.append(second) or formatted(second))
    monkeypatch.setattr(response, "_DATED", [None, ""])
    for now in (100.0, 100.25, 100.9, 101.0, 101.5, 100.5):
        assert http_date(now) == formatted(now)
    assert made == [100, 101, 100]


def test_a_response_s_default_lines_are_gunicorn_s_with_that_date(monkeypatch):
    monkeypatch.setattr(response.time, "time", lambda: 1_765_000_000.5)
    monkeypatch.setattr(util.time, "time", lambda: 1_765_000_000.5)
    cfg = SimpleNamespace(sendfile=True, is_ssl=False)
    for version, close, headers in (((1, 1), False, []), ((1, 0), True, []),
                                    ((1, 1), False, [("Content-Length", "3")]),
                                    ((1, 1), False, [("Connection", "upgrade"),
                                                     ("Upgrade", "websocket")])):
        lines = []
        for kind in (Response, OneSendResponse):
            req = SimpleNamespace(method="GET", version=version, should_close=lambda c=close: c)
            resp = kind(req, None, cfg)
            resp.start_response("200 OK", list(headers))
            lines.append(resp.default_headers())
        assert lines[0] == lines[1]
