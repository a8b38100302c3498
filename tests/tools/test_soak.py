"""`make soak` in miniature, the fake upstream's fault knobs, and what the soak found.

The soak itself runs for seconds here (10 clients, half the requests faulted) through the real
gunicorn deployment and must end with no unexpected outcome and no lost turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from bench import load
from bench.fake_upstream import (
    GARBAGE_BODY,
    HTML_BODY,
    FakeConfig,
    completion_body,
    serve,
    stream_body,
)
from bench.stack import Stack

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# The fake's fault knobs
# ---------------------------------------------------------------------------------------------
def test_fault_knob_parses_and_ignores_unknown_values():
    assert FakeConfig().merged("fault=cut,status=502").fault == "cut"
    assert FakeConfig(fault="cut").merged("fault=none").fault == ""
    assert FakeConfig().merged("fault=explode").fault == ""


def test_stream_body_is_what_the_fake_streams():
    body = stream_body(FakeConfig(size=300, chunks=3, kind="text"), "m", usage=True)
    events = load.sse_events(body)
    assert events[-1] == "[DONE]"
    assert events[-2]["usage"]
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-2])


def _ask(model: str, stream: bool = False, timeout: float = 5.0) -> load.Result:
    async def run() -> load.Result:
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve("127.0.0.1", 0, FakeConfig(delay_ms=0), ready=ready))
        port = await ready
        try:
            body = orjson.dumps({"model": model, "messages": [], "stream": stream})
            return await load.simple(f"http://127.0.0.1:{port}/v1/chat/completions", "POST",
                                     body, timeout=timeout)
        finally:
            server.cancel()

    return asyncio.run(run())


def test_fake_faults_answer_as_documented():
    assert _ask("m@fault=garbage").body == GARBAGE_BODY
    html = _ask("m@fault=html,status=502")
    assert (html.status, html.body) == (502, HTML_BODY)
    empty = _ask("m@fault=empty")
    assert (empty.status, empty.body, empty.error) == (200, b"", None)
    dropped = _ask("m@fault=drop")
    assert dropped.status == 0
    assert dropped.error
    assert "closed" in dropped.error
    cut = _ask("m@fault=cut,size=2k")
    full = completion_body(FakeConfig(size=2048), "m@fault=cut,size=2k")
    assert cut.status == 200
    assert "closed" in (cut.error or "")
    assert full.startswith(cut.body or b"x")
    assert len(cut.body or b"") < len(full)
    cut_stream = _ask("m@fault=cut,chunks=10", stream=True)
    assert cut_stream.sse
    assert not cut_stream.done
    assert "closed" in (cut_stream.error or "")
    silent = _ask("m@fault=silent", timeout=0.5)
    assert (silent.status, silent.error) == (0, "timeout")


# ---------------------------------------------------------------------------------------------
# Found by the soak: a passthrough JSON body cut short under gunicorn
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gunicorn_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    config = tmp_path_factory.mktemp("soak") / "config.json"
    config.write_text(json.dumps({"read_timeout_seconds": 1.0,
                                  "buffered_timeout_seconds": 1.5,
                                  "log_level": "warning"}))
    stack = Stack(argparse.Namespace(conf="deploy/gunicorn.conf.py", app="app:app",
                                     worker_class="", workers=1, threads=0,
                                     worker_connections=0, keep_logs=False))
    mp = pytest.MonkeyPatch()
    mp.setenv("TOOLCALL_PROXY_CONFIG", str(config))
    try:
        stack.start_fake()
        stack.start_proxy()
        yield stack
    finally:
        stack.stop()
        mp.undo()


@pytest.mark.parametrize("fault", ["cut", "stall"])
def test_passthrough_json_cut_short_closes_the_connection(gunicorn_stack, fault):
    """The status line and Content-Length went out before upstream failed: gunicorn kept the
    connection alive and the client waited (75 s keep-alive) for bytes that never came. The
    proxy must close it, so the client sees a short body at once."""
    model = f"m@fault={fault},size=4k,kind=text"
    body = orjson.dumps({"model": model, "messages": []})
    started = time.monotonic()
    result = asyncio.run(load.simple(gunicorn_stack.proxy_url + "/v1/chat/completions",
                                     "POST", body, timeout=10))
    elapsed = time.monotonic() - started
    full = completion_body(FakeConfig(size=4096, kind="text"), model)
    assert result.status == 200
    assert "closed" in (result.error or ""), result.error
    assert full.startswith(result.body or b"x")
    assert len(result.body or b"") < len(full)
    assert elapsed < 5
    after = asyncio.run(load.simple(gunicorn_stack.proxy_url + "/proxy/health"))
    assert after.status == 200


# ---------------------------------------------------------------------------------------------
# The soak, for a few seconds
# ---------------------------------------------------------------------------------------------
def test_short_soak_passes():
    run = subprocess.run(
        [sys.executable, "-m", "tools.soak", "--duration", "4", "--clients", "10",
         "--fault-rate", "0.5", "--upstream-timeout", "1.5", "--think-ms", "20-200",
         "--log-level", "warning", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=50)
    assert run.stdout, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert report["categories"]["unexpected"] == 0, report["by_kind"]["unexpected"]
    assert report["categories"]["lost"] == 0, report["by_kind"]["lost"]
    assert report["categories"]["ok"] > 0
    assert report["categories"]["expected"] > 0
    assert report["after"]["checks"]
    assert set(report["after"]["checks"].values()) == {"ok"}
    assert run.returncode == 0, report["failures"]
