"""What a worker makes when the app is made, not on its first request: the streamed mode's
hold rule (every configured format's openers compiled, a tenth of a second and more), which
the first streamed turn of each worker would otherwise wait for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proxy.shell.config_load import build_config
from proxy.shell.web.app import create_app
from proxy.turn.holdback import hold_rule


@pytest.fixture
def cold() -> Iterator[None]:
    hold_rule.cache_clear()
    yield
    hold_rule.cache_clear()


@pytest.mark.parametrize("formats", [["auto"], ["hermes", "qwen3_xml"]])
def test_the_streamed_mode_has_its_hold_rule_when_the_app_is_made(cold: None,
                                                                   formats: list[str]) -> None:
    create_app(build_config({"upstream": "http://127.0.0.1:9", "stream_mode": "stream",
                             "formats": formats}))
    made = hold_rule.cache_info()
    hold_rule(tuple(formats))  # what the first streamed turn asks for
    assert (made.currsize, hold_rule.cache_info().hits) == (1, made.hits + 1)


@pytest.mark.parametrize("settings", [{"stream_mode": "buffer"},
                                      {"stream_mode": "stream", "formats": []}])
def test_nothing_is_made_for_a_mode_that_holds_nothing_back(cold: None,
                                                            settings: dict[str, object]) -> None:
    create_app(build_config({"upstream": "http://127.0.0.1:9", **settings}))
    assert hold_rule.cache_info().currsize == 0
