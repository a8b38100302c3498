"""The merged model list (`catalog.model_entries`, what `GET /v1/models` answers across
several upstreams): each model once, by its id; an entry that names no model (no id, or an
id that is not a string) is left out, never a 500 for the whole list."""

from __future__ import annotations

import orjson

from proxy.base.config import Config
from proxy.shell.upstream.catalog import model_entries
from proxy.shell.upstream.client import Upstream
from proxy.shell.upstream.replicas import Replicas
from proxy.telemetry.metrics import Metrics
from proxy.telemetry.request_log import RequestLog
from proxy.turn.core import UpstreamReply

A, B = "http://127.0.0.1:9", "http://127.0.0.1:10"


class _Listing(Upstream):
    """An upstream whose model list is `entries` (no socket is opened)."""

    def __init__(self, url: str, entries: list[object]) -> None:
        super().__init__(url)
        self._body = orjson.dumps({"object": "list", "data": entries})

    def complete_get(self, path, headers, timeouts, max_bytes=None):
        return UpstreamReply(200, {}, self._body)


def _entries(a: list[object], b: list[object]) -> list[dict]:
    upstreams = {A: _Listing(A, a), B: _Listing(B, b)}
    config = Config(upstream=A, models=(("gemma", {"upstream": B}),))
    return model_entries(upstreams, Replicas(dict(upstreams), Metrics()), config,
                         RequestLog("r", "GET", "/v1/models"), "/v1/models", lambda c: {})


def test_each_model_is_listed_once_across_upstreams():
    listed = _entries([{"id": "qwen"}, {"id": "gemma"}], [{"id": "gemma"}, {"id": "phi"}])
    assert [entry["id"] for entry in listed] == ["qwen", "gemma", "phi"]


def test_entries_that_name_no_model_are_left_out_and_the_rest_listed():
    odd = [{"id": ["qwen"]}, {"id": {"name": "qwen"}}, {"object": "model"}, {"id": None},
           {"id": 7}, "qwen"]
    listed = _entries([*odd, {"id": "qwen"}], [*odd, {"id": "phi"}])
    assert [entry["id"] for entry in listed] == ["qwen", "phi"]
