"""What the fourth adversarial probe of the production server found (issue 38), as
regressions against `python app.py` (gunicorn, gevent workers, a real run directory):
half-open request heads, a full run directory, captures read across keys, an open and costly
status.json, a run directory someone else made, and the page's minor leaks."""

from __future__ import annotations

import errno
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import openai
import orjson
import pytest
import requests

from proxy.shell.web.recorder import RING_HEADER, SLOT_BYTES, SLOT_HEAD, SLOTS_AT
from proxy.telemetry.status import TurnRecord
from tests.conftest import TOOLS
from tests.serving import (
    ROOT,
    Served,
    answer_hermes_call,
    free_port,
    served,
    tool_turn,
    wait_for,
)

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


@pytest.fixture
def small_tmpfs(tmp_path) -> Iterator[Path]:
    """A real tmpfs of 16 MiB (as /tmp often is), mounted for the test and unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "small"
    point.mkdir(mode=0o700)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs",
                              str(point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs was refused here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _fill(folder: Path) -> None:
    """Write a file in `folder` until its file system has not one block left."""
    with open(folder / "filler", "wb", buffering=0) as filler:
        chunk = 1 << 20
        while chunk:
            try:
                filler.write(b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2


def _workers(server: Served) -> list[int]:
    pid = server.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sorted(int(child) for child in children)


def test_a_full_run_directory_keeps_every_worker_serving(fake, small_tmpfs):
    """Rings and Prometheus files are mapped: on a full file system a first touch of an
    unallocated page would kill the worker (SIGBUS). Every worker keeps serving, and one
    started on the full disk boots and serves, its figures in memory."""
    answer_hermes_call(fake)
    run = small_tmpfs / "run"
    settings = {"PROMETHEUS_MULTIPROC_DIR": str(run), "TOOLCALL_PROXY_LOG_BODIES": "true"}
    with served(fake.url, settings, workers=2) as server:
        tool_turn(server.url)
        before = _workers(server)
        _fill(small_tmpfs)
        os.kill(before[0], signal.SIGKILL)  # its replacement boots on the full disk
        wait_for(lambda: len(set(_workers(server)) - set(before)) == 1, 30)
        for _ in range(60):  # each a new slot of the ring: pages never touched before
            tool_turn(server.url)
        assert requests.get(server.url + "/proxy/status.json", timeout=10).status_code == 200
        assert requests.get(server.url + "/proxy/metrics", timeout=10).status_code == 200
        assert _workers(server) == sorted({*before[1:], *_workers(server)})  # none died
    assert "kept in memory" in server.log
    assert "SIGBUS" not in server.log


def _keyed(server: Served, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=20)


def _status(server: Served, key: str, turns: int = 1) -> dict:
    """status.json as `key` sees it, once it holds `turns` turns (built once a second)."""
    for _ in range(300):
        doc = requests.get(server.url + "/proxy/status.json", auth=("", key), timeout=10).json()
        if doc["held"]["turns"] >= turns:
            return doc
        time.sleep(0.05)
    raise AssertionError(f"status.json did not reach {turns} turns")


KEYS = {"TOOLCALL_PROXY_API_KEYS": "sk-alice,sk-bob"}


def test_a_capture_is_listed_and_served_to_the_key_that_made_it_only(fake):
    answer_hermes_call(fake)
    with served(fake.url, {**KEYS, "TOOLCALL_PROXY_LOG_BODIES": "true"}, workers=2) as server:
        _keyed(server, "sk-alice").chat.completions.create(
            model="q", tools=TOOLS, messages=[{"role": "user", "content": "alice's secret"}])
        [seen_by_bob] = _status(server, "sk-bob")["turns"]
        assert "capture" not in seen_by_bob
        [turn] = _status(server, "sk-alice")["turns"]
        url = server.url + "/proxy/" + turn["capture"]
        refused = requests.get(url, auth=("", "sk-bob"), timeout=10)
        assert refused.status_code == 404
        assert refused.json()["error"]["code"] == "capture_not_found"
        assert "alice's secret" not in refused.text
        mine = requests.get(url, auth=("", "sk-alice"), timeout=10)
        assert mine.status_code == 200
        assert "alice's secret" in mine.text


def test_status_needs_a_key_and_is_built_at_most_once_a_second(fake):
    with served(fake.url, KEYS) as server:
        for path in ("/proxy/status", "/proxy/status.json"):
            refused = requests.get(server.url + path, timeout=10)
            assert refused.status_code == 401
            assert refused.headers["WWW-Authenticate"].startswith("Basic")
        built = sorted({requests.get(server.url + "/proxy/status.json", auth=("", "sk-bob"),
                                     timeout=10).json()["generated"] for _ in range(40)})
        # 40 asked: each build served until the next, which comes a second later at the
        # earliest (read from the builds' own times, not the test's clock)
        assert all(later - earlier >= 0.999 for earlier, later in itertools.pairwise(built))


def test_wrong_keys_keep_no_history_on_the_page(fake):
    answer_hermes_call(fake)
    with served(fake.url, KEYS) as server:
        _keyed(server, "sk-alice").chat.completions.create(
            model="q", tools=TOOLS, messages=[{"role": "user", "content": "?"}])
        for _ in range(30):
            with pytest.raises(openai.AuthenticationError):
                _keyed(server, "sk-mallory").chat.completions.create(
                    model="q", messages=[{"role": "user", "content": "?"}])
        time.sleep(1.1)  # (the next build, after every refusal was logged)
        doc = _status(server, "sk-alice")
        assert doc["held"]["turns"] == 1
        assert doc["turns"][0]["status"] == 200


def _ring_holding(records: list[bytes], slot_bytes: int = SLOT_BYTES,
                  cut: int | None = None) -> bytes:
    """A ring file's bytes (the recorder's layout) with `records` as its slots' payloads."""
    ring = bytearray(SLOTS_AT + len(records) * SLOT_BYTES)
    RING_HEADER.pack_into(ring, 0, b"TCPSTAT1", len(records), slot_bytes, len(records))
    for i, payload in enumerate(records):
        at = SLOTS_AT + i * SLOT_BYTES
        SLOT_HEAD.pack_into(ring, at, i + 1, len(payload), zlib.crc32(payload))
        ring[at + SLOT_HEAD.size:at + SLOT_HEAD.size + len(payload)] = payload
    return bytes(ring[:cut])


def test_malformed_rings_of_others_are_skipped_and_the_page_still_answers(fake, tmp_path):
    answer_hermes_call(fake)
    good = TurnRecord(1.8e9, "good", "chat", "buffered", "q", False, 200, "u", 200, 1.0,
                      2.0).encode()
    wrong_type = orjson.dumps([1.8e9, "bad", "chat", "buffered", "q", False, "200", "u", 200,
                               1.0, 2.0])  # a valid CRC over a record of the wrong shape
    run = tmp_path / "run"
    with served(fake.url, {**KEYS, "PROMETHEUS_MULTIPROC_DIR": str(run)}) as server:
        _keyed(server, "sk-alice").chat.completions.create(
            model="q", tools=TOOLS, messages=[{"role": "user", "content": "?"}])
        _status(server, "sk-alice")  # (its own ring is written)
        status = run / "status"
        (status / "turns-1.ring").write_bytes(_ring_holding([good], slot_bytes=0))
        (status / "turns-2.ring").write_bytes(_ring_holding([good, good], cut=SLOTS_AT + 700))
        (status / "turns-3.ring").write_bytes(_ring_holding([wrong_type, good]))
        (status / "turns-4.ring").write_bytes(b"TCPSTAT1")
        time.sleep(1.1)  # (the next build reads them)
        answer = requests.get(server.url + "/proxy/status.json", auth=("", "sk-alice"),
                              timeout=10)
        assert answer.status_code == 200
        ids = sorted(turn["request_id"] for turn in answer.json()["turns"])
        assert len(ids) == 2  # the proxy's own turn, and the one whole one of the others
        assert "good" in ids


def test_a_run_directory_another_user_made_is_refused_at_start(fake, os_users, tmp_path):
    attacker, _ = os_users
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    planted = shared / "status"
    planted.mkdir()
    victim_file = tmp_path / "precious"
    victim_file.write_text("the proxy user's own file")
    (planted / "turns-1.ring").symlink_to(victim_file)
    for path in (shared, planted):
        os.chown(path, attacker.pw_uid, attacker.pw_gid)
    for run_dir, why in ((shared, "is owned by another user"),
                         (tmp_path, "is writable by its group or by others")):
        if run_dir == tmp_path:
            run_dir.chmod(0o777)
        env = {**os.environ, "TOOLCALL_PROXY_UPSTREAM": fake.url,
               "TOOLCALL_PROXY_PORT": str(free_port()), "PROMETHEUS_MULTIPROC_DIR": str(run_dir)}
        started = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, timeout=60,
                                 capture_output=True, text=True)
        assert started.returncode == 2, started.stderr
        assert started.stderr.startswith(
            f"toolcall-proxy: PROMETHEUS_MULTIPROC_DIR {run_dir} {why}")
        assert len(started.stderr.splitlines()) == 1
    assert victim_file.read_text() == "the proxy user's own file"
    assert (planted / "turns-1.ring").is_symlink()  # nothing there was touched
