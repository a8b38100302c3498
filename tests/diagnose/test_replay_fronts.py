"""`replay` for every front: captures made by the real server (`log_bodies` on, the proxy
before the fake vLLM, a turn made with the official SDK) replay to what that front sent its
client: Anthropic's message or events, a Responses object or events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import ollama
import orjson
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.responses import Response
from pydantic import TypeAdapter

import app
from tests.fake_vllm import Answer, vllm_answer, vllm_completion, vllm_error
from tests.turn.test_context_window import PROMPT_ALONE, VLLM_EARLIER

CALL = '<tool_call>{"name": "read", "arguments": {"path": "/etc/hosts",}}</tool_call>'
ANSWER = vllm_completion("Let me look." + CALL, reasoning="The user wants a file.")
READ_ANTHROPIC = {"name": "read", "input_schema": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
READ_RESPONSES = {"type": "function", "name": "read", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
MINTED = {"id", "call_id", "created", "created_at", "item_id"}  # minted on each turn
STREAM_EVENT = TypeAdapter(RawMessageStreamEvent)


def _masked(value: Any) -> Any:
    """`value` without what is minted afresh on every turn (ids, the creation time)."""
    if isinstance(value, dict):
        return {k: "*" if k in MINTED else _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _proxy(start_proxy, tmp_path: Path, **settings: Any):
    """The real server, writing each turn's capture in its log line (`log_bodies`)."""
    return start_proxy(log_bodies=True, log_level="info",
                       responses_store_path=str(tmp_path / "r.sqlite3"), **settings)


def _claude(proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0,
                               timeout=20)


def _replay(capsys, tmp_path: Path, *lines: dict[str, Any],
            config: Path | None = None) -> tuple[int, list[dict[str, Any]], str]:
    """The log lines as a JSONL capture, replayed by `app.py replay --json`: exit status,
    the replays, stderr."""
    path = tmp_path / "proxy.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    status = app.main(["replay", str(path), "--json",
                       *(["--config", str(config)] if config else [])])
    out, err = capsys.readouterr()
    return status, [json.loads(line) for line in out.splitlines()], err


def _events(sse: str) -> list[dict[str, Any]]:
    """A named-event stream's payloads, each under its own `event:` name."""
    out = []
    for frame in sse.split("\n\n"):
        if frame and not frame.startswith(":"):
            name, data = frame.split("\n")
            event = json.loads(data.removeprefix("data: "))
            assert name == "event: " + event["type"]
            out.append(event)
    return out


def _assembled(sse: str) -> Message:
    """The message Anthropic's SDK adds up from a stream's events."""
    snapshot, buffers = None, {}
    for event in _events(sse):
        if event["type"] != "ping":
            snapshot = accumulate_event(event=STREAM_EVENT.validate_python(event),
                                        current_snapshot=snapshot, json_bufs=buffers)
    return snapshot


# -- Chat Completions -------------------------------------------------------------------------


@pytest.mark.integration
def test_a_streamed_chat_turn_replays_to_the_chunks_the_client_got(
        capsys, tmp_path, fake, start_proxy, log_lines):
    proxy = _proxy(start_proxy, tmp_path)
    fake.answer(Answer(body=ANSWER))
    got = list(proxy.client().chat.completions.create(
        model="qwen", messages=[{"role": "user", "content": "Read /etc/hosts"}],
        tools=[{"type": "function", "function": {k: v for k, v in READ_RESPONSES.items()
                                                 if k != "type"}}], stream=True))
    (line,) = log_lines(1)
    assert line["front"] == "chat"
    status, [replay], _ = _replay(capsys, tmp_path, line)
    assert (status, replay["content_type"]) == (0, "text/event-stream")
    frames = replay["output"].split("\n\n")[:-1]
    assert frames[-1] == "data: [DONE]"
    replayed = [json.loads(frame.removeprefix("data: ")) for frame in frames[:-1]]
    assert _masked(replayed) == _masked([c.model_dump(exclude_unset=True) for c in got])


# -- Messages (Claude Code) -------------------------------------------------------------------


@pytest.mark.integration
def test_a_messages_turn_replays_to_the_message_the_client_got(
        capsys, tmp_path, fake, start_proxy, log_lines):
    proxy = _proxy(start_proxy, tmp_path)
    fake.answer(Answer(body=ANSWER))
    got = _claude(proxy).messages.create(
        model="qwen", max_tokens=512, tools=[READ_ANTHROPIC],
        messages=[{"role": "user", "content": "Read /etc/hosts"}])
    assert [block.type for block in got.content] == ["thinking", "text", "tool_use"]
    (line,) = log_lines(1)
    assert (line["front"], line["path"]) == ("messages", "/v1/messages")
    status, [replay], err = _replay(capsys, tmp_path, line)
    assert (status, err, replay["status"]) == (0, "", 200)
    replayed = Message.model_validate(json.loads(replay["output"]))
    assert _masked(replayed.model_dump()) == _masked(got.model_dump())
    assert replay["diagnostics"]["front"] == "messages"
    assert replay["diagnostics"]["repairs"] == [
        {"format": "hermes", "repair": "trailing_comma", "tool": "read"}]
    # What went upstream is a translation, which replay shows whole, not as a diff.
    assert replay["diagnostics"]["upstream_body"] == fake.chat_requests()[-1].json
    assert replay["diagnostics"]["upstream_changes"] is None


@pytest.mark.integration
def test_a_streamed_messages_turn_replays_to_the_events_the_client_got(
        capsys, tmp_path, fake, start_proxy, log_lines):
    proxy = _proxy(start_proxy, tmp_path)
    fake.answer(Answer(body=ANSWER))
    with _claude(proxy).messages.stream(
            model="qwen", max_tokens=512, tools=[READ_ANTHROPIC],
            messages=[{"role": "user", "content": "Read /etc/hosts"}]) as stream:
        kinds = [event.type for event in stream]
        got = stream.get_final_message()
    (line,) = log_lines(1)
    status, [replay], _ = _replay(capsys, tmp_path, line)
    assert (status, replay["content_type"]) == (0, "text/event-stream")
    events = _events(replay["output"])
    assert [e["type"] for e in events] == [k for k in kinds if k in {e["type"] for e in events}]
    assert _masked(_assembled(replay["output"]).model_dump()) == _masked(got.model_dump())


@pytest.mark.integration
def test_a_streamed_mode_messages_turn_replays_to_the_same_message(
        capsys, tmp_path, fake, start_proxy, log_lines):
    """The streamed mode sends text live; the capture holds the completion it added up to,
    and replay renders it through the same writer."""
    proxy = _proxy(start_proxy, tmp_path, stream_mode="stream")
    fake.answer(vllm_answer(ANSWER, size=5))
    with _claude(proxy).messages.stream(
            model="qwen", max_tokens=512, tools=[READ_ANTHROPIC],
            messages=[{"role": "user", "content": "Read /etc/hosts"}]) as stream:
        got = stream.get_final_message()
    (line,) = log_lines(1)
    assert line["mode"] == "streamed"
    config = tmp_path / "config.json"
    config.write_text('{"stream_mode": "stream"}')
    status, [replay], _ = _replay(capsys, tmp_path, line, config=config)
    assert (status, replay["diagnostics"]["mode"]) == (0, "streamed")
    assert _masked(_assembled(replay["output"]).model_dump()) == _masked(got.model_dump())


@pytest.mark.integration
def test_a_refusal_replays_in_anthropic_s_envelope_and_words(
        capsys, tmp_path, fake, start_proxy, log_lines):
    proxy = _proxy(start_proxy, tmp_path)
    fake.answer(vllm_error(400, PROMPT_ALONE[4]))  # llama.cpp's words
    with pytest.raises(anthropic.BadRequestError) as refused:
        _claude(proxy).messages.create(model="qwen", max_tokens=64,
                                       messages=[{"role": "user", "content": "x"}])
    (line,) = log_lines(1)
    status, [replay], _ = _replay(capsys, tmp_path, line)
    assert status == 0
    assert replay["status"] == refused.value.status_code == 400
    assert json.loads(replay["output"]) == refused.value.body
    assert refused.value.body["error"]["message"].startswith("prompt is too long")


# -- Responses (Codex) -----------------------------------------------------------------------


@pytest.mark.integration
def test_a_responses_turn_replays_to_the_response_the_client_got(
        capsys, tmp_path, fake, start_proxy, log_lines):
    proxy = _proxy(start_proxy, tmp_path)
    fake.answer(Answer(body=ANSWER))
    got = proxy.client().responses.create(model="qwen", input="Read /etc/hosts",
                                          tools=[READ_RESPONSES])
    assert [item.type for item in got.output] == ["reasoning", "message", "function_call"]
    (line,) = log_lines(1)
    assert line["front"] == "responses"
    status, [replay], err = _replay(capsys, tmp_path, line)
    assert (status, err, replay["status"]) == (0, "", 200)
    replayed = Response.model_validate(json.loads(replay["output"]))
    assert _masked(replayed.model_dump()) == _masked(got.model_dump())
    assert replay["diagnostics"]["front"] == "responses"


@pytest.mark.integration
def test_a_streamed_responses_turn_replays_to_the_events_the_client_got(
        capsys, tmp_path, fake, start_proxy, log_lines):
    proxy = _proxy(start_proxy, tmp_path)
    fake.answer(Answer(body=ANSWER))
    got = list(proxy.client().responses.create(model="qwen", input="Read /etc/hosts",
                                               tools=[READ_RESPONSES], stream=True))
    (line,) = log_lines(1)
    status, [replay], _ = _replay(capsys, tmp_path, line)
    assert status == 0
    events = _events(replay["output"])
    assert [e["type"] for e in events] == [e.type for e in got]
    assert _masked(events) == _masked([e.model_dump(exclude_unset=True) for e in got])


@pytest.mark.integration
def test_a_continued_conversation_replays_from_what_the_store_recalled(
        capsys, tmp_path, fake, start_proxy, log_lines):
    proxy = _proxy(start_proxy, tmp_path)
    client = proxy.client()
    fake.answer(Answer(body=ANSWER))
    first = client.responses.create(model="qwen", input="Read /etc/hosts",
                                    tools=[READ_RESPONSES])
    call = first.output[-1]
    fake.answer(Answer(body=vllm_completion("It holds localhost.")))
    got = client.responses.create(
        model="qwen", previous_response_id=first.id, tools=[READ_RESPONSES],
        input=[{"type": "function_call_output", "call_id": call.call_id,
                "output": "127.0.0.1 localhost"}])
    _, second = log_lines(2)
    assert list(second["bodies"]["recalled"]) == [first.id]
    status, [replay], err = _replay(capsys, tmp_path, second)
    assert (status, err) == (0, "")
    replayed = Response.model_validate(json.loads(replay["output"]))
    assert _masked(replayed.model_dump()) == _masked(got.model_dump())
    # The conversation the store gave the front went upstream, as the server sent it.
    assert replay["diagnostics"]["upstream_body"] == fake.chat_requests()[-1].json

    # A capture without what the store recalled cannot be replayed: said, and exit 3.
    del second["bodies"]["recalled"]
    status, [replay], err = _replay(capsys, tmp_path, second)
    assert status == 3
    assert replay["replayed"] is False
    assert err.count("\n") == 1
    assert err.startswith(f"toolcall-proxy replay: {tmp_path / 'proxy.jsonl'}: cannot "
                          f"replay: the request continues the stored answer '{first.id}'")


# -- Ollama (Home Assistant, the ollama client) ----------------------------------------------

READ_OLLAMA = {"type": "function", "function": {k: v for k, v in READ_RESPONSES.items()
                                                if k != "type"}}
OLLAMA_MINTED = {"created_at", "total_duration", "eval_duration"}  # minted on each turn


def _ollama_masked(value: Any) -> Any:
    """An Ollama object without what differs between any two turns (its times)."""
    return {k: v for k, v in value.items() if k not in OLLAMA_MINTED}


@pytest.mark.integration
@pytest.mark.parametrize("stream", [False, True])
def test_an_ollama_turn_replays_to_what_the_client_got(
        capsys, tmp_path, fake, start_proxy, log_lines, stream):
    proxy = _proxy(start_proxy, tmp_path)
    fake.answer(Answer(body=ANSWER))
    client = ollama.Client(host=proxy.url, timeout=20)
    answer = client.chat("qwen", [{"role": "user", "content": "Read /etc/hosts"}],
                         tools=[READ_OLLAMA], stream=stream)
    got = [part.model_dump(exclude_none=True) for part in (answer if stream else [answer])]
    (line,) = log_lines(1)
    assert (line["front"], line["path"]) == ("ollama", "/api/chat")
    status, [replay], err = _replay(capsys, tmp_path, line)
    assert (status, err, replay["status"]) == (0, "", 200)
    assert replay["content_type"] == ("application/x-ndjson" if stream else "application/json")
    replayed = [ollama.ChatResponse(**json.loads(text)).model_dump(exclude_none=True)
                for text in replay["output"].splitlines()]
    assert [_ollama_masked(part) for part in replayed] == [_ollama_masked(p) for p in got]
    assert got[-1]["message"]["tool_calls"] if not stream else got[-2]["message"]["tool_calls"]
    assert replay["diagnostics"]["front"] == "ollama"
    assert replay["diagnostics"]["repairs"] == [
        {"format": "hermes", "repair": "trailing_comma", "tool": "read"}]


def test_a_request_the_front_answers_itself_replays_to_its_answer(capsys, tmp_path):
    line = {"front": "ollama", "path": "/api/chat", "status": 200,
            "bodies": {"request": {"model": "qwen", "messages": [], "keep_alive": 0}}}
    status, [replay], err = _replay(capsys, tmp_path, line)
    assert (status, err, replay["status"]) == (0, "", 200)
    assert json.loads(replay["output"])["done_reason"] == "unload"
    assert (replay["diagnostics"]["mode"], replay["diagnostics"]["upstream_body"]) == (
        "answered", None)


# -- what cannot be replayed ------------------------------------------------------------------


@pytest.mark.parametrize(("naming", "reason"), [
    ({"front": "gemini"}, "the front 'gemini' is not one this proxy serves"),
    ({"path": "/v1/embeddings"}, "/v1/embeddings is no front's path"),
])
def test_a_capture_naming_no_front_this_proxy_serves_exits_3(capsys, tmp_path, naming, reason):
    line = {**naming, "status": 200, "bodies": {"request": {"model": "q"},
                                                "response": vllm_completion("x")}}
    good = {"path": "/v1/messages", "status": 200, "bodies": {
        "request": {"model": "q", "max_tokens": 9, "messages": [{"role": "user",
                                                                "content": "hi"}]},
        "response": vllm_completion("Hello!")}}
    status, (first, second), err = _replay(capsys, tmp_path, line, good)
    assert status == 3
    assert (first["replayed"], first["unsupported"]) == (False, True)
    assert (second["replayed"], second["unsupported"]) == (True, False)
    said = first["diagnostics"]["not_replayable"]["reason"]
    assert said.startswith(reason)
    assert err.splitlines() == [f"toolcall-proxy replay: {tmp_path / 'proxy.jsonl'}:1: "
                                f"cannot replay: {said}"]
    # The rest of the file still replays: a capture naming its path is that path's front.
    assert json.loads(second["output"])["content"] == [{"type": "text", "text": "Hello!"}]
    assert second["diagnostics"]["front"] == "messages"


def test_the_human_report_names_the_front(capsys, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(orjson.dumps({"front": "responses", "request": {
        "model": "q", "input": "hi", "tools": [READ_RESPONSES]},
        "response": vllm_completion(CALL)}).decode())
    status = app.main(["replay", str(path)])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert "front       responses" in lines
    assert "upstream    the request translated to a chat completion  (the whole body: --json)" \
        in lines
    assert "tool calls  1: read {\"path\":\"/etc/hosts\"} [hermes]" in lines
    body = json.loads(lines[-1])
    assert body["object"] == "response"
    assert body["output"][-1]["type"] == "function_call"


def test_a_captured_context_window_refusal_says_the_server_asks_again(capsys, tmp_path):
    """The capture's last answer is a refusal the server would ask again for; what it sends
    if that is refused too is the front's word for it (OpenAI's code on chat)."""
    refusal = {"error": {"message": VLLM_EARLIER, "type": "BadRequestError", "param": None,
                         "code": 400}}
    line = {"front": "chat", "status": 400, "upstream_status": 400, "bodies": {
        "request": {"model": "q", "max_tokens": 32000, "tools": [{
            "type": "function", "function": {"name": "read", "parameters": {}}}],
            "messages": [{"role": "user", "content": "hi"}]},
        "response": refusal}}
    status, [replay], _ = _replay(capsys, tmp_path, line)
    assert (status, replay["status"]) == (0, 400)
    assert json.loads(replay["output"])["error"]["code"] == "context_length_exceeded"
    assert replay["diagnostics"]["notes"][0].startswith(
        "the context window refused the completion asked: the server asks again")
