"""deploy/grafana-dashboard.json: every metric it queries is one the proxy exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
_METRIC = re.compile(r"\btoolcall_proxy_[a-z_]+\b")
_SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",),
             "histogram": ("_bucket", "_sum", "_count", "_created")}


def _queries(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def exposed_names(text: str) -> set[str]:
    """Every series name a Prometheus exposition offers, sampled yet or only declared."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            family = name.removesuffix("_total") if kind == "counter" else name
            names.update(family + suffix for suffix in _SUFFIXES.get(kind, ("",)))
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def unknown_metrics(dashboard: dict, exposition: str) -> set[str]:
    """The metric names the dashboard queries that the exposition does not offer."""
    queried = {name for expr in _queries(dashboard) for name in _METRIC.findall(expr)}
    return queried - exposed_names(exposition)


def test_the_dashboard_is_a_grafana_dashboard_with_a_query_per_panel():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"]
    assert dashboard["schemaVersion"] >= 36
    titles = [panel["title"] for panel in dashboard["panels"]]
    for shown in ("Upstreams: up", "Upstreams: in flight", "Upstream latency p50 / p95",
                  "Turns and failures per minute", "Calls recovered by format",
                  "Repairs by kind", "Frames left as text by reason", "Errors by code",
                  "Heartbeats sent"):
        assert shown in titles
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(titles)
    for expr in _queries(dashboard):
        assert _METRIC.search(expr), expr
        assert expr.count("(") == expr.count(")"), expr


@pytest.mark.integration
def test_every_metric_the_dashboard_queries_is_exposed(fake, proxy):
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "a",}}</tool_call>')))
    proxy.client().chat.completions.create(model="q", tools=TOOLS,
                                           messages=[{"role": "user", "content": "?"}])
    exposition = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
    dashboard = json.loads(DASHBOARD.read_text())
    assert unknown_metrics(dashboard, exposition) == set()
    # The check can fail: a name the proxy does not expose is found.
    wrong = {"panels": [{"targets": [{"expr": "rate(toolcall_proxy_repairs_done_total[5m])"}]}]}
    assert unknown_metrics(wrong, exposition) == {"toolcall_proxy_repairs_done_total"}
