"""Operating the proxy: the per-request log line, /proxy/metrics and /proxy/health."""

from __future__ import annotations

import json
import logging
import re

import pytest
import requests

from proxy.base.config import Config
from proxy.diagnose.replay import parse_exchanges, replay_exchange
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion, vllm_error, vllm_tool_call
from tests.metrics_text import metric, settled_metrics

pytestmark = pytest.mark.integration

USER = [{"role": "user", "content": "Read the hosts file, secret plan inside"}]
REPAIRED = '<tool_call>{"name": "read", "arguments": {"path": "/etc/hosts",}}</tool_call>'


def _post(proxy, body, **headers):
    return requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=10,
                         headers=headers)


def test_one_log_line_per_request_with_decisions_and_no_text(fake, start_proxy, log_lines):
    proxy = start_proxy(log_level="info")
    fake.answer(Answer(body=vllm_completion(REPAIRED, reasoning="private thoughts")))
    response = _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS,
                             "stream": True, "store": False}, **{"X-Request-Id": "req-42"})
    assert response.headers["X-Request-Id"] == "req-42"
    response.close()
    requests.get(proxy.url + "/v1/models", timeout=5)
    lines = log_lines(2)
    assert [line["path"] for line in lines] == ["/v1/chat/completions", "/v1/models"]
    chat = lines[0]
    assert chat["request_id"] == "req-42"
    assert chat["mode"] == "buffered"
    assert chat["stream"] is True
    assert chat["status"] == 200
    assert chat["upstream_status"] == 200
    assert chat["tool_calls"] == 1
    assert chat["formats"] == ["hermes"]
    assert chat["repairs"] == ["hermes:trailing_comma:read"]
    assert chat["finish_reason"] == ["stop->tool_calls"]
    assert chat["rewrites"] == ["drop_store"]
    assert chat["total_ms"] >= chat["upstream_ms"] >= 0
    assert lines[1]["mode"] == "passthrough"
    raw = json.dumps(lines)
    for text in ("secret plan", "private thoughts", "/etc/hosts"):
        assert text not in raw


def test_the_line_and_the_metrics_name_the_front_that_answered(fake, proxy, log_lines):
    fake.answer(Answer(body=vllm_completion(REPAIRED)))
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS})
    _post(proxy, {"model": "qwen", "messages": USER})  # no tools: the chat front relays it
    requests.get(proxy.url + "/v1/models", timeout=5)
    lines = log_lines(3)
    assert [(line.get("front"), line["mode"]) for line in lines] == [
        ("chat", "buffered"), ("chat", "passthrough"), (None, "passthrough")]
    text = settled_metrics(proxy)
    assert metric(text, "toolcall_proxy_requests_total", front="chat", mode="buffered") == 1
    assert metric(text, "toolcall_proxy_requests_total", front="chat", mode="passthrough") == 1
    assert metric(text, "toolcall_proxy_requests_total", front="none", mode="passthrough") == 1


def test_log_bodies_when_switched_on_redacts_credentials(fake, start_proxy, log_lines):
    proxy = start_proxy(log_bodies=True, log_level="info")
    fake.answer(Answer(body=vllm_completion(REPAIRED)))
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS, "api_key": "sk-live-123"})
    (line,) = log_lines(1)
    assert line["bodies"]["request"]["messages"] == USER
    assert line["bodies"]["request"]["api_key"] == "[redacted]"
    assert line["bodies"]["response"]["choices"][0]["finish_reason"] == "stop"  # as upstream said
    sent = line["bodies"]["sent"]["choices"][0]  # the turn's result, as data
    assert sent["finish"] == "tool_calls"
    assert [call["name"] for call in sent["calls"]] == ["read"]
    assert "sk-live-123" not in json.dumps(line)


def test_a_log_bodies_line_replays_to_what_the_client_got(fake, start_proxy, log_lines):
    proxy = start_proxy(log_bodies=True, log_level="info")
    fake.answer(Answer(body=vllm_completion(REPAIRED)))
    got = _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS}).json()
    (line,) = log_lines(1)
    (exchange,) = parse_exchanges(json.dumps(line).encode(), "proxy.log")
    replayed = json.loads(replay_exchange(exchange, Config()).output)
    calls = [c["function"] for c in replayed["choices"][0]["message"]["tool_calls"]]
    assert calls == [c["function"] for c in got["choices"][0]["message"]["tool_calls"]]
    assert calls == [{"name": "read", "arguments": '{"path":"/etc/hosts"}'}]


def test_metrics_count_what_the_proxy_did(fake, proxy):
    fake.answer(Answer(body=vllm_completion(REPAIRED)))
    for _ in range(2):
        _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS, "stream": True}).close()
    fake.answer(Answer(body=vllm_completion(  # a call to a tool not offered: as written
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "read", "arguments": []}</tool_call>')))
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS})
    requests.get(proxy.url + "/v1/models", timeout=5)
    text = settled_metrics(proxy)
    response = requests.get(proxy.url + "/proxy/metrics", timeout=5)
    assert response.headers["Content-Type"].startswith("text/plain")
    assert metric(text, "toolcall_proxy_requests_total", mode="buffered", status="200") == 3
    assert metric(text, "toolcall_proxy_requests_total", mode="passthrough", status="200") == 1
    assert metric(text, "toolcall_proxy_tool_calls_total", format="hermes") == 3
    assert metric(text, "toolcall_proxy_repairs_total", format="hermes",
                   repair="trailing_comma") == 2
    assert metric(text, "toolcall_proxy_repairs_total", format="hermes",
                   repair="unknown_tool") == 1
    assert metric(text, "toolcall_proxy_calls_refused_total", format="hermes",
                   reason="arguments_not_object") == 1
    assert metric(text, "toolcall_proxy_finish_reason_corrections_total", before="stop",
                   after="tool_calls") == 3
    assert metric(text, "toolcall_proxy_upstream_latency_seconds_count", mode="buffered") == 3
    assert metric(text, "toolcall_proxy_request_duration_seconds_count",
                   mode="passthrough") == 1
    assert metric(text, "toolcall_proxy_in_flight_requests") == 0


def test_metrics_count_upstream_errors_and_heartbeats(fake, start_proxy):
    proxy = start_proxy(heartbeat_seconds=0.1, commit_window_seconds=0.05,
                        buffered_timeout_seconds=0.5)
    fake.answer(Answer(body=vllm_completion(REPAIRED), delay=2))
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS, "stream": True}).close()
    text = settled_metrics(proxy)
    assert metric(text, "toolcall_proxy_upstream_errors_total", kind="upstream_timeout") == 1
    assert metric(text, "toolcall_proxy_heartbeats_total") >= 2


def test_health_reports_settings_without_secrets(start_proxy):
    proxy = start_proxy(api_keys=["sk-proxy-secret"], upstream_api_key="sk-upstream")
    body = requests.get(proxy.url + "/proxy/health", timeout=5).json()
    assert body["status"] == "ok"
    assert body["version"]
    assert body["config"]["api_keys"] == 1
    assert body["config"]["upstream_api_key"] is True
    assert "sk-proxy-secret" not in json.dumps(body)
    assert "sk-upstream" not in json.dumps(body)


def test_health_checks_the_upstream_when_asked(fake, start_proxy):
    proxy = start_proxy(models={"other*": {"upstream": "http://127.0.0.1:9"}})
    body = requests.get(proxy.url + "/proxy/health", timeout=5).json()
    assert "upstreams" not in body
    response = requests.get(proxy.url + "/proxy/health?upstream=1", timeout=10)
    assert response.status_code == 503
    reports = {r["url"]: r for r in response.json()["upstreams"]}
    assert reports[fake.url]["reachable"] is True
    assert reports[fake.url]["models"] == ["Qwen/Qwen3.6-27B-FP8"]
    assert reports["http://127.0.0.1:9"]["reachable"] is False
    healthy = start_proxy()
    assert requests.get(healthy.url + "/proxy/health?upstream=1", timeout=5).status_code == 200


def test_health_masks_credentials_in_upstream_urls(fake, start_proxy):
    with_auth = fake.url.replace("http://", "http://alice:S3CRET@")
    proxy = start_proxy(upstream=with_auth,
                        models={"big*": {"upstream": "http://bob:HUNTER2@127.0.0.1:9",
                                         "upstream_api_key": "sk-per-model"}})
    for query in ("", "?upstream=1"):
        response = requests.get(proxy.url + "/proxy/health" + query, timeout=10)
        for secret in ("alice", "S3CRET", "bob", "HUNTER2", "sk-per-model"):
            assert secret not in response.text, (query, secret)
    body = response.json()
    assert body["upstream"] == fake.url.replace("http://", "http://***@")
    assert {r["url"] for r in body["upstreams"]} == {body["upstream"],
                                                    "http://***@127.0.0.1:9"}


def test_probing_the_upstreams_needs_a_key_and_is_rate_limited(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-one"])
    assert requests.get(proxy.url + "/proxy/health", timeout=5).status_code == 200
    refused = requests.get(proxy.url + "/proxy/health?upstream=1", timeout=5)
    assert refused.status_code == 401
    assert fake.received == []
    keyed = {"Authorization": "Bearer sk-one"}
    asked = []
    for _ in range(5):
        health = requests.get(proxy.url + "/proxy/health?upstream=1", headers=keyed, timeout=5)
        assert health.status_code == 200
        assert health.json()["upstreams"][0]["ok"] is True
        asked.append(len(fake.received))
    # five health checks, one probe of the upstream (its model list, and its profile's info
    # endpoints learned once): the next four ask it nothing
    assert "/v1/models" in [r.path for r in fake.received]
    assert asked == [asked[0]] * 5


def test_redact_keeps_tool_schemas_and_hides_credential_values():
    from proxy.telemetry.request_log import redact

    schema = {"type": "object", "properties": {"password": {"type": "string"},
                                               "secret": {"type": "string", "minLength": 8},
                                               "token": {"type": "integer"}},
              "required": ["password", "secret"]}
    body = {"model": "q", "api_key": "sk-1", "Authorization": "Bearer sk-2",
            "tools": [{"type": "function", "function": {"name": "login", "parameters": schema}}],
            "messages": [{"role": "tool", "content": "ok", "token": 1234}],
            "extra": {"headers": {"Cookie": "sid=abc", "Set-Cookie": ["a=1", "b=2"],
                                  "access_key": "AK", "private_key": "PK"}}}
    redacted = redact(body)
    assert redacted["tools"] == body["tools"]  # a schema is not a credential
    assert redacted["api_key"] == redacted["Authorization"] == "[redacted]"
    assert redacted["messages"][0]["token"] == "[redacted]"
    headers = redacted["extra"]["headers"]
    assert headers == {"Cookie": "[redacted]", "Set-Cookie": ["[redacted]", "[redacted]"],
                       "access_key": "[redacted]", "private_key": "[redacted]"}
    text = json.dumps(redacted)
    for secret in ("sk-1", "sk-2", "1234", "sid=abc", "a=1", "AK\"", "PK\""):
        assert secret not in text, secret


def _logfmt_fields(line: str) -> dict[str, str]:
    """A logfmt line's fields (quoted values decoded), checking nothing is left over."""
    pairs = re.findall(r'([\w.-]+)=("(?:[^"\\]|\\.)*"|[^\s"=]*)(?: |$)', line)
    assert " ".join(f"{k}={v}" for k, v in pairs) == line  # every byte is in some pair
    return {k: json.loads(v) if v.startswith('"') else v for k, v in pairs}


def test_text_log_line_is_logfmt_and_cannot_be_forged():
    import io

    from proxy.telemetry.request_log import RequestLog
    from proxy.turn.result import Outcome

    stream = io.StringIO()
    logger = logging.getLogger("test_logfmt")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    log = RequestLog("req-1", "POST", "/v1/chat/completions", mode="buffered",
                     model='evil\n ts=0 request_id=FORGED "x"=y\u2028z\\', client_stream=True,
                     status=200)
    log.outcome = Outcome(tool_calls=1, formats=["hermes", "qwen_xml"],
                          finish_before=["stop"], finish_after=["tool_calls"])
    log.emit(logger, "text")
    logger.removeHandler(handler)
    text = stream.getvalue()
    assert text.endswith("\n")
    assert text.count("\n") == 1
    assert "\u2028" not in text
    fields = _logfmt_fields(text.rstrip("\n"))
    assert fields["request_id"] == "req-1"
    assert fields["ts"] != "0"
    assert fields["model"] == 'evil\n ts=0 request_id=FORGED "x"=y\u2028z\\'
    assert fields["stream"] == "true"
    assert fields["formats"] == "hermes,qwen_xml"
    assert fields["finish_reason"] == "stop->tool_calls"
    assert fields["status"] == "200"


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_no_log_line_holds_a_raw_unicode_line_break(fmt):
    """U+0085, U+2028 and U+2029 end a line for Python's splitlines, JavaScript and many log
    shippers: in either format they are escaped, and the value reads back whole."""
    import io

    from proxy.telemetry.request_log import RequestLog

    stream = io.StringIO()
    logger = logging.getLogger(f"test_breaks_{fmt}")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    model = 'a\u0085"request_id":"FORGED"\u2028b\u2029c\x7f'
    RequestLog("req-1", "POST", "/v1/chat/completions", mode="buffered", model=model,
               status=200).emit(logger, fmt)
    logger.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()  # splitlines breaks at all three
    assert not {"\u0085", "\u2028", "\u2029", "\x7f"} & set(line)
    fields = json.loads(line) if fmt == "json" else _logfmt_fields(line)
    assert fields["model"] == model
    assert fields["request_id"] == "req-1"


def test_log_line_names_only_the_request_s_own_tools(fake, start_proxy, log_lines):
    proxy = start_proxy(log_level="info")
    forged = "rm -rf / secret plan " + "x" * 500
    fake.answer(Answer(body=vllm_completion(
        f'<tool_call>{{"name": "{forged}", "arguments": {{}}}}</tool_call>'
        '<tool_call>{"name": "read", "arguments": {"path": "a",}}</tool_call>')))
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS})
    fake.answer(Answer(body=vllm_completion(None, tool_calls=[
        vllm_tool_call(forged, "")], finish_reason="tool_calls")))
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS})
    first, second = log_lines(2)
    assert first["left_as_text"] == ["hermes:unknown_tool:?"]
    assert first["repairs"] == ["hermes:trailing_comma:read"]  # a declared tool is named
    # vLLM parsed a call to a name no function can have: left out, and the turn that is left
    # empty is an answer (a 200), never an error a client would retry.
    assert second["status"] == 200
    assert "error" not in second
    assert second["left_as_text"] == ["native:unknown_tool:?"]
    assert "rm -rf" not in json.dumps([first, second])


def test_a_log_record_without_declared_tools_names_none():
    from proxy.telemetry.request_log import RequestLog
    from proxy.turn.result import Outcome, Repair, TextLeft

    log = RequestLog("r", "POST", "/v1/chat/completions")
    log.outcome = Outcome(repairs=[Repair("hermes", "trailing_comma", "read")],
                          left_as_text=[TextLeft("hermes", "unknown_tool", "read"),
                                        TextLeft("native", "call_without_name", None)])
    record = log.as_dict()
    assert record["repairs"] == ["hermes:trailing_comma:?"]
    assert record["left_as_text"] == ["hermes:unknown_tool:?", "native:call_without_name"]
    log.tools = frozenset({"read"})
    assert log.as_dict()["repairs"] == ["hermes:trailing_comma:read"]


def _labels(text: str, name: str, label: str) -> dict[str, float]:
    """Every value of one label of a metric, with its sample."""
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.rsplit(" ", 1)[0]))
            found[labels[label]] = float(line.rsplit(" ", 1)[1])
    return found


def test_metric_labels_from_upstream_come_from_closed_sets(fake, proxy):
    fake.answer(Answer(status=500, body={"error": {"message": "boom", "type": "x",
                                                   "code": "weird code 12345"}}))
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS})
    fake.answer(Answer(body=vllm_completion(REPAIRED, finish_reason="eos: token 99")))
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS})
    text = settled_metrics(proxy)
    assert _labels(text, "toolcall_proxy_upstream_errors_total", "kind") == {
        "upstream_http_500": 1}
    assert _labels(text, "toolcall_proxy_finish_reason_corrections_total", "before") == {
        "other": 1}
    assert "weird code" not in text
    assert "token 99" not in text


def test_upstream_errors_count_upstream_failures_not_client_faults(fake, start_proxy):
    proxy = start_proxy(api_keys=["sk-proxy"])
    key = {"Authorization": "Bearer sk-proxy"}
    _post(proxy, {"model": "qwen"})  # no key: 401
    requests.post(proxy.url + "/v1/chat/completions", data=b"{oops", timeout=10,
                  headers=key)  # 400 invalid_json
    _post(proxy, {"model": "q", "messages": "x", "tools": TOOLS}, **key)  # 400 invalid_request
    fake.answer(vllm_error(400, "context too long"))  # the client's fault, told by upstream
    _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS}, **key)
    fake.answer(vllm_error(503, "overloaded"))  # passthrough: relayed as is, still counted
    assert _post(proxy, {"model": "qwen", "messages": USER}, **key).status_code == 503
    text = settled_metrics(proxy)
    assert metric(text, "toolcall_proxy_requests_total", mode="passthrough", status="401") == 1
    assert _labels(text, "toolcall_proxy_upstream_errors_total", "kind") == {
        "upstream_http_503": 1}


def test_requests_refused_before_routing_get_an_id_and_a_log_line(fake, proxy, log_lines):
    response = requests.request("TRACE", proxy.url + "/v1/models", timeout=5)
    assert response.status_code == 405
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert re.fullmatch(r"[0-9a-f]{16}", response.headers["X-Request-Id"])
    [line] = log_lines(1)
    assert (line["method"], line["status"], line["request_id"]) == (
        "TRACE", 405, response.headers["X-Request-Id"])
    assert line["bytes_out"] == len(response.content)
    assert fake.received == []


def test_the_request_id_reaches_upstream_minted_or_given(fake, proxy, log_lines):
    requests.get(proxy.url + "/v1/models", timeout=5)
    minted = fake.received[-1].headers["X-Request-Id"]
    requests.post(proxy.url + "/v1/chat/completions", timeout=10, headers={
        "X-Request-Id": "client-chosen-1"}, json={"model": "q", "messages": USER, "tools": TOOLS})
    assert fake.received[-1].headers["X-Request-Id"] == "client-chosen-1"
    assert [line["request_id"] for line in log_lines(2)] == [minted, "client-chosen-1"]


def test_counts_are_of_the_calls_emitted_with_parallel_tool_calls_false(fake, proxy, log_lines):
    fake.answer(Answer(body=vllm_completion(REPAIRED + "\n" + REPAIRED.replace("hosts", "fstab"))))
    body = requests.post(proxy.url + "/v1/chat/completions", timeout=10, json={
        "model": "q", "messages": USER, "tools": TOOLS, "parallel_tool_calls": False}).json()
    assert len(body["choices"][0]["message"]["tool_calls"]) == 1
    [line] = log_lines(1)
    assert line["tool_calls"] == 1
    assert metric(settled_metrics(proxy), "toolcall_proxy_tool_calls_total",
                   format="hermes") == 1


def test_log_bodies_captures_the_upstream_answer_of_a_failed_turn(fake, start_proxy, log_lines):
    proxy = start_proxy(log_bodies=True, log_level="info")
    fake.answer(Answer(status=200, body=b"<html>oops</html>",
                       headers={"Content-Type": "text/html"}))
    requests.post(proxy.url + "/v1/chat/completions", timeout=10,
                  json={"model": "q", "messages": USER, "tools": TOOLS})
    fake.answer(Answer(body=b'{"object": "list"}'))
    requests.post(proxy.url + "/v1/chat/completions", timeout=10,
                  json={"model": "q", "messages": USER, "tools": TOOLS})
    first, second = log_lines(2)
    assert (first["error"], first["bodies"]["response"]) == ("upstream_invalid_json",
                                                             "<html>oops</html>")
    assert second["error"] == "upstream_bad_shape"
    assert second["bodies"]["response"] == {"object": "list"}


def test_a_call_that_does_not_fit_its_schema_is_counted_in_the_line_the_metrics_and_status(
        fake, start_proxy, log_lines):
    """Issue 37, item 6: delivered as written, and counted `schema_invalid` everywhere the
    proxy tells what it did (the tool's name only where the request declared it)."""
    proxy = start_proxy(log_level="info")
    fake.answer(Answer(body=vllm_completion(  # `city` is required, `days` an integer
        '<tool_call>{"name": "get_weather", "arguments": {"days": "soon"}}</tool_call>')))
    got = _post(proxy, {"model": "qwen", "messages": USER, "tools": TOOLS}).json()
    [call] = got["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"days": "soon"}
    (line,) = log_lines(1)
    assert line["schema_invalid"] == ["hermes:schema_invalid:get_weather"]
    assert "soon" not in json.dumps(line)
    assert metric(settled_metrics(proxy), "toolcall_proxy_calls_schema_invalid_total",
                   format="hermes") == 1
    for _ in range(250):
        doc = requests.get(proxy.url + "/proxy/status.json", timeout=5).json()
        if doc["turns"]:
            break
    assert doc["turns"][0]["schema_invalid"] == {"hermes": 1}
    assert doc["models"][0]["schema_invalid"] == {"hermes": 1}
