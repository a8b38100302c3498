"""`OneSendResponses.handle_request` is gunicorn 27's gevent worker's over its async worker's,
the response class the one change. It serves only a gunicorn whose two methods are the ones
it was made from (`MADE_FROM`): the installed one is (else this fails: compare ours with its,
carry the change over, then move `MADE_FROM` to it); any other is served by its own."""

from __future__ import annotations

import pytest
from gunicorn.workers.base_async import AsyncWorker

from proxy.shell.server import response
from proxy.shell.server.response import MADE_FROM, can_choose, copied_sources


def test_the_installed_gunicorn_is_the_one_ours_copies() -> None:
    assert copied_sources() == MADE_FROM
    assert can_choose()


def test_another_gunicorn_is_served_by_its_own_methods(monkeypatch: pytest.MonkeyPatch) -> None:
    def mended(self, *args):  # a gunicorn whose method differs from the one copied
        return AsyncWorker.handle_request(self, *args)

    monkeypatch.setattr(AsyncWorker, "handle_request", mended)
    assert not can_choose()


def test_a_gunicorn_without_its_source_is_served_by_its_own_methods(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(_method: object) -> str:
        raise OSError("could not get source code")

    monkeypatch.setattr(response.inspect, "getsource", unreadable)
    assert not can_choose()
