"""What /proxy/status shows: the record of a turn, the document summed from every worker's
records, the bounded recorders, and the endpoints (keys, captures, probes)."""

from __future__ import annotations

import base64
import hashlib
import multiprocessing
import os
import re
import stat
import subprocess
import threading
import time

import flask
import openai
import orjson
import pytest
import requests

from proxy.base.config import Config
from proxy.diagnose.replay import parse_exchanges, replay_exchange
from proxy.shell.recorder.rings import (
    CAPTURES_KEPT,
    MAX_RING_FILES,
    RING_TURNS,
    SLOT_BYTES,
    MemoryRecorder,
    RingFileRecorder,
    make_recorder,
)
from proxy.telemetry.request_log import RequestLog
from proxy.telemetry.status import (
    CHART_MINUTES,
    TURNS_SHOWN,
    MinuteCount,
    StatusInput,
    TurnRecord,
    document,
    percentile,
    turn_record,
)
from proxy.turn.result import Outcome, Repair, TextLeft
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion, vllm_error

NOW = 1_800_000_000.0
UP = "http://gpu:8000"


def _turn(**fields) -> TurnRecord:
    values = dict(ts=NOW, request_id="r", front="chat", mode="buffered", model="qwen",
                  stream=False, status=200, upstream=UP, upstream_status=200,
                  upstream_ms=10.0, total_ms=12.0)
    values.update(fields)
    return TurnRecord(**values)


def _log(**fields) -> RequestLog:
    log = RequestLog("id-1", "POST", "/v1/chat/completions")
    for name, value in fields.items():
        setattr(log, name, value)
    return log


# -- the record ---------------------------------------------------------------------------------


def test_a_record_holds_names_counts_and_timings_never_text():
    outcome = Outcome(tool_calls=2, formats=["hermes"], call_formats=["hermes", "hermes"],
                      repairs=[Repair("hermes", "trailing_comma", "read")],
                      left_as_text=[TextLeft("hermes", "unknown_tool", "rm -rf secret")])
    log = _log(front="chat", mode="buffered", model="qwen", status=200, upstream=UP,
               upstream_status=200, upstream_ms=8.5, outcome=outcome, heartbeats=3,
               bodies={"request": {"messages": [{"content": "secret plan"}]}})
    record = turn_record(log, NOW, 9.94)
    assert record.formats == {"hermes": 2}
    assert record.repairs == {"hermes:trailing_comma": 1}
    assert record.left == {"hermes:unknown_tool": 1}
    assert (record.calls, record.heartbeats, record.total_ms) == (2, 3, 9.9)
    assert not record.failed
    encoded = record.encode()
    assert b"secret" not in encoded  # neither the bodies nor the tool name the model wrote
    assert TurnRecord.decode(encoded) == record


@pytest.mark.parametrize(("fields", "failed", "error"), [
    ({"status": 200}, False, ""),
    ({"status": 400, "error": "invalid_request"}, False, "invalid_request"),
    ({"status": 404}, False, "http_404"),
    ({"status": 200, "error": "client_disconnected"}, False, "client_disconnected"),
    ({"status": 502, "error": "upstream_unreachable"}, True, "upstream_unreachable"),
    ({"status": 500, "upstream_status": 500, "error": "500"}, True, "upstream_http_500"),
    ({"status": 200, "error": "upstream_timeout"}, True, "upstream_timeout"),  # in the stream
])
def test_a_failure_is_the_server_s_or_upstream_s_never_the_client_s(fields, failed, error):
    record = turn_record(_log(**fields), NOW, 1.0)
    assert record.failed is failed
    assert record.error == error


def test_long_client_text_is_cut_and_many_kinds_are_summed():
    outcome = Outcome(left_as_text=[TextLeft(f"f{i}", "unknown_tool", None) for i in range(10)])
    record = turn_record(_log(model="m" * 5000, request_id="i" * 128, outcome=outcome), NOW, 1)
    assert len(record.model) < 100
    assert len(record.request_id) <= 64
    assert len(record.left) == 7
    assert record.left["…"] == 4
    assert len(record.encode()) < SLOT_BYTES


_FIELDS = [1.8e9, "r", "chat", "buffered", "q", False, 200, "u", 200, 1.0, 2.0]


def _changed(at: int, value: object) -> bytes:
    fields = list(_FIELDS)
    fields[at] = value
    return orjson.dumps(fields)


@pytest.mark.parametrize("data", [
    b"", b"{}", b"[1, 2]", b"not json", b'"x"',
    _changed(6, "200"), _changed(6, True), _changed(0, "now"), _changed(5, 1),
    _changed(1, None), orjson.dumps([*_FIELDS, 1, {"hermes": "one"}]),
    orjson.dumps([*_FIELDS, 1, {}, {}, {}, "", "", 0, "", "", "one too many"]),
])
def test_anything_but_a_record_decodes_to_none(data):
    assert TurnRecord.decode(data) is None


@pytest.mark.parametrize(("at", "value"), [
    (6, 2**63 - 1), (8, -1), (9, 2**63 - 1), (10, -2**63), (0, 1e300), (9, -1e300)])
def test_numbers_no_turn_has_decode_to_none(at, value):
    """A ring is read as untrusted: a count or a time no real turn has, under a valid CRC,
    is no record (summed with others it would make a document JSON cannot hold)."""
    assert TurnRecord.decode(_changed(at, value)) is None


def test_counts_beyond_any_real_turn_decode_to_none_and_the_document_still_serialises():
    huge = orjson.dumps([*_FIELDS, 2**62, {"hermes": 2**62}, {}, {}, "", "", 2**62])
    assert TurnRecord.decode(huge) is None
    most = 2**40 - 1
    record = TurnRecord.decode(orjson.dumps(
        [most, "r", "chat", "buffered", "q", False, most, "u", most, most, most, most,
         {"hermes": most}, {}, {}, "", "", most]))
    assert record is not None
    every_ring_full = [record] * (MAX_RING_FILES * RING_TURNS * 4)  # (the most read of one)
    orjson.dumps(document(StatusInput(every_ring_full, [], ["u"]), NOW))


def test_a_record_decodes_to_itself():
    record = _turn(calls=2, formats={"hermes": 2}, capture="7-1", owner="abc")
    assert TurnRecord.decode(record.encode()) == record
    assert TurnRecord.decode(orjson.dumps(_FIELDS)) == TurnRecord(*_FIELDS)


# -- the document -------------------------------------------------------------------------------


def test_per_model_counts_over_every_turn_held():
    turns = [
        _turn(formats={"hermes": 1}, calls=1, repairs={"hermes:trailing_comma": 1}),
        _turn(formats={"qwen_xml": 2}, calls=2, mode="streamed", stream=True, heartbeats=4),
        _turn(left={"hermes:unknown_tool": 1}),
        _turn(mode="passthrough", error="upstream_http_503", status=503, upstream_status=503),
        _turn(model="other", front="messages"),
        _turn(front="", model="", mode="passthrough"),  # relayed (GET /v1/models)
    ]
    doc = document(StatusInput(turns, [], [UP]), NOW)
    qwen, other = doc["models"]
    assert qwen["model"] == "qwen"
    assert (qwen["turns"], qwen["tool_turns"], qwen["buffered"], qwen["streamed"],
            qwen["passthrough"], qwen["client_streams"]) == (4, 3, 2, 1, 1, 1)
    assert qwen["calls"] == 3
    assert qwen["formats"] == {"qwen_xml": 2, "hermes": 1}
    assert qwen["repairs"] == {"hermes:trailing_comma": 1}
    assert qwen["left_as_text"] == {"hermes:unknown_tool": 1}
    assert qwen["errors"] == {"upstream_http_503": 1}
    assert qwen["heartbeats"] == 4
    assert other["turns"] == 1
    assert len(doc["turns"]) == 6
    assert doc["held"]["turns"] == 6


@pytest.mark.parametrize(("probe", "last_failed", "state"), [
    ({"ok": True}, True, "up"),  # the probe, asked now, says more than an older turn
    ({"ok": False}, False, "down"),
    (None, True, "down"),
    (None, False, "up"),
])
def test_an_upstream_is_up_or_down_by_its_probe_else_by_its_last_turn(probe, last_failed, state):
    turns = [_turn(ts=NOW - 5), _turn(status=502 if last_failed else 200,
                                      error="upstream_unreachable" if last_failed else "",
                                      upstream_error="upstream_unreachable" if last_failed
                                      else "")]
    probes = {UP: probe} if probe else {}
    [row] = document(StatusInput(turns, [], [UP], probes=probes), NOW)["upstreams"]
    assert row["state"] == state


def test_an_upstream_row_has_in_flight_latency_and_its_last_error():
    turns = [_turn(upstream_ms=float(ms), ts=NOW - 100 + ms) for ms in range(1, 101)]
    turns.append(_turn(ts=NOW - 50, status=504, upstream_status=0, upstream_ms=-1.0,
                       error="upstream_timeout",
                       upstream_error="upstream_timeout"))
    doc = document(StatusInput(turns, [], [UP, "http://idle:8000"], in_flight={UP: 3}), NOW)
    row, idle = doc["upstreams"]
    assert (row["in_flight"], row["turns"], row["failures"]) == (3, 101, 1)
    assert (row["latency_p50_ms"], row["latency_p95_ms"]) == (50.0, 95.0)
    assert row["last_error"] == {"ts": NOW - 50, "code": "upstream_timeout", "status": 504}
    assert row["state"] == "up"  # the last turn succeeded
    assert idle == {**idle, "state": "unknown", "turns": 0, "last_error": None,
                    "latency_p50_ms": None}


def test_replicas_are_more_rows():
    turns = [_turn(upstream="http://a:8000"), _turn(upstream="http://b:8000", status=502,
                                                    upstream_error="upstream_unreachable")]
    rows = document(StatusInput(turns, [], ["http://a:8000"]), NOW)["upstreams"]
    assert [(r["url"], r["state"]) for r in rows] == [("http://a:8000", "up"),
                                                     ("http://b:8000", "down")]


def test_the_last_turns_newest_first_and_capture_links_only_with_log_bodies():
    turns = [_turn(ts=NOW - i, request_id=str(i), capture=f"1-{i}") for i in range(300)]
    shown = document(StatusInput(turns, [], [UP], captures=True), NOW)["turns"]
    assert len(shown) == TURNS_SHOWN
    assert [t["request_id"] for t in shown[:3]] == ["0", "1", "2"]
    assert shown[0]["capture"] == "status/capture/1-0"
    hidden = document(StatusInput(turns, [], [UP], captures=False), NOW)["turns"]
    assert "capture" not in hidden[0]


def test_turns_and_failures_per_minute_summed_over_workers_for_the_last_hour():
    minute = int(NOW // 60)
    counts = [MinuteCount(minute, 3, 1), MinuteCount(minute, 2, 0),  # two workers, now
              MinuteCount(minute - 59, 7, 0), MinuteCount(minute - 60, 100, 100),  # too old
              MinuteCount(0, 0, 0)]
    chart = document(StatusInput([], counts, []), NOW)["per_minute"]
    assert len(chart) == CHART_MINUTES
    assert chart[-1] == {"minute": minute * 60, "turns": 5, "failures": 1}
    assert chart[0] == {"minute": (minute - 59) * 60, "turns": 7, "failures": 0}
    assert sum(c["turns"] for c in chart) == 12


def test_percentile_is_nearest_rank():
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0


# -- the recorders ------------------------------------------------------------------------------


def test_memory_recorder_is_a_ring():
    recorder = MemoryRecorder(capacity=50, captures=5)
    for i in range(80):
        recorder.record(_turn(request_id=str(i), ts=NOW + i), b"{}" if i % 2 else None)
    turns = recorder.turns()
    assert [t.request_id for t in turns] == [str(i) for i in range(30, 80)]
    kept = [t.capture for t in turns if t.capture and recorder.capture(t.capture, t.owner)]
    assert len(kept) == 5
    assert sum(m.turns for m in recorder.minutes()) == 80


def _record_in_another_process(directory: str, count: int) -> None:
    recorder = RingFileRecorder(directory, capacity=64)
    for i in range(count):
        recorder.record(_turn(request_id=f"child-{i}", ts=NOW, status=500 if i == 0 else 200))


def test_ring_files_give_every_worker_s_turns(tmp_path):
    directory = str(tmp_path / "status")
    child = multiprocessing.get_context("fork").Process(
        target=_record_in_another_process, args=(directory, 3))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    recorder = RingFileRecorder(directory, capacity=64)
    recorder.record(_turn(request_id="parent", ts=NOW))
    ids = sorted(t.request_id for t in recorder.turns())
    assert ids == ["child-0", "child-1", "child-2", "parent"]
    minute = [m for m in recorder.minutes() if m.minute == int(NOW // 60)]
    assert (sum(m.turns for m in minute), sum(m.failures for m in minute)) == (4, 1)
    rings = list((tmp_path / "status").glob("*.ring"))
    assert len(rings) == 2
    assert all(stat.S_IMODE(ring.stat().st_mode) == 0o600 for ring in rings)


def test_a_ring_file_stays_its_size_and_skips_a_torn_slot(tmp_path):
    recorder = RingFileRecorder(str(tmp_path), capacity=16, captures=3)
    for i in range(40):
        recorder.record(_turn(request_id=str(i)), capture=b'{"bodies": {}}')
    [ring] = tmp_path.glob("*.ring")
    size = ring.stat().st_size
    assert sorted(int(t.request_id) for t in recorder.turns()) == list(range(24, 40))
    recorder.record(_turn(request_id="40"))
    assert ring.stat().st_size == size
    data = bytearray(ring.read_bytes())
    at = data.index(b'"40"')
    data[at + 1] = ord("X")  # a slot caught half written: its checksum no longer matches
    ring.write_bytes(bytes(data))
    assert "40" not in {t.request_id for t in recorder.turns()}
    captures = sorted(p.name for p in (tmp_path / "captures").iterdir())
    assert len(captures) == 3
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (tmp_path / "captures").iterdir())
    assert recorder.capture("1-1", "") is None


def test_a_ring_that_is_a_link_or_a_fifo_is_never_followed_nor_waited_on(tmp_path):
    status = tmp_path / "status"
    status.mkdir(mode=0o700)
    precious = tmp_path / "precious"
    precious.write_text("a file of the proxy user's")
    (status / "turns-4242.ring").symlink_to(precious)  # where worker 4242's ring would be
    os.mkfifo(status / "turns-77.ring")
    warned: list[str] = []
    recorder = RingFileRecorder(str(status), capacity=16, worker=lambda: 4242,
                                warn=warned.append)
    recorder.record(_turn(request_id="kept"))
    assert precious.read_text() == "a file of the proxy user's"
    assert "kept in memory" in warned[0]
    read: list[list[TurnRecord]] = []
    reader = threading.Thread(target=lambda: read.append(recorder.turns()), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive()  # the FIFO was not waited on
    assert [t.request_id for t in read[0]] == ["kept"]


def test_captures_of_workers_gone_are_pruned_to_the_newest(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()  # (its pid is free now)
    captures = tmp_path / "captures"
    captures.mkdir(mode=0o700, parents=True)
    for i in range(CAPTURES_KEPT + 50):
        path = captures / f"{dead.pid}-{i}.-.json"
        path.write_bytes(b"{}")
        os.utime(path, (NOW + i, NOW + i))
    live = captures / f"{os.getpid()}-1.-.json"
    live.write_bytes(b"{}")
    RingFileRecorder(str(tmp_path), capacity=16, worker=lambda: 4243).record(_turn())
    left = sorted(int(p.name.split("-")[1].split(".")[0]) for p in captures.iterdir()
                  if p.name.startswith(f"{dead.pid}-"))
    assert left == list(range(50, CAPTURES_KEPT + 50))  # the newest of the workers gone
    assert live.exists()  # a live worker's are its own to prune


def test_the_recorder_is_shared_under_gunicorn_else_in_memory(tmp_path):
    shared = make_recorder({"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    assert isinstance(shared, RingFileRecorder)
    assert shared.directory == tmp_path / "status"
    assert isinstance(make_recorder({}), MemoryRecorder)


# -- the endpoints ------------------------------------------------------------------------------


def _hermes(fake):
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "a",}}</tool_call>')))


def _settled(url: str, turns: int, **kwargs) -> dict:
    """status.json once it holds `turns` turns (it is rebuilt at most once a second)."""
    for _ in range(300):
        doc = requests.get(url + "/proxy/status.json", timeout=5, **kwargs).json()
        if doc["held"]["turns"] >= turns:
            return doc
        time.sleep(0.05)  # (the close that records the turn, the next build)
    raise AssertionError(f"status.json did not reach {turns} turns")


@pytest.mark.integration
def test_status_json_and_the_page(fake, proxy):
    _hermes(fake)
    proxy.client().chat.completions.create(model="qwen", tools=TOOLS,
                                           messages=[{"role": "user", "content": "secret"}])
    doc = _settled(proxy.url, 1)
    [turn] = doc["turns"]
    assert (turn["front"], turn["model"], turn["formats"]) == ("chat", "qwen", {"hermes": 1})
    assert turn["upstream"] == fake.url
    assert doc["upstreams"][0]["probe"]["ok"] is True
    assert "secret" not in str(doc)
    page = requests.get(proxy.url + "/proxy/status", timeout=5)
    assert page.headers["Content-Type"].startswith("text/html")
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy
    assert "unsafe-inline" not in policy  # only the page's own script and style, by hash
    [script] = re.findall(r"<script>(.*?)</script>", page.text, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy
    assert "src=" not in page.text
    assert 'href="http' not in page.text
    assert "status.json" in page.text
    metrics = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
    assert f'toolcall_proxy_replica_in_flight{{replica="{fake.url}"}} 0.0' in metrics
    assert f'toolcall_proxy_upstream_up{{upstream="{fake.url}"}} 1.0' in metrics


@pytest.mark.integration
def test_with_keys_the_status_needs_one_and_a_browser_may_send_it_as_basic(fake, start_proxy):
    proxy = start_proxy(api_keys=["k-123"])  # (without protect_proxy_endpoints: the page
    # shows the model names, errors and request ids clients caused)
    assert requests.get(proxy.url + "/proxy/status.json", timeout=5).status_code == 401
    assert not [r for r in fake.received if r.path == "/v1/models"]  # refused: not probed
    for path in ("/proxy/status", "/proxy/status.json"):
        refused = requests.get(proxy.url + path, timeout=5)
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("Basic")
        assert refused.json()["error"]["code"] == "invalid_api_key"
        assert requests.get(proxy.url + path, auth=("me", "k-123"), timeout=5).ok
        assert requests.get(proxy.url + path, auth=("me", "wrong"), timeout=5).status_code == 401
        assert requests.get(proxy.url + path, headers={"Authorization": "Bearer k-123"},
                            timeout=5).ok
    garbled = {"Authorization": "Basic %%%"}
    assert requests.get(proxy.url + "/proxy/status", headers=garbled,
                        timeout=5).status_code == 401
    keyed = requests.get(proxy.url + "/proxy/status.json", timeout=5,
                         headers={"X-Api-Key": "k-123"})
    assert keyed.json()["upstreams"][0]["probe"]["ok"] is True
    assert keyed.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.integration
def test_with_log_bodies_a_turn_s_capture_downloads_and_replays(fake, start_proxy):
    proxy = start_proxy(log_bodies=True)
    fake.answer(Answer(body=vllm_completion(
        '<tool_call>{"name": "read", "arguments": {"path": "a",}}</tool_call>')))
    answer = proxy.client().chat.completions.create(
        model="qwen", tools=TOOLS, messages=[{"role": "user", "content": "?"}])
    [turn] = _settled(proxy.url, 1)["turns"]
    download = requests.get(proxy.url + "/proxy/" + turn["capture"], timeout=5)
    assert download.status_code == 200
    assert download.headers["Content-Disposition"].startswith("attachment")
    [exchange] = parse_exchanges(download.content, "capture")
    replayed = replay_exchange(exchange, Config())
    assert replayed.status == 200
    assert replayed.diagnostics["tool_calls"] == len(answer.choices[0].message.tool_calls) == 1
    for key in ("0-999", "../../etc", "x"):
        missing = requests.get(proxy.url + "/proxy/status/capture/" + key, timeout=5)
        assert missing.status_code == 404


@pytest.mark.integration
def test_no_capture_without_log_bodies_and_none_without_a_key(fake, start_proxy):
    _hermes(fake)
    plain = start_proxy()
    plain.client().chat.completions.create(model="q", tools=TOOLS,
                                           messages=[{"role": "user", "content": "?"}])
    [turn] = _settled(plain.url, 1)["turns"]
    assert "capture" not in turn
    assert requests.get(plain.url + "/proxy/status/capture/0-1", timeout=5).status_code == 404
    keyed = start_proxy(log_bodies=True, api_keys=["sk-test"])  # the page open, captures keyed
    keyed.client().chat.completions.create(
        model="q", tools=TOOLS, messages=[{"role": "user", "content": "?"}])
    [turn] = _settled(keyed.url, 1, auth=("", "sk-test"))["turns"]
    url = keyed.url + "/proxy/" + turn["capture"]
    assert requests.get(url, timeout=5).status_code == 401
    assert requests.get(url, auth=("", "sk-test"), timeout=5).status_code == 200


@pytest.mark.integration
def test_an_upstream_error_shows_as_its_last_error_until_it_answers_again(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-test"])
    key = {"auth": ("", "sk-test")}
    fake.answer(vllm_error(500, "boom", "InternalServerError"))
    client = proxy.client()
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="q", tools=TOOLS,
                                       messages=[{"role": "user", "content": "?"}])
    [row] = _settled(proxy.url, 1, **key)["upstreams"]
    assert (row["failures"], row["last_error"]["code"]) == (1, "upstream_http_500")
    metrics = requests.get(proxy.url + "/proxy/metrics", timeout=5).text
    assert f'toolcall_proxy_upstream_up{{upstream="{fake.url}"}} 0.0' in metrics
    _hermes(fake)
    client.chat.completions.create(model="q", tools=TOOLS,
                                   messages=[{"role": "user", "content": "?"}])
    [row] = _settled(proxy.url, 2, **key)["upstreams"]
    assert (row["turns"], row["failures"]) == (2, 1)
    assert row["last_error"]["code"] == "upstream_http_500"
    assert f'toolcall_proxy_upstream_up{{upstream="{fake.url}"}} 1.0' in requests.get(
        proxy.url + "/proxy/metrics", timeout=5).text
    assert os.environ.get("PROMETHEUS_MULTIPROC_DIR") is None  # these ran in memory


@pytest.mark.integration
def test_a_turn_waiting_on_upstream_is_in_flight_there(fake, proxy):
    release = threading.Event()

    def held(received):
        release.wait(20)
        return Answer(body=vllm_completion("done"))

    fake.answer(held)
    client = proxy.client()
    waiting = threading.Thread(target=lambda: client.chat.completions.create(
        model="q", tools=TOOLS, messages=[{"role": "user", "content": "?"}]))
    waiting.start()
    try:
        assert fake.wait_chat_requests(1)
        [row] = requests.get(proxy.url + "/proxy/status.json", timeout=5).json()["upstreams"]
        assert row["in_flight"] == 1
    finally:
        release.set()
        waiting.join(20)
    [row] = _settled(proxy.url, 1)["upstreams"]
    assert row["in_flight"] == 0


def test_rings_of_workers_gone_are_dropped_to_the_newest_few(tmp_path):
    from proxy.shell.recorder.rings import GONE_RINGS_KEPT

    dead = [subprocess.Popen(["true"]) for _ in range(5)]
    for process in dead:
        process.wait()  # (their pids are free now)
    status = tmp_path / "status"
    status.mkdir(mode=0o700)
    for i, process in enumerate(dead):
        ring = status / f"turns-{process.pid}.ring"
        ring.write_bytes(b"TCPSTAT1")
        os.utime(ring, (NOW + i, NOW + i))
    live = status / f"turns-{os.getpid()}.ring"  # a worker still running keeps its ring
    live.write_bytes(b"TCPSTAT1")
    os.utime(live, (NOW - 100, NOW - 100))
    RingFileRecorder(str(status), capacity=16, worker=lambda: 4244).record(_turn())
    left = {p.name for p in status.glob("*.ring")}
    kept = {f"turns-{p.pid}.ring" for p in dead[-GONE_RINGS_KEPT:]}
    assert left == kept | {live.name, "turns-4244.ring"}


def test_status_json_is_built_no_more_often_than_its_cost_allows(fake, monkeypatch):
    """A build that takes 0.3 s is not followed by the next for ten times that: pollers
    asking back to back get the last build, not a worker busy building."""
    from proxy.shell.web import handlers
    from proxy.shell.web.wiring import Proxy

    proxy = Proxy(Config(upstream=fake.url))
    builds: list[float] = []
    built = handlers.build

    def slow_build(data):
        time.sleep(0.3)
        builds.append(time.monotonic())
        return built(data)
    monkeypatch.setattr(handlers, "build", slow_build)
    deadline = time.monotonic() + 4.0
    with flask.Flask(__name__).test_request_context("/proxy/status.json"):
        while time.monotonic() < deadline:
            handlers.status(proxy, "-")
    assert len(builds) == 2  # at 0.3 s, then not before 3.3 s (a second apart before)
    assert builds[1] - builds[0] >= 3.0
