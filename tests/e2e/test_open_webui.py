"""Open WebUI, real, in front of the proxy before the fake vLLM: the `open-webui` package from
PyPI (0.12.4, the newest release; it runs on the CPU build of PyTorch 2.13.0 this machine's
pip holds, installed first) in a venv of its own, served (`open-webui serve`) on loopback with
a data folder of the test's own, offline. Its admin is made through its sign-up API; both its
connections point at the proxy, as its Connections page saves them: the Ollama API at the
proxy's base URL (Open WebUI asks `/api/tags`, `/api/ps`, `/api/version` and `/api/chat`
there; the proxy serves one app on its main port and on `ollama_port`, so the test's one port
stands for both) and the OpenAI API at its `/v1`. Driven through the HTTP API its pages use
(`/api/models`, the Connections checks, `/api/v1/tools/create`, `/api/chat/completions`):

- the model list comes through the proxy on both connections, and both checks pass;
- the key field of each connection carries the proxy's key; a wrong one lists nothing;
- a plain chat, streamed and not, on each connection;
- a call the model writes as text (Hermes, a trailing comma to repair) reaches Open WebUI as
  a structured call, streamed and not, on each connection, and the proxy logs the repair;
- a workspace tool with native function calling (Open WebUI's default since 0.10; it runs
  tools on its streaming path, which its chat page always takes): in a new chat, Open WebUI
  runs the call the model wrote as text, sends the result back, and saves the model's final
  words as the answer, in both of the proxy's stream modes; two calls in one answer both run;
- and once in headless Chromium (Debian's, playwright): the chat page, the tool chosen, the
  question sent, the tool's result listed and the final words shown.

`make e2e` installs it (`make webui-e2e-env`: a venv under ~/.cache/toolcall-proxy-e2e,
once, 2.9 GB, 2 to 11 minutes); skipped, saying so, without it. One Open WebUI serves the
module (it starts in 30 to 60 s); each test points its connections at a proxy of its own."""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WEATHER_TOOL
from tests.e2e.open_webui import (
    CHROMIUM,
    CHROMIUM_ARGS,
    INSTALLED,
    OPENAI_PREFIX,
    WEBUI_HOME,
    WEBUI_VERSION,
    OpenWebUI,
    chat_page_url,
    streamed_message,
)
from tests.fake_vllm import MODEL, Answer, Received, vllm_answer, vllm_completion

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

HELLO = "Hello from the fake model."
TEXT_CALL = ('Let me look.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris",}}'
             "</tool_call>")
TWO_CALLS = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
             '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>')
AFTER_TOOL = "The tool answered:"
CONNECTIONS = {"ollama": MODEL, "openai": f"{OPENAI_PREFIX}.{MODEL}"}
WEATHER_SOURCE = '''\
"""
title: Weather (e2e)
"""


class Tools:
    def get_weather(self, city: str) -> str:
        """
        Current weather for a city.
        :param city: the city
        """
        return f"MARKER: sunny in {city}"
'''


@pytest.fixture(scope="module")
def open_webui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenWebUI]:
    if not INSTALLED.exists():
        pytest.skip(f"Open WebUI {WEBUI_VERSION} is not installed at {WEBUI_HOME}: "
                    "`make webui-e2e-env` (part of `make e2e`) installs it")
    started = time.monotonic()
    webui = OpenWebUI(tmp_path_factory.mktemp("open-webui"))
    try:
        webui.wait_ready()
        assert webui.sign_up_admin()["role"] == "admin"
        print(f"Open WebUI {WEBUI_VERSION} up, admin made, in "
              f"{time.monotonic() - started:.1f} s")
        yield webui
    finally:
        webui.stop()


def _fake_model(received: Received, call: str = TEXT_CALL) -> Answer:
    """Plain text without tools; with tools, `call` (the weather call written as Hermes text,
    a trailing comma in its arguments) or, after the tools' results, words built from them."""
    messages = received.json["messages"]
    if messages[-1]["role"] == "tool":
        results = [m["content"] for m in messages[messages.index(_last_call(messages)) + 1:]]
        return vllm_answer(vllm_completion(f"{AFTER_TOOL} {'; '.join(results)}"))(received)
    if received.json.get("tools"):
        return vllm_answer(vllm_completion(call))(received)
    return vllm_answer(vllm_completion(HELLO))(received)


def _last_call(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return [m for m in messages if m.get("tool_calls")][-1]


def _new_chat(webui: OpenWebUI, model: str, tool_id: str, question: str) -> str:
    """A new chat as the chat page starts one (`parent_id: null`, the user's message and
    the assistant's placeholder by id, streamed), the workspace tool selected: the id of
    the assistant's message, saved once the turn (and its tools) ended."""
    user_id, reply_id = str(uuid.uuid4()), str(uuid.uuid4())
    answer = webui.complete({
        "model": model, "stream": True, "tool_ids": [tool_id],
        "messages": [{"role": "user", "content": question}], "parent_id": None,
        "id": reply_id, "user_message": {"id": user_id, "role": "user", "content": question,
                                         "parentId": None, "childrenIds": [],
                                         "models": [model]}})
    assert answer.status_code == 200, answer.text
    assert answer.json() is None  # the chat page reads the answer as it is saved
    return reply_id


def _turns(log_lines, count: int) -> list[dict[str, Any]]:
    return [line for line in log_lines(count) if line.get("model") == MODEL]


def test_the_model_list_comes_through_the_proxy(fake, start_proxy, open_webui, log_lines):
    proxy = start_proxy(log_level="info")
    open_webui.connect(proxy.url)
    listed = {model["id"]: model for model in open_webui.models()}
    assert listed[CONNECTIONS["ollama"]]["owned_by"] == "ollama"
    assert listed[CONNECTIONS["openai"]]["owned_by"] == "openai"
    paths = {line["path"] for line in log_lines(3)}
    assert {"/api/tags", "/api/ps", "/v1/models"} <= paths, paths
    assert open_webui.get("/ollama/api/version")["version"] == "0.33.0"
    checked = open_webui.verify("ollama", proxy.url)
    assert (checked.status_code, checked.json()) == (200, {"version": "0.33.0"})
    checked = open_webui.verify("openai", proxy.url + "/v1", "sk-any")
    assert checked.status_code == 200, checked.text
    assert [model["id"] for model in checked.json()["data"]] == [MODEL]
    tags = open_webui.get("/ollama/api/tags")["models"]
    assert [model["model"] for model in tags] == [MODEL]


def test_a_key_on_the_proxy_is_sent_by_both_connections(fake, start_proxy, open_webui):
    """Open WebUI 0.12's Ollama connection has a key field (sent as `Authorization: Bearer`):
    with the proxy's key both connections list and chat; with a wrong one, neither lists
    (the proxy's 401, on `/api/tags` too) and the Connections check says why."""
    proxy = start_proxy(api_keys=["sk-webui"])
    fake.answer(_fake_model)
    open_webui.connect(proxy.url, key="sk-wrong")
    assert not {CONNECTIONS["ollama"], CONNECTIONS["openai"]} & {
        model["id"] for model in open_webui.models()}
    checked = open_webui.verify("ollama", proxy.url, "sk-wrong")
    assert checked.status_code == 500
    assert "External Error" in checked.json()["detail"], checked.text
    open_webui.connect(proxy.url, key="sk-webui")
    assert {CONNECTIONS["ollama"], CONNECTIONS["openai"]} <= {
        model["id"] for model in open_webui.models()}
    for model in CONNECTIONS.values():
        answer = open_webui.complete({"model": model, "stream": False,
                                      "messages": [{"role": "user", "content": "Hi."}]})
        assert answer.json()["choices"][0]["message"]["content"] == HELLO, answer.text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
@pytest.mark.parametrize("connection", ["ollama", "openai"])
def test_a_plain_chat(fake, start_proxy, open_webui, connection, stream):
    proxy = start_proxy()
    open_webui.connect(proxy.url)
    open_webui.models()
    fake.answer(_fake_model)
    answer = open_webui.complete({"model": CONNECTIONS[connection], "stream": stream,
                                  "messages": [{"role": "user", "content": "Say hello."}]})
    assert answer.status_code == 200, answer.text
    if stream:
        message = streamed_message(answer)
        assert message["content"] == HELLO
    else:
        message = answer.json()["choices"][0]["message"]
        assert message["content"] == HELLO
    assert fake.chat_requests()[-1].json["messages"][-1]["content"] == "Say hello."


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
@pytest.mark.parametrize("connection", ["ollama", "openai"])
def test_a_call_written_as_text_reaches_open_webui_as_a_call(fake, start_proxy, open_webui,
                                                             log_lines, connection, stream):
    proxy = start_proxy(log_level="info")
    open_webui.connect(proxy.url)
    open_webui.models()
    fake.answer(_fake_model)
    answer = open_webui.complete({
        "model": CONNECTIONS[connection], "stream": stream, "tools": [WEATHER_TOOL],
        "messages": [{"role": "user", "content": "Weather in Paris?"}]})
    assert answer.status_code == 200, answer.text
    if stream:
        message = streamed_message(answer)
        calls = message["tool_calls"]
    else:
        message = answer.json()["choices"][0]["message"]
        calls = [call["function"] for call in message["tool_calls"]]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Paris"})]
    assert "<tool_call>" not in (message["content"] or "")
    assert fake.chat_requests()[-1].json["tools"][0]["function"]["name"] == "get_weather"
    (turn,) = [line for line in _turns(log_lines, 4) if line.get("tool_calls")]
    assert turn["path"] == ("/api/chat" if connection == "ollama" else "/v1/chat/completions")
    assert turn["formats"] == ["hermes"]
    assert turn["repairs"] == ["hermes:trailing_comma:get_weather"]


@pytest.mark.parametrize("mode", ["buffer", "stream"])
@pytest.mark.parametrize("connection", ["ollama", "openai"])
def test_a_workspace_tool_runs_and_its_answer_shows(fake, start_proxy, open_webui, log_lines,
                                                    connection, mode):
    """Open WebUI runs the call the model wrote as text, sends its result back, and saves
    the final answer in the chat."""
    proxy = start_proxy(stream_mode=mode, log_level="info")
    open_webui.connect(proxy.url)
    open_webui.models()
    tool_id = f"weather_{secrets.token_hex(3)}"
    open_webui.add_tool(tool_id, "Weather (e2e)", WEATHER_SOURCE)
    fake.answer(_fake_model)
    reply_id = _new_chat(open_webui, CONNECTIONS[connection], tool_id,
                         "What is the weather in Paris?")
    sent = [received.json for received in fake.chat_requests()]
    assert len(sent) == 2, open_webui.tail()
    assert [t["function"]["name"] for t in sent[0]["tools"]] == ["get_weather"]
    call, result = sent[1]["messages"][-2:]
    assert [c["function"]["name"] for c in call["tool_calls"]] == ["get_weather"]
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert result == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
                      "content": "MARKER: sunny in Paris"}
    reply = open_webui.saved_message(reply_id)
    assert reply["done"] is True
    assert reply["content"] == f"Let me look.\n{AFTER_TOOL} MARKER: sunny in Paris"
    ran = [item for item in reply["output"] if item["type"].startswith("function_call")]
    assert [(item["type"], item.get("name")) for item in ran] == [
        ("function_call", "get_weather"), ("function_call_output", None)]
    assert ran[1]["output"] == [{"type": "input_text", "text": "MARKER: sunny in Paris"}]
    assert "<tool_call>" not in json.dumps(reply)
    turns = _turns(log_lines, 4)
    assert [line["path"] for line in turns] == [
        "/api/chat" if connection == "ollama" else "/v1/chat/completions"] * 2
    assert [line["repairs"] for line in turns] == [["hermes:trailing_comma:get_weather"], []]
    assert {line["mode"] for line in turns} == {"buffered" if mode == "buffer" else "streamed"}


@pytest.mark.parametrize("connection", ["ollama", "openai"])
def test_two_calls_in_one_turn_both_run(fake, start_proxy, open_webui, log_lines, connection):
    """Two calls written as text in one answer: each reaches Open WebUI as a call of its own
    (its own index in the stream), each runs, and each result answers its own call."""
    proxy = start_proxy(log_level="info")
    open_webui.connect(proxy.url)
    open_webui.models()
    tool_id = f"weather_{secrets.token_hex(3)}"
    open_webui.add_tool(tool_id, "Weather (e2e)", WEATHER_SOURCE)
    fake.answer(lambda received: _fake_model(received, TWO_CALLS))
    reply_id = _new_chat(open_webui, CONNECTIONS[connection], tool_id,
                         "Weather in Paris and in Oslo?")
    sent = [received.json for received in fake.chat_requests()]
    assert len(sent) == 2, open_webui.tail()
    call = _last_call(sent[1]["messages"])
    results = sent[1]["messages"][-2:]
    assert [json.loads(c["function"]["arguments"]) for c in call["tool_calls"]] == [
        {"city": "Paris"}, {"city": "Oslo"}]
    assert [(r["tool_call_id"], r["content"]) for r in results] == [
        (c["id"], f"MARKER: sunny in {city}")
        for c, city in zip(call["tool_calls"], ("Paris", "Oslo"), strict=True)]
    reply = open_webui.saved_message(reply_id)
    assert reply["content"].endswith(
        f"{AFTER_TOOL} MARKER: sunny in Paris; MARKER: sunny in Oslo")
    (first, _) = _turns(log_lines, 4)
    assert first["tool_calls"] == 2


def test_in_chromium_the_tool_runs_and_its_answer_shows(fake, start_proxy, open_webui,
                                                       tmp_path: Path):
    """Once as a person sees it: the chat page in headless Chromium (Debian's, driven by
    playwright), signed in as the admin, the model on the Ollama connection and the
    workspace tool chosen, the question sent with Enter. The call the model wrote as text
    runs (its result is listed under the answer) and the final words show."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (Debian's chromium package)")
    playwright = pytest.importorskip("playwright.sync_api")
    proxy = start_proxy(stream_mode="stream")
    open_webui.connect(proxy.url)
    open_webui.models()
    tool_id = f"weather_{secrets.token_hex(3)}"
    open_webui.add_tool(tool_id, "Weather (e2e)", WEATHER_SOURCE)
    fake.answer(_fake_model)
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.add_init_script(  # signed in: the token where its sign-in page puts it
                f"localStorage.setItem('token', {json.dumps(open_webui.token)})")
            page = context.new_page()
            page.goto(chat_page_url(open_webui, CONNECTIONS["ollama"], tool_id,
                                    "What is the weather in Paris?"))
            page.get_by_text("Okay, Let's Go!").click(timeout=60_000)  # What's new, once
            page.locator("#chat-input").click()
            page.keyboard.press("Enter")
            answer = page.get_by_text(f"{AFTER_TOOL} MARKER: sunny in Paris")
            playwright.expect(answer).to_be_visible(timeout=60_000)
            playwright.expect(page.get_by_text("View Result from get_weather")).to_be_visible()
            assert "<tool_call>" not in page.content()
            page.screenshot(path=str(tmp_path / "open-webui-chat.png"))
        finally:
            browser.close()
    results = [m for r in fake.chat_requests() if r.json.get("tools")
               for m in r.json["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in results] == ["MARKER: sunny in Paris"]
