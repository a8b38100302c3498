"""Fixtures for the fakes' own tests: start a fake, closed after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.base import FakeServer


@pytest.fixture
def serve() -> Iterator[Callable[..., Any]]:
    """`serve(FakeX, **options)`: a started fake, closed after the test."""
    started: list[FakeServer] = []

    def start(kind: Callable[..., FakeServer], **options: Any) -> Any:
        server = kind(**options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
