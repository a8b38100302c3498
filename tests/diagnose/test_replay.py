"""`python app.py replay FILE`: what the proxy would send for a captured exchange, and why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

import app
from tests.conftest import TOOLS
from tests.fake_vllm import Answer, vllm_completion, vllm_tool_call

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
STREAM_CAPTURE = FIXTURES / "replay_hermes_stream.json"
SESSION_CAPTURE = FIXTURES / "replay_session.jsonl"
HERMES_READ = '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>'


def _replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`python app.py replay ARGS` in this process: exit status, stdout, stderr."""
    status = app.main(["replay", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def _replay_json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    status, out, err = _replay(capsys, *args, "--json")
    assert (status, err) == (0, "")
    return [json.loads(line) for line in out.splitlines()]


def _events(sse: str) -> list[Any]:
    """The SSE text's `data:` payloads, decoded (`[DONE]` kept as the string)."""
    assert sse.endswith("\n\n")
    frames = sse.split("\n\n")[:-1]
    assert all(frame.startswith("data: ") for frame in frames)
    return [frame[6:] if frame == "data: [DONE]" else json.loads(frame[6:]) for frame in frames]


def _capture(path: Path, *exchanges: dict[str, Any], jsonl: bool = False) -> Path:
    text = ("\n".join(json.dumps(e) for e in exchanges) + "\n" if jsonl
            else json.dumps(exchanges[0], indent=2))
    path.write_text(text)
    return path


def _request(**extra: Any) -> dict[str, Any]:
    return {"model": "q", "messages": [{"role": "user", "content": "?"}], "tools": TOOLS,
            **extra}


# -- what the client would receive -----------------------------------------------------------


def test_streamed_capture_renders_the_designed_sse_sequence(capsys):
    [replay] = _replay_json(capsys, STREAM_CAPTURE)
    assert replay["status"] == 200
    assert replay["content_type"] == "text/event-stream"
    events = _events(replay["output"])
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    # One identity for the whole stream, minted as the server mints it (not upstream's).
    [(ident, kind, model)] = {(c["id"], c["object"], c["model"]) for c in chunks}
    assert (kind, model) == ("chat.completion.chunk", "Qwen/Qwen3.6-27B-FP8")
    assert ident.startswith("chatcmpl-")
    assert ident != "chatcmpl-replay0001"
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[1] == {"reasoning_content": "The user wants the weather; call get_weather."}
    assert deltas[2] == {"content": "Let me check."}
    head, arguments = deltas[3]["tool_calls"][0], deltas[4]["tool_calls"][0]
    assert head["id"].startswith("call_")
    assert head["function"] == {"name": "get_weather", "arguments": ""}
    assert json.loads(arguments["function"]["arguments"]) == {"city": "Paris", "days": 2}
    assert chunks[5]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[6] == {**chunks[6], "choices": [],
                         "usage": {"prompt_tokens": 210, "completion_tokens": 41,
                                   "total_tokens": 251}}
    assert len(chunks) == 7


def test_streamed_capture_diagnostics(capsys):
    [replay] = _replay_json(capsys, STREAM_CAPTURE)
    d = replay["diagnostics"]
    assert d["mode"] == "buffered"
    assert d["client_stream"] is True
    assert d["include_usage"] is True
    assert d["formats"] == ["hermes"]
    assert d["repairs"] == [{"format": "hermes", "repair": "trailing_comma",
                             "tool": "get_weather"}]
    assert d["left_as_text"] == []
    assert d["finish_reason"] == [{"before": "stop", "after": "tool_calls"}]
    assert d["tool_calls"] == 1
    assert d["calls"][0]["format"] == "hermes"
    assert d["rewrites"] == ["drop_store", "max_completion_tokens_as_max_tokens",
                             "developer_role_as_system", "drop_stream_options_without_stream"]
    upstream = d["upstream_body"]
    assert upstream["stream"] is False
    assert upstream["max_tokens"] == 1024
    assert not {"stream_options", "store", "max_completion_tokens"} & set(upstream)
    assert upstream["messages"][0]["role"] == "system"
    assert d["upstream_changes"]["store"] == {"removed": False}


def test_human_report(capsys):
    status, out, err = _replay(capsys, STREAM_CAPTURE)
    assert (status, err) == (0, "")
    assert out.startswith(f"== exchange {STREAM_CAPTURE} ==\n")
    for line in ("request     buffered, model Qwen/Qwen3.6-27B-FP8, client streamed, "
                 "include_usage",
                 "tool calls  1: get_weather {\"city\":\"Paris\",\"days\":2} [hermes]",
                 "repairs     hermes:trailing_comma (get_weather)",
                 "left text   none",
                 "finish      stop → tool_calls",
                 "-- the proxy would send: HTTP 200, text/event-stream --",
                 "data: [DONE]"):
        assert line in out.splitlines(), line
    assert "-store" in out
    assert "~stream=false" in out


def test_subprocess_wiring():
    done = subprocess.run([sys.executable, "app.py", "replay", str(STREAM_CAPTURE), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["diagnostics"]["formats"] == ["hermes"]


def test_jsonl_session_without_streaming(capsys):
    first, second, third = _replay_json(capsys, SESSION_CAPTURE)
    assert [r["exchange"] for r in (first, second, third)] == [
        f"{SESSION_CAPTURE}:{n}" for n in (1, 2, 3)]
    assert {r["content_type"] for r in (first, second, third)} == {"application/json"}

    completion = json.loads(first["output"])
    message = completion["choices"][0]["message"]
    assert completion["object"] == "chat.completion"
    assert message["content"] is None
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {
        "path": "notes.txt", "limit": 10}  # coerced to the schema's integer
    assert completion["choices"][0]["finish_reason"] == "tool_calls"
    assert first["diagnostics"]["formats"] == ["qwen_xml"]

    # A call the model plainly made to a tool the request does not offer is delivered as
    # written (the agent answers "no such tool"), and says so.
    message = json.loads(second["output"])["choices"][0]["message"]
    assert [(c["function"]["name"], c["function"]["arguments"])
            for c in message["tool_calls"]] == [("delete", '{"path":"notes.txt"}')]
    assert second["diagnostics"]["repairs"] == [
        {"format": "hermes", "repair": "unknown_tool", "tool": "delete"}]
    assert second["diagnostics"]["left_as_text"] == []
    assert second["diagnostics"]["finish_reason"] == [{"before": "stop", "after": "tool_calls"}]

    assert json.loads(third["output"])["choices"][0]["message"] == {"role": "assistant",
                                                                     "content": "Hello!"}
    assert third["diagnostics"]["tool_calls"] == 0


def test_json_list_of_exchanges(capsys, tmp_path):
    exchange = {"request": _request(), "response": vllm_completion(HERMES_READ)}
    path = tmp_path / "list.json"
    path.write_text(json.dumps([exchange, exchange]))
    replays = _replay_json(capsys, path)
    assert [r["exchange"] for r in replays] == [f"{path}[0]", f"{path}[1]"]


def test_parallel_tool_calls_false_keeps_the_first_call(capsys, tmp_path):
    calls = [vllm_tool_call("read", '{"path": "a"}'), vllm_tool_call("read", '{"path": "b"}')]
    path = _capture(tmp_path / "c.json", {
        "request": _request(parallel_tool_calls=False),
        "response": vllm_completion(None, tool_calls=calls, finish_reason="tool_calls")})
    [replay] = _replay_json(capsys, path)
    message = json.loads(replay["output"])["choices"][0]["message"]
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"path": "a"}']
    assert replay["diagnostics"]["notes"] == [
        "parallel_tool_calls_false:kept_first_call (dropped 1)"]
    assert [c["format"] for c in replay["diagnostics"]["calls"]] == ["native"]


def test_config_file_applies_like_on_the_server(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"models": {"q*": {"upstream_tool_parser": False,
                                                    "tool_temperature": 0.2,
                                                    "formats": ["hermes"]}}}))
    path = _capture(tmp_path / "c.json", {"request": _request(),
                                          "response": vllm_completion(HERMES_READ)})
    [replay] = _replay_json(capsys, path, "--config", config)
    d = replay["diagnostics"]
    assert d["upstream_body"]["tool_choice"] == "none"
    assert d["upstream_body"]["skip_special_tokens"] is False
    assert d["upstream_body"]["temperature"] == 0.2
    assert d["rewrites"] == ["tool_choice_applied_by_proxy", "tool_temperature"]
    assert d["settings"]["formats"] == ["hermes"]
    assert d["tool_calls"] == 1


def test_tool_choice_required_without_a_call_is_noted(capsys, tmp_path):
    path = _capture(tmp_path / "c.json", {"request": _request(tool_choice="required"),
                                          "response": vllm_completion("no call")})
    [replay] = _replay_json(capsys, path)
    assert replay["diagnostics"]["notes"][0].startswith("tool_call_required_but_none_found")
    assert replay["status"] == 502
    assert replay["diagnostics"]["upstream_error"]["code"] == "tool_call_required_unmet"


def test_passthrough_request_is_relayed_unchanged(capsys, tmp_path):
    response = vllm_completion("plain")
    path = _capture(tmp_path / "c.json", {
        "request": {"model": "q", "messages": [{"role": "user", "content": "hi"}]},
        "response": response})
    [replay] = _replay_json(capsys, path)
    assert replay["diagnostics"]["mode"] == "passthrough"
    assert json.loads(replay["output"]) == response


def test_request_the_proxy_refuses_shows_its_error(capsys, tmp_path):
    history = [{"role": "assistant", "content": None,
                "tool_calls": [vllm_tool_call("read", "{}"), vllm_tool_call("read", "{}")]}]
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"loop_guard_max_tool_calls": 1}))
    path = _capture(tmp_path / "c.json", {
        "request": _request(messages=[*history, {"role": "user", "content": "?"}]),
        "response": vllm_completion("x")})
    [replay] = _replay_json(capsys, path, "--config", config)
    assert replay["status"] == 400
    assert json.loads(replay["output"])["error"]["code"] == "tool_call_loop_guard"
    assert replay["diagnostics"]["refused"]["code"] == "tool_call_loop_guard"


# -- replay and the server agree -------------------------------------------------------------


def _without_ids(value: Any) -> Any:
    """`value` with the minted call ids blanked (they are random on each run)."""
    if isinstance(value, dict):
        return {k: "call_*" if k == "id" and str(v).startswith("call_") else _without_ids(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


@pytest.mark.integration
@pytest.mark.parametrize("stream", [True, False])
def test_replay_matches_what_the_server_sends(capsys, tmp_path, fake, proxy, stream):
    capture = json.loads(STREAM_CAPTURE.read_text())
    capture["request"]["stream"] = stream
    fake.answer(Answer(body=capture["response"]))
    served = requests.post(proxy.url + "/v1/chat/completions", json=capture["request"],
                           timeout=20)
    assert served.status_code == 200
    [replay] = _replay_json(capsys, _capture(tmp_path / "c.json", capture))
    assert replay["content_type"].split(";")[0] == served.headers["Content-Type"].split(";")[0]
    if stream:
        ours, theirs = _events(replay["output"]), _events(served.text)
        for chunk in (*ours, *theirs):
            if isinstance(chunk, dict):
                chunk.update(id="*", created=0)
        assert _without_ids(ours) == _without_ids(theirs)
    else:
        assert _without_ids(json.loads(replay["output"])) == _without_ids(served.json())
    # The upstream body replay reports is the one the server sent.
    assert replay["diagnostics"]["upstream_body"] == fake.chat_requests()[-1].json


# -- input that cannot be replayed -----------------------------------------------------------


@pytest.mark.parametrize(("content", "message"), [
    ("", "the file is empty"),
    ("{not json", "not valid JSON or JSONL"),
    ("[]", "the list holds no exchange"),
    ('{"request": {}}', 'expected an object {"request": {…}, "response": {…}}'),
    ('{"request": [], "response": {}}', "'request' must be the client's chat completion body"),
    ('{"request": {}, "response": 3}', "'response' must be the upstream's chat completion"),
    ('{"request": {"model": "q"}, "response": {"error": {"message": "Model  is\\n gone"}}}',
     "'response' is an error envelope, not a completion (upstream said: Model is gone)"),
    ('{"request": {"model": "q"}, "response": {"object": "error", "message": "boom"}}',
     "(upstream said: boom)"),
])
def test_bad_capture_is_one_line_and_exit_2(capsys, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    status, out, err = _replay(capsys, path)
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("toolcall-proxy replay: ")
    assert message in err


# What a terminal acts on: an OSC title change, a screen clear, C1's CSI, a bidi override.
CONTROLS = "\x1b]0;owned\x07 \x1b[2J \u009b31m \u202e"


def test_what_the_capture_holds_is_printed_with_its_control_characters_escaped(
        capsys, tmp_path):
    capture = {"request": _request(model="q" + CONTROLS, stream=True),
               "response": vllm_completion("Text " + CONTROLS + HERMES_READ)}
    path = _capture(tmp_path / "c.json", capture)
    status, out, err = _replay(capsys, path)
    assert (status, err) == (0, "")
    assert not {"\x1b", "\x07", "\u009b", "\u202e"} & set(out)
    assert "\\u001b]0;owned\\u0007" in out  # shown, not acted on
    [replay] = _replay_json(capsys, path)  # JSON stays JSON: the same values, escaped
    assert replay["diagnostics"]["model"] == "q" + CONTROLS
    status, out, _ = _replay(capsys, path, "--json")
    assert not {"\x1b", "\x07", "\u009b", "\u202e"} & set(out)


def test_a_capture_without_end_is_refused_in_one_line(capsys, monkeypatch):
    """`replay /dev/zero` grew to 1.8 GB: what it reads is bounded (here at 1 MiB)."""
    monkeypatch.setattr("proxy.diagnose.capture.MAX_CAPTURE_BYTES", 1024 * 1024)
    status, out, err = _replay(capsys, "/dev/zero")
    assert (status, out) == (2, "")
    assert err == ("toolcall-proxy replay: /dev/zero is larger than 1 MiB: replay a part of "
                   "it (the lines of one request id, say)\n")


def test_bad_jsonl_line_is_named(capsys, tmp_path):
    good = json.dumps({"request": _request(), "response": vllm_completion("x")})
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n\n{good}\n{{oops\n")
    status, _, err = _replay(capsys, path)
    assert status == 2
    assert f"{path}:4: not valid JSON" in err


# Nothing left once the proxy left out a parsed call whose arguments are beyond repair.
EMPTY = vllm_completion(None, tool_calls=[vllm_tool_call("read", '{"path": ')])


@pytest.mark.parametrize(("response", "code"), [
    ({"object": "chat.completion"}, "upstream_bad_shape"),
    ({"choices": [{"index": 0, "finish_reason": "stop"}]}, "upstream_bad_shape"),
    ("<html>502 Bad Gateway</html>", "upstream_invalid_json"),  # the raw body, not JSON
])
def test_an_answer_the_proxy_refuses_replays_as_its_502(capsys, tmp_path, response, code):
    path = _capture(tmp_path / "c.json", {"request": _request(), "response": response})
    [replay] = _replay_json(capsys, path)
    assert replay["status"] == 502
    assert replay["content_type"] == "application/json"
    error = json.loads(replay["output"])["error"]
    assert (error["type"], error["code"]) == ("upstream_error", code)
    assert replay["diagnostics"]["upstream_error"]["code"] == code

    status, out, err = _replay(capsys, path)
    assert (status, err) == (0, "")
    assert "-- the proxy would send: HTTP 502, application/json --" in out
    assert f'"code":"{code}"' in out


def test_an_answer_left_empty_is_an_empty_turn_not_an_error(capsys, tmp_path):
    # Issue 26, item 6: never a 5xx because a call was left out.
    for stream in (False, True):
        path = _capture(tmp_path / "c.json", {"request": _request(stream=stream),
                                              "response": EMPTY})
        [replay] = _replay_json(capsys, path)
        assert replay["status"] == 200
        assert replay["diagnostics"]["left_as_text"] == [
            {"format": "native", "reason": "arguments_not_object", "tool": "read"}]
        if not stream:
            choice = json.loads(replay["output"])["choices"][0]
            assert (choice["message"]["content"], choice["finish_reason"]) == (None, "stop")
            continue
        events = _events(replay["output"])
        assert events[-1] == "[DONE]"
        assert not any("error" in e for e in events if isinstance(e, dict))
        assert [e["choices"][0]["finish_reason"] for e in events[:-1]
                if isinstance(e, dict) and e.get("choices")][-1] == "stop"


def _log_line(request: dict[str, Any], response: Any = None, **facts: Any) -> dict[str, Any]:
    """A proxy log line written with log_bodies (the response only when one was captured)."""
    bodies = {"request": request} if response is None else {"request": request,
                                                          "response": response}
    return {"request_id": "r", "path": "/v1/chat/completions", "mode": "buffered", **facts,
            "bodies": bodies}


def test_log_lines_without_an_upstream_response_are_reported_and_the_rest_replayed(
        capsys, tmp_path):
    path = _capture(tmp_path / "proxy.jsonl",
                    _log_line(_request(), status=502, error="upstream_unreachable"),
                    _log_line(_request(), vllm_completion(HERMES_READ), status=200,
                              upstream_status=200),
                    _log_line(_request(stream=True), status=200, upstream_status=200,
                              error="upstream_empty_answer"),
                    jsonl=True)
    first, second, third = _replay_json(capsys, path)
    assert first["replayed"] is False
    assert first["unsupported"] is False  # nothing to replay, which is no failure of replay
    assert (first["status"], first["output"]) == (502, "")
    assert first["diagnostics"]["not_replayable"] == {
        "reason": "no upstream response captured", "status": 502,
        "error": "upstream_unreachable", "upstream_status": None}
    assert second["replayed"] is True
    assert second["diagnostics"]["tool_calls"] == 1
    assert third["diagnostics"]["not_replayable"]["error"] == "upstream_empty_answer"

    status, out, err = _replay(capsys, path)
    assert (status, err) == (0, "")
    assert ("replay      not replayable: no upstream response captured (status 502, error "
            "upstream_unreachable)") in out.splitlines()
    assert out.count("-- the proxy would send:") == 1


def test_a_log_line_with_an_upstream_error_replays_as_the_proxy_relays_it(capsys, tmp_path):
    envelope = {"object": "error", "message": "context too long", "type": "BadRequestError",
                "param": None, "code": 400}
    path = _capture(tmp_path / "proxy.jsonl",
                    _log_line(_request(), envelope, status=400, upstream_status=400,
                              error="400"), jsonl=True)
    [replay] = _replay_json(capsys, path)
    assert replay["status"] == 400
    assert json.loads(replay["output"]) == {"error": {
        "message": "context too long", "type": "BadRequestError", "param": None, "code": "400"}}


@pytest.mark.integration
@pytest.mark.parametrize("stream", [True, False])
def test_replay_of_an_empty_answer_matches_the_server(capsys, tmp_path, fake, start_proxy,
                                                      stream):
    # A commit window of 0 and a slower upstream: the stream starts before the answer, as
    # with any real generation.
    proxy = start_proxy(commit_window_seconds=0)
    request = _request(stream=stream)
    fake.answer(Answer(body=EMPTY, delay=0.3))
    served = requests.post(proxy.url + "/v1/chat/completions", json=request, timeout=20)
    [replay] = _replay_json(capsys, _capture(tmp_path / "c.json",
                                             {"request": request, "response": EMPTY}))
    assert replay["status"] == served.status_code
    assert replay["content_type"].split(";")[0] == served.headers["Content-Type"].split(";")[0]
    if stream:
        ours, theirs = _events(replay["output"]), _events(served.text)
        for chunk in (*ours, *theirs):
            if isinstance(chunk, dict) and "id" in chunk:
                chunk.update(id="*", created=0)
        assert ours == theirs
    else:
        assert json.loads(replay["output"]) == served.json()


def test_missing_file_and_bad_config(capsys, tmp_path):
    status, _, err = _replay(capsys, tmp_path / "nope.json")
    assert status == 2
    assert err == f"toolcall-proxy replay: cannot read {tmp_path / 'nope.json'}: " \
                  "No such file or directory\n"

    config = tmp_path / "config.json"
    config.write_text('{"formats": ["klingon"]}')
    status, _, err = _replay(capsys, STREAM_CAPTURE, "--config", config)
    assert status == 2
    assert "unknown tool-call format 'klingon'" in err


def test_errors_never_print_a_traceback_from_a_subprocess(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{broken")
    done = subprocess.run([sys.executable, "app.py", "replay", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
