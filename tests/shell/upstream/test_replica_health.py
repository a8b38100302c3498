"""A replica's passive health in one process (`proxy.shell.upstream.replicas.Replicas`), on a
clock the test moves: marked down, passed over, probed once its time is over (one probe at a
time), back when the probe answers 200, down again when it does not."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from proxy.shell.config_load import build_config
from proxy.shell.upstream.choice import preference
from proxy.shell.upstream.client import Upstream
from proxy.shell.upstream.replicas import Placement, Replicas
from proxy.telemetry.metrics import Metrics
from proxy.telemetry.request_log import RequestLog
from tests.fake_vllm import Answer, FakeVLLM, vllm_error
from tests.serving import wait_for

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fakes() -> Iterator[list[FakeVLLM]]:
    servers = [FakeVLLM(), FakeVLLM()]
    yield servers
    for server in servers:
        server.close()


def setup(fakes: list[FakeVLLM]):
    urls = [fake.url for fake in fakes]
    config = build_config({"upstream": urls, "upstream_down_seconds": 10})
    clock = Clock()
    replicas = Replicas({url: Upstream(url) for url in urls}, Metrics(), clock)
    key = next(k for k in (f"prefix:{i}" for i in range(100))
               if preference(k, urls)[0] == urls[0])  # a conversation at home on fakes[0]
    return replicas, config, clock, key


def up(replicas: Replicas, url: str) -> bool:
    return next(r["up"] for r in replicas.reports() if r["url"] == url)


def probes(fake: FakeVLLM) -> list[str]:
    return [r.path for r in fake.received]


def test_down_passed_over_probed_once_then_back(fakes):
    replicas, config, clock, key = setup(fakes)
    home, other = fakes[0].url, fakes[1].url
    assert replicas.choose(config, key) == home
    replicas.failed(home, config, "HTTP 503", mark_down=True)
    assert not up(replicas, home)
    clock.now += 9.9
    assert [replicas.choose(config, key) for _ in range(3)] == [other] * 3
    assert probes(fakes[0]) == []  # not before its time
    release = threading.Event()
    fakes[0].health = lambda r: Answer(body=b"") if release.wait(10) else Answer(status=500)
    clock.now += 0.1
    assert [replicas.choose(config, key) for _ in range(5)] == [other] * 5  # probing
    wait_for(lambda: probes(fakes[0]) == ["/health"])
    release.set()
    wait_for(lambda: up(replicas, home))
    assert probes(fakes[0]) == ["/health"]  # one probe, however many looks
    assert replicas.choose(config, key) == home


def test_a_failed_probe_keeps_it_down_for_another_while(fakes):
    replicas, config, clock, key = setup(fakes)
    home = fakes[0].url
    fakes[0].health = lambda r: vllm_error(503, "loading", "ServiceUnavailableError")
    replicas.failed(home, config, "HTTP 503", mark_down=True)
    clock.now += 10
    replicas.choose(config, key)
    wait_for(lambda: next(r["last_error"] for r in replicas.reports()
                                 if r["url"] == home).startswith("probe:"))
    assert probes(fakes[0]) == ["/health"]  # it says no: its models are not asked
    assert not up(replicas, home)
    replicas.choose(config, key)
    time.sleep(0.1)
    assert len(probes(fakes[0])) == 1  # the next probe waits its 10 s
    clock.now += 10
    replicas.choose(config, key)
    wait_for(lambda: len(probes(fakes[0])) == 2)


def test_a_server_without_health_is_asked_for_its_models(fakes):
    replicas, config, clock, key = setup(fakes)
    home = fakes[0].url
    fakes[0].health = lambda r: Answer(status=404, body={"detail": "Not Found"})  # no /health
    replicas.failed(home, config, "HTTP 503", mark_down=True)
    clock.now += 10
    replicas.choose(config, key)
    wait_for(lambda: up(replicas, home))
    assert probes(fakes[0]) == ["/health", "/v1/models"]


def test_the_only_upstream_is_never_marked_down(fakes):
    url = fakes[0].url
    config = build_config({"upstream": url})
    replicas = Replicas({url: Upstream(url)}, Metrics(), Clock())
    replicas.failed(url, config, "HTTP 503", mark_down=True)
    report = replicas.reports()[0]
    assert report["up"] is True
    assert report["last_error"] == "HTTP 503"
    assert replicas.choose(config, "prefix:x") == url
    assert probes(fakes[0]) == []


def test_a_burst_of_turns_is_counted_as_each_is_placed_within_the_bound(fakes):
    """40 turns of one conversation chosen before any has started its call: each is counted
    in flight when its replica is chosen, so the home replica takes its bound, ⌈(1 + ε) × the
    average⌉ = 25, and the rest go to the other (35 of 40 went home when counted at start)."""
    replicas, config, _, key = setup(fakes)
    home = fakes[0].url
    placements = [Placement(replicas, config, key,
                            RequestLog(f"r{i}", "POST", "/v1/chat/completions"))
                  for i in range(40)]
    placed = Counter(placement.url for placement in placements)
    assert placed == {home: 25, fakes[1].url: 15}
    assert sum(report["in_flight"] for report in replicas.reports()) == 40
    for placement in placements:  # each call then runs once, and ends: none counted twice
        placement.run(lambda upstream: SimpleNamespace(status=200),
                      worth_another=lambda _: False)
    assert [report["in_flight"] for report in replicas.reports()] == [0, 0]
