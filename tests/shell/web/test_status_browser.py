"""`/proxy/status` as a person sees it: the real server (gunicorn, two gevent workers) before
the fake vLLM, a run of turns, then the page in headless Chromium (Debian's, driven by
playwright), with every request the page makes held to loopback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest
import requests

from proxy.base.config import Config
from proxy.diagnose.replay import parse_exchanges, replay_exchange
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, FakeVLLM, Received, vllm_completion, vllm_error
from tests.serving import ROOT, free_port, stop, wait_healthy

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}

HERMES = '<tool_call>{"name": "read", "arguments": {"path": "a",}}</tool_call>'
QWEN_XML = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "</function>\n</tool_call>")
UNKNOWN = '<tool_call>{"name": "launch_rockets", "arguments": {}}</tool_call>'


def _browser_or_skip() -> Any:
    """playwright's sync API, once Chromium is known to be there. Skipped (with the reason)
    only off CI: under CI a missing browser is a failure (`make test` installs it)."""
    missing = None
    if not os.path.exists(CHROMIUM):
        missing = f"{CHROMIUM} is not installed (Debian's chromium package; `make test` " \
                  "installs it with apt-get)"
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        missing = missing or "the playwright package is not installed (requirements-dev.txt)"
    if missing is None:
        return sync_playwright, expect
    if os.environ.get("CI"):
        pytest.fail(missing)
    pytest.skip(missing)


def _answer(received: Received) -> Answer:
    """The fake model's answer, by what the user asked."""
    asked = received.json["messages"][-1]["content"]
    if "upstream error" in asked:
        return vllm_error(500, "CUDA out of memory", "InternalServerError")
    text = {"hermes": HERMES, "qwen": QWEN_XML, "unknown": UNKNOWN}.get(asked, "Plain words.")
    return Answer(body=vllm_completion(text))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """`python app.py` (gunicorn, two gevent workers) before the fake vLLM; its URL. The run
    directory the workers share is the test's (`tmp_path/run`)."""
    fake = FakeVLLM()
    fake.answer(_answer)
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOOLCALL_PROXY_", "GUNICORN_", "PROMETHEUS_"))}
    # Calls to tools the request does not offer stay text (`unknown_tool_calls: text`), so
    # that the run has a frame left as text, and its reason, to show.
    env.update(GUNICORN_WORKERS="2", TOOLCALL_PROXY_LOG_LEVEL="warning",
               PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "run"), TOOLCALL_PROXY_LOG_BODIES="true",
               TOOLCALL_PROXY_UNKNOWN_TOOL_CALLS="text")
    process = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port), "--upstream", fake.url],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, seconds=60)
        yield url
    finally:
        stop(process)
        fake.close()


def _run_turns(url: str) -> None:
    """A Hermes call, a Qwen XML call, a frame left as text, an upstream error, passthrough."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=30)
    for asked in ("hermes", "qwen", "unknown"):
        client.chat.completions.create(model="qwen-test", tools=TOOLS,
                                       messages=[{"role": "user", "content": asked}])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="qwen-test", tools=TOOLS,
                                       messages=[{"role": "user", "content": "upstream error"}])
    client.chat.completions.create(model="qwen-test",  # no tools: relayed as it is
                                   messages=[{"role": "user", "content": "hello"}])


def _status(url: str, turns: int) -> dict[str, Any]:
    """status.json once it holds `turns` turns (each is kept as its response closes)."""
    deadline = time.monotonic() + 30
    while True:
        document = requests.get(url + "/proxy/status.json", timeout=10).json()
        if document["held"]["turns"] >= turns or time.monotonic() > deadline:
            return document
        time.sleep(0.05)


# Two gunicorn workers and a browser starting on a loaded 2-core machine: more than the
# suite's 60 s hang guard may pass; the work and the checks are the same.
@pytest.mark.timeout(300)
def test_the_status_page_shows_what_the_proxy_did_in_a_real_browser(server, tmp_path):
    sync_playwright, expect = _browser_or_skip()
    _run_turns(server)
    document = _status(server, 5)
    model = next(m for m in document["models"] if m["model"] == "qwen-test")
    assert (model["turns"], model["passthrough"], model["tool_turns"]) == (5, 1, 4)
    assert model["formats"] == {"hermes": 1, "qwen_xml": 1}
    rings = list((tmp_path / "run" / "status").glob("*.ring"))  # one per worker that served
    assert rings
    assert all(stat.S_IMODE(ring.stat().st_mode) == 0o600 for ring in rings)
    for _ in range(6):  # whichever worker answers (a new connection each), the same numbers
        again = requests.get(server + "/proxy/status.json", timeout=10).json()
        assert again["held"]["turns"] == document["held"]["turns"]

    left_loopback: list[str] = []
    console_errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})

            def only_loopback(route: Any) -> None:
                host = urlsplit(route.request.url).hostname or ""
                if route.request.url.startswith(("data:", "about:")) or host in LOOPBACK:
                    route.continue_()
                else:
                    left_loopback.append(route.request.url)
                    route.abort()

            page.route("**/*", only_loopback)
            page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
            page.on("pageerror", lambda e: console_errors.append(str(e)))
            page.goto(server + "/proxy/status")
            row = page.locator('#models tr[data-model="qwen-test"]')
            row.wait_for()
            _check_what_a_person_sees(page, row)
            page.evaluate("window.sameDocument = true")
            _run_turns(server)  # the page redraws itself: the same document, new counts
            expect(row.locator("td").nth(1)).to_have_text("10", timeout=30000)
            assert page.evaluate("window.sameDocument") is True
            page.screenshot(path=str(tmp_path / "status.png"), full_page=True)
            _download_a_capture(page, tmp_path)
        finally:
            browser.close()
    assert not console_errors
    assert not left_loopback
    assert (tmp_path / "status.png").stat().st_size > 10_000


def _download_a_capture(page: Any, tmp_path: Path) -> None:
    """With log_bodies on, a turn's link downloads its capture, which `replay` reads."""
    qwen = page.locator("#turns tr", has_text="qwen_xml").first
    with page.expect_download() as download:
        qwen.locator("a", has_text="capture").click()
    saved = tmp_path / "capture.json"
    download.value.save_as(saved)
    [exchange] = parse_exchanges(saved.read_bytes(), str(saved))
    replayed = replay_exchange(exchange, Config())
    assert replayed.diagnostics["formats"] == ["qwen_xml"]


def _check_what_a_person_sees(page: Any, row: Any) -> None:
    """Formats and counts, the reason, the error, the upstream up, the chart drawn."""
    cells = row.locator("td")
    assert cells.nth(1).inner_text() == "5"  # turns
    assert cells.nth(3).inner_text() == "1"  # passthrough
    assert cells.nth(4).inner_text() == "2"  # calls
    formats = cells.nth(5).inner_text()
    assert "hermes" in formats
    assert "qwen_xml" in formats
    assert "hermes:trailing_comma" in cells.nth(6).inner_text()
    assert "unknown_tool" in cells.nth(7).inner_text()
    assert cells.nth(8).inner_text().strip() == ""  # schema invalid: none
    assert cells.nth(9).inner_text().strip() == "upstream_http_500"
    upstream = page.locator("#upstreams tr").first
    assert upstream.locator("td.state").inner_text().strip() == "up"
    assert "upstream_http_500" in upstream.inner_text()  # its last error
    assert page.locator("#chart-svg rect.turns").count() >= 1
    assert page.locator("#chart-svg rect.failures").count() >= 1
    assert page.locator("#turns tr").count() >= 5
    assert "CUDA" not in page.content()  # upstream's message is not shown, only its code



@pytest.mark.timeout(300)
def test_a_browser_given_the_key_as_its_login_sees_the_keyed_page(fake, start_proxy):
    """protect_proxy_endpoints: the browser's login (the key as its password) opens the page,
    and the page's own requests for status.json carry it too."""
    sync_playwright, expect = _browser_or_skip()
    from playwright.sync_api import Error as PlaywrightError

    proxy = start_proxy(api_keys=["sk-test"], protect_proxy_endpoints=True)
    fake.answer(Answer(body=vllm_completion(HERMES)))
    proxy.client().chat.completions.create(model="keyed", tools=TOOLS,
                                           messages=[{"role": "user", "content": "?"}])
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            with pytest.raises(PlaywrightError, match="AUTH"):  # no login: no page
                browser.new_page().goto(proxy.url + "/proxy/status")
            context = browser.new_context(http_credentials={"username": "ops",
                                                            "password": "sk-test"})
            page = context.new_page()
            assert page.goto(proxy.url + "/proxy/status").status == 200
            expect(page.locator('#models tr[data-model="keyed"] td').nth(5)).to_have_text(
                "hermes", timeout=30000)
            assert not page.locator("#banner").is_visible()
        finally:
            browser.close()
