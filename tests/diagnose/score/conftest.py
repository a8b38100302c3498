"""Fixtures of the score's tests: the score run in this process on a fake the root conftest's
`serve` started (its JSON report)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proxy.diagnose.score import main as score_main
from tests.fakes.base import FakeServer


@pytest.fixture
def scored(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """`scored(fake, *flags, settings={...})`: the JSON report of a score run against the
    fake, the proxy run with `settings` (a config file of them)."""
    def run(fake: FakeServer, *flags: str, settings: dict[str, Any] | None = None
            ) -> dict[str, Any]:
        config = tmp_path / "config.json"
        config.write_text(json.dumps(settings or {}))
        capsys.readouterr()
        status = score_main(["--upstream", fake.url, "--config", str(config), "--json",
                             *flags])
        out = capsys.readouterr()
        assert status == 0, out.err
        return json.loads(out.out)
    return run
