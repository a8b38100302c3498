"""Request heads against `python app.py` (gunicorn, gevent workers): half-open heads are
closed once a head's own time is over, not the keep-alive's; a head read ahead has only a
head's time; idle keep-alive connections give way when the worker is full (the fourth
adversarial probe of the production server, issue 38). `test_server_idle.py` has the waits
without a server."""

from __future__ import annotations

import socket
import time

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


def _answer(sock: socket.socket) -> bytes:
    """One whole response of `/proxy/health` (JSON, with a Content-Length) read off `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_the_head_timeout_is_not_the_keep_alive_and_a_head_read_ahead_counts(fake):
    """A connection idle between requests keeps the keep-alive's time (longer than a head's);
    the start of a next head sent with the previous request has only a head's time."""
    health = b"GET /proxy/health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    with served(fake.url, {"GUNICORN_HEAD_TIMEOUT": "1"}) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(health)
            assert _answer(sock).startswith(b"HTTP/1.1 200")
            time.sleep(2.5)  # idle between requests, past a head's time
            sock.sendall(health)
            assert _answer(sock).startswith(b"HTTP/1.1 200")
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(health + b"GET /proxy/hea")  # the next head begun, then nothing
            assert _answer(sock).startswith(b"HTTP/1.1 200")
            assert sock.recv(100) == b""  # closed in a head's time, not the keep-alive's


def test_idle_keep_alive_connections_give_way_when_the_worker_is_full(fake):
    """Connections that sent one whole request (no key needed: /proxy/health) and then idle
    between requests would each hold a slot for the keep-alive's 75 s, so a client could keep
    everyone else out at the cost of one small request a connection. As nginx does when it
    runs out of connections, the worker closes its idle keep-alive connections once its last
    slot is taken."""
    health = b"GET /proxy/health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    with served(fake.url, {"GUNICORN_WORKER_CONNECTIONS": "10"}) as server:
        idle: list[socket.socket] = []
        try:
            for _ in range(30):  # three times what the worker holds at once
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                idle.append(sock)
                sock.sendall(health)  # a bound well below the keep-alive's 75 s
                assert _answer(sock).startswith(b"HTTP/1.1 200")
            assert requests.get(server.url + "/proxy/health", timeout=30).status_code == 200
        finally:
            for sock in idle:
                sock.close()
