"""`/proxy/status` as `python app.py` serves it (gunicorn, gevent workers, a real run
directory): a capture is served to the key that made it only, the status needs a key and is
built at most once a second, wrong keys leave no history on the page, and malformed rings of
other workers are skipped (the fourth adversarial probe of the production server, issue
38)."""

from __future__ import annotations

import itertools
import time
import zlib

import openai
import orjson
import pytest
import requests

from proxy.shell.recorder.rings import RING_HEADER, SLOT_BYTES, SLOT_HEAD, SLOTS_AT
from proxy.telemetry.status import TurnRecord
from tests.conftest import TOOLS
from tests.serving import Served, answer_hermes_call, served

pytestmark = pytest.mark.integration

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
