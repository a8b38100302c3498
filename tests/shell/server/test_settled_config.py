"""A worker's gunicorn settings, read once: the same values as gunicorn's own `Config`, a
setting it does not have refused as gunicorn refuses it, and each read of the settings
object made once, however often the worker asks."""

from __future__ import annotations

from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.workers.sync import SyncWorker

from proxy.shell.server.serve import SettledConfig, _worker_class


class CountedReads:
    """A gunicorn Config that counts the reads of each setting."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.reads: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        self.reads[name] = self.reads.get(name, 0) + 1
        return getattr(self.config, name)


def test_a_settled_config_gives_what_gunicorn_config_gives():
    config = Config()
    config.set("keepalive", 75)
    settled = SettledConfig(config)
    assert settled.keepalive == 75
    assert settled.limit_request_line == config.limit_request_line
    assert settled.is_ssl == config.is_ssl
    assert settled.forwarded_allow_networks() == config.forwarded_allow_networks()
    assert settled.pre_request is config.pre_request


def test_each_setting_is_read_once_however_often_it_is_asked():
    counted = CountedReads(Config())
    settled = SettledConfig(counted)
    for _ in range(5):
        assert settled.limit_request_fields == 100
        assert settled.keepalive == 2
    assert counted.reads == {"limit_request_fields": 1, "keepalive": 1}


def test_a_setting_gunicorn_does_not_have_is_refused():
    with pytest.raises(AttributeError, match="No configuration setting for: no_such_setting"):
        _ = SettledConfig(Config()).no_such_setting


def test_every_worker_class_settles_its_config_as_it_starts(monkeypatch):
    started: list[Any] = []
    worker_class = _worker_class("sync")
    monkeypatch.setattr(SyncWorker, "init_process",
                        lambda self: started.append(self.cfg))
    worker = worker_class.__new__(worker_class)
    worker.cfg = Config()
    worker.init_process()
    assert isinstance(started[0], SettledConfig)
    assert started[0].keepalive == 2
