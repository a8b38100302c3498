"""The proxy's /proxy/metrics read as Prometheus text, for the tests that count."""

from __future__ import annotations

import re
import time

import requests


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def settled_metrics(proxy) -> str:
    """/proxy/metrics once every request so far has been counted (closed by the server)."""
    deadline = time.monotonic() + 5
    while True:
        response = requests.get(proxy.url + "/proxy/metrics", timeout=5)
        assert response.status_code == 200
        in_flight = metric(response.text, "toolcall_proxy_in_flight_requests")
        if in_flight == 0 or time.monotonic() > deadline:
            return response.text
        time.sleep(0.02)
