"""What the fifth adversarial probe of the production server found of upstream profiles (issue
42, breaks 3 to 7), as regressions against `python app.py` (gunicorn, two gevent workers,
SQLite or a real Redis) before the fake vLLM or a hostile one: model names no client can turn
into probes and rows, one client's schema that cannot retire a dialect for the others, a
wrong key's profile never kept, a probe with one deadline and capped fields, status.json
spaced by what it costs."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import orjson
import pytest
import requests

from tests.conftest import TOOLS
from tests.fake_vllm import Answer, Received, vllm_completion, vllm_error
from tests.hostile_upstream import BLOAT, DRIP, HostileVLLM
from tests.redis_server import needs_redis
from tests.serving import served, wait_for

pytestmark = pytest.mark.integration

USER = [{"role": "user", "content": "Read /etc/hosts."}]
STREAMED = {"TOOLCALL_PROXY_STREAM_MODE": "stream"}


@pytest.fixture
def vllm():
    fake = HostileVLLM()
    yield fake
    fake.close()


def _streamed_turn(url: str, model: str, headers: dict[str, str] | None = None,
                   timeout: float = 30) -> tuple[float, float, int]:
    """One streamed tool turn: seconds to its first byte and to its end, and its status."""
    started = time.monotonic()
    body = {"model": model, "messages": USER, "tools": TOOLS, "stream": True}
    with requests.post(url + "/v1/chat/completions", json=body, headers=headers, stream=True,
                       timeout=timeout) as response:
        first = None
        for _ in response.iter_content(1):
            first = time.monotonic() - started if first is None else first
        return (first if first is not None else float("inf"), time.monotonic() - started,
                response.status_code)


def _profile_rows(state: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(state / "toolcall-proxy" / "responses.sqlite3") as db:
        return db.execute("SELECT key, length(value) FROM profiles").fetchall()


# -- 3: every new model name was a probe and a stored row -----------------------------------

def test_new_model_names_cost_no_probe_and_no_row(vllm, tmp_path):
    """Forty names and four of 1 MB, streamed with tools (each turn needs a profile): the
    upstream serves one model, so it is probed once per worker, and one row is kept,
    under a key of fixed size."""
    state = tmp_path / "state"
    with served(vllm.url, {**STREAMED, "XDG_STATE_HOME": str(state)}, workers=2) as server:
        names = [f"name-{i}" for i in range(40)] + [f"{i}" + "x" * 1_000_000 for i in range(4)]
        for name in names:
            assert _streamed_turn(server.url, name)[2] == 200
        asked = vllm.info_asked()
        assert asked.count("/version") <= 2  # once per worker at most, not once per name
        assert asked.count("/tokenize") <= 2
        assert asked.count("/v1/models") <= 4
        rows = _profile_rows(state)
        assert len(rows) == 1
        [(key, size)] = rows
        assert len(key) == 40
        assert size < 2048
    assert (state / "toolcall-proxy" / "responses.sqlite3").stat().st_size < 1 << 20


@needs_redis
def test_on_redis_new_model_names_keep_one_profile(vllm, redis_url):
    import redis

    with served(vllm.url, {**STREAMED, "TOOLCALL_PROXY_RESPONSES_STORE_URL": redis_url},
                workers=2) as server:
        for i in range(30):
            assert _streamed_turn(server.url, f"{i}" + "y" * 100_000)[2] == 200
        keys = redis.Redis.from_url(redis_url).keys("toolcall-proxy:profile:*")
        assert len(keys) == 1
        assert all(len(key) < 80 for key in keys)
        assert vllm.info_asked().count("/version") <= 2


# -- 4: one key retired the constrained re-ask for all keys ---------------------------------

def _schema_compiler(received: Received) -> Answer:
    """A parserless vLLM's model that never calls unless constrained; its grammar engine
    cannot compile the pattern `(((` (400, as vLLM's xgrammar refusal names the field)."""
    body = received.json
    constraint = (body.get("structured_outputs") or {}).get("json")
    if constraint is None and isinstance(body.get("response_format"), dict):
        constraint = (body["response_format"].get("json_schema") or {}).get("schema")
    if constraint is None:
        return Answer(body=vllm_completion("I would rather not."))
    if b'"((("' in orjson.dumps(constraint):
        field = "structured_outputs" if "structured_outputs" in body else "response_format"
        return vllm_error(400, f"Invalid {field}: the grammar could not be compiled: "
                               "unbalanced parenthesis in pattern")
    items = constraint["items"]
    first = items["anyOf"][0] if "anyOf" in items else items
    name = first["properties"]["name"]["enum"][0]
    return Answer(body=vllm_completion(orjson.dumps([{"name": name, "arguments": {}}])
                                       .decode()))


BAD_TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look a code up.",
    "parameters": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "((("}}}}}]


def test_one_client_s_uncompilable_schema_retires_nothing_for_the_others(tmp_path):
    fake = HostileVLLM(tool_parser=False)
    fake.answer(_schema_compiler)
    settings = {"TOOLCALL_PROXY_UPSTREAM_TOOL_PARSER": "false",
                "TOOLCALL_PROXY_FORMATS": "qwen_xml,hermes"}
    try:
        with served(fake.url, settings, workers=2) as server:
            bad = {"model": fake.model, "messages": USER, "tools": BAD_TOOLS,
                   "tool_choice": "required"}
            for _ in range(4):  # each dialect refused in turn, on both workers
                answer = requests.post(server.url + "/v1/chat/completions", json=bad,
                                       timeout=30)
                assert answer.status_code == 502  # this client's own schema: its own 502
            good = {"model": fake.model, "messages": USER, "tools": TOOLS,
                    "tool_choice": "required"}
            for _ in range(4):
                answer = requests.post(server.url + "/v1/chat/completions", json=good,
                                       timeout=30)
                assert answer.status_code == 200, answer.text
                assert answer.json()["choices"][0]["message"]["tool_calls"]

            def told() -> bool:
                """health shows the refusal, blamed on the request"""
                health = requests.get(server.url + "/proxy/health?upstream=1",
                                      timeout=30).json()
                return any(r["blamed"] == "request" for u in health["upstreams"]
                           for r in u["refusals"])
            wait_for(told, 20)
            doc = requests.get(server.url + "/proxy/status.json", timeout=30).json()
            shown = [r for u in doc["upstreams"] for r in (u["probe"] or {}).get("refusals", ())]
            assert shown
            assert {r["blamed"] for r in shown} <= {"request", "checking"}
            assert all(r["model"] == fake.model for r in shown)
    finally:
        fake.close()


# -- 5: a wrong key poisoned the profile ----------------------------------------------------

def test_a_wrong_key_s_refused_probes_keep_no_profile(tmp_path):
    fake = HostileVLLM(key="right")
    state = tmp_path / "state"
    try:
        with served(fake.url, {**STREAMED, "XDG_STATE_HOME": str(state)},
                    workers=2) as server:
            wrong = {"Authorization": "Bearer wrong"}
            for _ in range(4):
                assert _streamed_turn(server.url, fake.model, wrong)[2] == 401
            database = state / "toolcall-proxy" / "responses.sqlite3"
            assert not database.exists() or _profile_rows(state) == []
            assert _streamed_turn(server.url, fake.model, {"Authorization": "Bearer right"}
                                  )[2] == 200
            assert len(_profile_rows(state)) == 1
            with sqlite3.connect(database) as db:
                [(value,)] = db.execute("SELECT value FROM profiles").fetchall()
            profile = orjson.loads(value)
            assert (profile["kind"], profile["call_wrapper"]) == ("vllm", "hermes")
    finally:
        fake.close()


# -- 6: the probe had no deadline and no size bound -----------------------------------------

def test_a_dripping_identity_endpoint_holds_no_turn_and_no_status(tmp_path):
    """`/version` drips a byte a second for ten minutes: a new model's first streamed turn
    has its first byte within the commit window and its end within the probe's deadline;
    status.json and health answer meanwhile, for other keys too."""
    fake = HostileVLLM(version_mode=DRIP)
    try:
        with served(fake.url, STREAMED, workers=1) as server:
            seen: dict[str, float] = {}

            def poll(path: str) -> None:
                started = time.monotonic()
                requests.get(server.url + path, timeout=30)
                seen[path] = time.monotonic() - started
            pollers = [threading.Thread(target=poll, args=(path,)) for path in (
                "/proxy/status.json", "/proxy/health?upstream=1")]
            turn: list[tuple[float, float, int]] = []
            runner = threading.Thread(target=lambda: turn.append(
                _streamed_turn(server.url, fake.model, timeout=40)))
            runner.start()
            time.sleep(0.3)  # the turn's probe is under way
            for poller in pollers:
                poller.start()
            runner.join(45)
            for poller in pollers:
                poller.join(45)
            [(first, whole, status)] = turn
            assert status == 200
            assert first < 3.0  # the role chunk in the commit window, not after the probe
            assert whole < 15.0  # the probe given up at its deadline (5 s), the turn done
            assert seen["/proxy/status.json"] < 15.0
            assert seen["/proxy/health?upstream=1"] < 15.0
    finally:
        fake.close()


def test_a_bloated_version_is_capped_everywhere(tmp_path):
    fake = HostileVLLM(version_mode=BLOAT)
    state = tmp_path / "state"
    try:
        with served(fake.url, {**STREAMED, "XDG_STATE_HOME": str(state)},
                    workers=2) as server:
            assert _streamed_turn(server.url, fake.model)[2] == 200
            health = requests.get(server.url + "/proxy/health?upstream=1", timeout=30)
            assert len(health.content) < 64 * 1024
            for upstream in health.json()["upstreams"]:
                for profile in upstream.get("profiles", {}).values():
                    assert len(profile["version"]) <= 64
            status = requests.get(server.url + "/proxy/status.json", timeout=30)
            assert len(status.content) < 256 * 1024
            assert all(size < 2048 for _, size in _profile_rows(state))
    finally:
        fake.close()


# -- minors: every listed model's profile, and a template changed under the same name -------

def test_health_and_status_show_every_listed_model_s_profile():
    listed = tuple(f"extra-{i}" for i in range(11))
    fake = HostileVLLM(listed=listed)
    try:
        with served(fake.url, workers=1) as server:
            health = requests.get(server.url + "/proxy/health?upstream=1", timeout=30).json()
            [upstream] = health["upstreams"]
            assert set(upstream["profiles"]) == {fake.model, *listed}  # twelve, not eight
    finally:
        fake.close()
