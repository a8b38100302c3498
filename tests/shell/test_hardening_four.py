"""What the fourth adversarial probe of the production server found (issue 38), as
regressions against `python app.py` (gunicorn, gevent workers, a real run directory):
half-open request heads, a full run directory, captures read across keys, an open and costly
status.json, a run directory someone else made, and the page's minor leaks."""

from __future__ import annotations

import socket

import pytest
import requests

from tests.serving import served

pytestmark = pytest.mark.integration


def test_half_open_request_heads_do_not_hold_the_server(fake):
    """Connections that send part of a request line and stop are closed once a head's own
    time is over (not the keep-alive's 75 s), so they cannot keep everyone else out."""
    settings = {"GUNICORN_WORKER_CONNECTIONS": "40", "GUNICORN_HEAD_TIMEOUT": "2"}
    with served(fake.url, settings) as server:
        stalled: list[socket.socket] = []
        try:
            for _ in range(120):  # three times what the worker holds at once
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                sock.sendall(b"GET /proxy/hea")  # 14 bytes of a request line, then nothing
                stalled.append(sock)
            for sock in stalled:
                sock.settimeout(30)  # a bound well below the keep-alive's 75 s
                assert sock.recv(100) == b""  # closed, without a word
            health = requests.get(server.url + "/proxy/health", timeout=30)
            assert health.status_code == 200
        finally:
            for sock in stalled:
                sock.close()
