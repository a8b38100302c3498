"""`python app.py doctor` against the fake vLLM in each shape a real server takes."""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fake_vllm import Answer, FakeVLLM, Received, vllm_completion, vllm_error, vllm_tool_call

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]

HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
QWEN_XML = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "</function>\n</tool_call>")


def _doctor(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "app.py", "doctor", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _report(url: str, *args: str) -> dict:
    done = _doctor("--upstream", url, "--json", *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def _by_choice(auto: Answer, none: Answer) -> Callable[[Received], Answer]:
    """The fake's answer depends on the probe: tool_choice auto or none."""
    return lambda r: auto if r.json.get("tool_choice") == "auto" else none


@pytest.fixture
def start_fake() -> Iterator[Callable[..., FakeVLLM]]:
    started: list[FakeVLLM] = []

    def start(**kwargs: object) -> FakeVLLM:
        server = FakeVLLM(**kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def test_parser_on_with_native_calls(start_fake):
    fake = start_fake(tool_parser=True)
    native = vllm_completion(None, tool_calls=[vllm_tool_call("get_weather", '{"city": "Paris"}')],
                             finish_reason="tool_calls")
    fake.answer(_by_choice(Answer(body=native), Answer(body=vllm_completion(HERMES))))
    report = _report(fake.url)

    assert report["models"] == [fake.model]
    assert report["model"] == fake.model
    assert report["tool_parser"] == "on"
    assert report["call_format"] == "hermes"
    assert report["proxy_recovers"] is True
    assert report["recommended"]["proxy"] == {"upstream": fake.url, "upstream_tool_parser": True,
                                              "formats": ["hermes"], "tool_temperature": None}
    assert report["recommended"]["vllm_flags"] == ["--enable-auto-tool-choice",
                                                   "--tool-call-parser", "hermes"]
    auto = report["probes"]["auto"]
    assert auto["native_calls"] == [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert auto["proxy_calls"] == [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert auto["proxy_finish_reason"] == "tool_calls"

    # The two probes are what the proxy itself sends with upstream_tool_parser true / false.
    first, second, *_fronts = (r.json for r in fake.chat_requests())
    assert first["tool_choice"] == "auto"
    assert first["stream"] is False
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert "weather" in first["messages"][-1]["content"]
    assert second["tool_choice"] == "none"
    assert second["skip_special_tokens"] is False
    assert first["max_tokens"] == second["max_tokens"] == 512


def test_parser_off_is_told_by_the_400_on_auto(start_fake):
    fake = start_fake(tool_parser=False)
    fake.answer(Answer(body=vllm_completion(HERMES)))
    report = _report(fake.url)

    assert report["tool_parser"] == "off"
    auto = report["probes"]["auto"]
    assert auto["status"] == 400
    assert "--enable-auto-tool-choice" in auto["error"]
    assert report["call_format"] == "hermes"
    assert report["proxy_recovers"] is True
    assert report["recommended"]["proxy"]["upstream_tool_parser"] is False
    assert report["recommended"]["vllm_flags"] == ["--enable-auto-tool-choice",
                                                   "--tool-call-parser", "hermes"]
    assert any("upstream_tool_parser false" in note for note in report["notes"])


def test_hermes_text_calls_with_a_parser_that_does_not_match(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(Answer(body=vllm_completion(HERMES)))
    report = _report(fake.url)

    assert report["tool_parser"] == "mismatch"
    assert report["call_format"] == "hermes"
    assert report["probes"]["auto"]["text_formats"] == ["hermes"]
    assert report["probes"]["auto"]["proxy_calls"] == [
        {"name": "get_weather", "arguments": '{"city":"Paris"}'}]
    assert report["proxy_recovers"] is True
    assert report["recommended"]["tool_call_parser"] == "hermes"
    assert report["recommended"]["proxy"]["upstream_tool_parser"] is True


def test_qwen_xml_text_calls_with_reasoning_in_content(start_fake):
    fake = start_fake(tool_parser=False)
    fake.answer(Answer(body=vllm_completion(f"<think>\nI need the tool.\n</think>\n{QWEN_XML}")))
    report = _report(fake.url)

    assert report["tool_parser"] == "off"
    assert report["call_format"] == "qwen_xml"
    assert report["probes"]["none"]["text_formats"] == ["qwen_xml"]
    assert report["proxy_recovers"] is True
    assert report["reasoning"] == "content"
    recommended = report["recommended"]
    assert recommended["proxy"]["formats"] == ["qwen_xml"]
    assert recommended["vllm_flags"] == ["--enable-auto-tool-choice", "--tool-call-parser",
                                         "qwen3_coder", "--reasoning-parser", "qwen3"]
    assert recommended["vllm_command"].startswith(f"vllm serve {fake.model} ")


def test_reasoning_in_its_own_field_and_a_repaired_call(start_fake):
    fake = start_fake(tool_parser=True)
    broken = HERMES.replace('"Paris"}', '"Paris",}')  # a trailing comma to repair
    fake.answer(Answer(body=vllm_completion(broken, reasoning="The user wants the weather.")))
    report = _report(fake.url)

    assert report["reasoning"] == "field"
    assert report["recommended"]["reasoning_parser"] is None
    assert "--reasoning-parser" not in report["recommended"]["vllm_flags"]
    assert report["probes"]["auto"]["proxy_repairs"] == ["hermes:trailing_comma"]
    assert report["recommended"]["proxy"]["tool_temperature"] == 0.2


def test_no_call_at_all(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(Answer(body=vllm_completion("I cannot look up the weather.")))
    report = _report(fake.url)

    assert report["tool_parser"] == "unknown"
    assert report["call_format"] is None
    assert report["proxy_recovers"] is None
    assert report["recommended"]["proxy"]["formats"] == ["auto"]
    assert report["recommended"]["vllm_flags"] == []
    assert report["probes"]["auto"]["content"] == "I cannot look up the weather."


def test_human_output(start_fake):
    fake = start_fake(tool_parser=False)
    fake.answer(Answer(body=vllm_completion(HERMES)))
    done = _doctor("--upstream", fake.url)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"toolcall-proxy doctor: {fake.url}" in out
    assert f"probed          {fake.model}" in out
    assert "tool parser     OFF" in out
    assert "call format     hermes" in out
    assert "proxy recovers  yes" in out
    assert '"upstream_tool_parser":false' in out
    assert (f"vllm serve {fake.model} --enable-auto-tool-choice --tool-call-parser hermes"
            in out)
    # the server as the proxy profiles it, from its info endpoints (vLLM's /version and
    # /v1/models), and the constraints its re-asks use
    assert "server          vllm 0.33.0, context 32768" in out
    assert "constraints     structural_tag, structured_outputs, response_format" in out


def test_the_report_holds_the_server_s_profile(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(Answer(body=vllm_completion(HERMES)))
    profile = _report(fake.url)["profile"]
    assert (profile["kind"], profile["version"], profile["context_length"]) == (
        "vllm", "0.33.0", 32768)
    assert profile["refused"] == []


def test_model_flag_and_api_key(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(Answer(body=vllm_completion(HERMES)))
    report = _report(fake.url, "--model", fake.model, "--api-key", "sk-vllm")
    assert report["model"] == fake.model
    assert {r.headers.get("Authorization") for r in fake.received} == {"Bearer sk-vllm"}

    done = _doctor("--upstream", fake.url, "--model", "nope")
    assert done.returncode == 1
    assert done.stderr.strip() == (f"toolcall-proxy doctor: model 'nope' is not served by "
                                   f"{fake.url}; it serves: {fake.model}")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_is_a_clear_message_and_exit_1():
    url = f"http://127.0.0.1:{_closed_port()}"
    done = _doctor("--upstream", url, "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["upstream"] == url
    assert "could not be reached" in report["error"]
    assert "could not be reached" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr

    done = _doctor("--upstream", url)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("toolcall-proxy doctor: ")


def test_models_endpoint_error_and_bad_url(start_fake, monkeypatch):
    fake = start_fake()
    # A server started with --api-key: every path refused, /v1/models included.
    monkeypatch.setattr(fake, "_route", lambda r: vllm_error(401, "Unauthorized"))
    done = _doctor("--upstream", fake.url)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"toolcall-proxy doctor: {fake.url}/v1/models answered "
                                   "HTTP 401: Unauthorized")

    done = _doctor("--upstream", "ftp://nowhere")
    assert done.returncode == 2
    assert "'upstream' must be an http:// or https:// URL" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def endless_server() -> Iterator[str]:
    """A server that answers every request 200 with a chunked JSON body that never ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    done = threading.Event()

    def serve(connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n")
            piece = b'{"data": [' + b" " * 65000
            while not done.is_set():
                connection.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                piece = b" " * 65536

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    done.set()
    listener.close()


def _at_most_2_gib() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_an_endless_answer_is_refused_in_one_line(endless_server):
    """An endless /v1/models grew the doctor to 2 GB: what it reads of an answer is bounded.
    (The doctor runs here with 2 GiB of address space: unbounded, it dies of it.)"""
    done = subprocess.run([sys.executable, "app.py", "doctor", "--upstream", endless_server],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          preexec_fn=_at_most_2_gib)
    assert done.returncode == 1
    assert done.stderr == (f"toolcall-proxy doctor: {endless_server}/v1/models is larger than "
                           "16 MiB: not the answer of an OpenAI-compatible server\n")


def test_what_the_server_sends_is_printed_with_its_control_characters_escaped(start_fake):
    controls = "\x1b]0;owned\x07\x1b[2J\u009b31m\u202e"
    fake = start_fake(tool_parser=False, model="qwen" + controls)
    fake.answer(Answer(body=vllm_completion("Sure" + controls + HERMES)))
    done = _doctor("--upstream", fake.url)
    assert done.returncode == 0, done.stderr
    assert not {"\x1b", "\x07", "\u009b", "\u202e"} & set(done.stdout)
    assert "qwen\\u001b]0;owned\\u0007" in done.stdout  # shown, not acted on
    report = _report(fake.url)
    assert report["model"] == "qwen" + controls  # JSON stays JSON: the same values


def test_a_probe_that_times_out_is_reported_and_exits_1(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(Answer(body=vllm_completion(HERMES), delay=3))
    done = _doctor("--upstream", fake.url, "--json", "--timeout", "0.5")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["probes"]["auto"]["network_error"] is True
    assert "did not answer within 0.5 s" in report["probes"]["auto"]["error"]
    assert "probe auto" in done.stderr
    assert "Traceback" not in done.stderr


def test_parser_off_and_no_call_with_tool_choice_none(start_fake):
    fake = start_fake(tool_parser=False)
    fake.answer(Answer(body=vllm_completion("Paris is usually mild.")))
    report = _report(fake.url)
    assert report["tool_parser"] == "off"
    assert report["proxy_recovers"] is None
    assert any("--exclude-tools-when-tool-choice-none" in note for note in report["notes"])


def test_auto_turn_failing_otherwise_is_not_taken_for_parser_off(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(vllm_error(400, "max_tokens is too large"))
    done = _doctor("--upstream", fake.url, "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["tool_parser"] == "unknown"
    assert report["probes"]["auto"]["error"] == "max_tokens is too large"
    assert any("auto turn failed (HTTP 400)" in note for note in report["notes"])


@pytest.mark.parametrize("status", [500, 404])
def test_failed_probes_are_reported_recommend_nothing_and_exit_1(start_fake, status):
    fake = start_fake(tool_parser=True)
    fake.answer(vllm_error(status, "boom"))
    done = _doctor("--upstream", fake.url, "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["recommended"] is None
    assert report["failed"] == [{"probe": "auto", "status": status, "error": "boom"},
                                {"probe": "none", "status": status, "error": "boom"}]
    assert done.stderr.splitlines() == [f"toolcall-proxy doctor: probe auto: HTTP {status}: boom",
                                        f"toolcall-proxy doctor: probe none: HTTP {status}: boom"]

    done = _doctor("--upstream", fake.url)
    assert done.returncode == 1
    assert "recommended proxy settings" not in done.stdout
    assert "vllm serve" not in done.stdout
    assert (f"no recommendation: probe auto failed (HTTP {status}: boom), probe none failed "
            f"(HTTP {status}: boom)") in done.stdout


def test_one_failed_probe_is_enough_to_recommend_nothing(start_fake):
    fake = start_fake(tool_parser=True)
    native = vllm_completion(None, tool_calls=[vllm_tool_call("get_weather", '{"city": "Paris"}')],
                             finish_reason="tool_calls")
    fake.answer(_by_choice(Answer(body=native), vllm_error(500, "none broke")))
    done = _doctor("--upstream", fake.url, "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["tool_parser"] == "on"  # what was observed is still told
    assert report["recommended"] is None
    assert [f["probe"] for f in report["failed"]] == ["none"]


@pytest.mark.parametrize("args", [["--timeout", "0"], ["--timeout", "-1"],
                                  ["--max-tokens", "0"], ["--max-tokens", "-5"]])
def test_non_positive_timeout_or_max_tokens_is_a_usage_error(args):
    done = _doctor("--upstream", "http://127.0.0.1:9", *args)
    assert done.returncode == 2
    assert "must be greater than 0" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_call_written_only_in_the_reasoning(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(Answer(body=vllm_completion(None, reasoning=f"I will call it. {HERMES}")))
    report = _report(fake.url)
    assert report["call_format"] == "hermes"
    assert report["call_in_reasoning"] is True
    assert report["probes"]["auto"]["reasoning_formats"] == ["hermes"]
    assert report["proxy_recovers"] is True
    assert report["probes"]["auto"]["proxy_repairs"] == ["hermes:from_reasoning"]
    assert report["recommended"]["proxy"]["tool_temperature"] is None  # nothing was repaired

    done = _doctor("--upstream", fake.url)
    assert done.returncode == 0, done.stderr
    assert "call format     hermes (in the reasoning)" in done.stdout


def test_a_call_inside_think_tags_is_told_as_in_the_reasoning(start_fake):
    fake = start_fake(tool_parser=False)
    fake.answer(Answer(body=vllm_completion(f"<think>\n{QWEN_XML}\n</think>\n")))
    report = _report(fake.url)
    assert report["call_format"] == "qwen_xml"
    assert report["call_in_reasoning"] is True
    assert report["probes"]["none"]["text_formats"] == []
    assert report["probes"]["none"]["reasoning_formats"] == ["qwen_xml"]


def test_credentials_in_the_upstream_url_are_never_printed(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(Answer(body=vllm_completion(HERMES)))
    with_auth = fake.url.replace("http://", "http://alice:S3CRET@")
    masked = fake.url.replace("http://", "http://***@")
    for args in ([], ["--json"], ["--model", "nope"]):
        done = _doctor("--upstream", with_auth, *args)
        assert "S3CRET" not in done.stdout + done.stderr, args
        assert "alice" not in done.stdout + done.stderr, args
        assert masked in done.stdout + done.stderr, args
    url = f"http://alice:S3CRET@127.0.0.1:{_closed_port()}"
    done = _doctor("--upstream", url, "--json")
    assert done.returncode == 1
    assert "S3CRET" not in done.stdout + done.stderr


def test_pointed_at_the_proxy_itself_it_says_so(start_proxy, fake):
    proxy = start_proxy()
    done = _doctor("--upstream", proxy.url)
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "is a Tool Call Proxy, not vLLM" in line
    assert f"point doctor at the vLLM server behind it: --upstream {fake.url}" in line
    assert fake.chat_requests() == []  # nothing was probed through the proxy


def test_mistral_text_calls_name_the_mistral_parser(start_fake):
    fake = start_fake(tool_parser=False)
    fake.answer(Answer(body=vllm_completion(
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]')))
    report = _report(fake.url)
    assert report["call_format"] == "mistral"
    assert report["proxy_recovers"] is True
    assert report["recommended"]["tool_call_parser"] == "mistral"


def test_every_format_names_its_vllm_parser_and_the_names_are_known():
    from proxy.diagnose.doctor.probe import VLLM_TOOL_PARSERS
    from proxy.toolcalls import FORMATS
    from proxy.toolcalls.registry import resolve

    assert set(VLLM_TOOL_PARSERS) == set(FORMATS)
    for parser in filter(None, VLLM_TOOL_PARSERS.values()):
        assert resolve([parser])  # a vLLM parser name the `formats` setting also accepts


# -- each front ------------------------------------------------------------------------------


FRONT_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses",
               "messages": "/v1/messages", "ollama": "/api/chat"}


def test_each_front_is_probed_with_the_recommended_settings(start_fake):
    fake = start_fake(tool_parser=False)  # parser off: the fronts' turns say tool_choice none
    fake.answer(Answer(body=vllm_completion(QWEN_XML)))
    report = _report(fake.url)

    assert report["recommended"]["proxy"]["upstream_tool_parser"] is False
    fronts = {probe["front"]: probe for probe in report["fronts"]}
    assert {name: probe["path"] for name, probe in fronts.items()} == FRONT_PATHS
    for probe in fronts.values():
        assert (probe["status"], probe["error"], probe["relayed"]) == (200, None, False)
        assert probe["calls"] == [{"name": "get_weather", "arguments": '{"city":"Paris"}'}]
        assert probe["recovered"] is True
    # Each front translated its own clients' turn: what went upstream is a chat turn with the
    # get_weather tool and the recommended tool_choice, whatever the API.
    probes, sent = fake.chat_requests()[:2], fake.chat_requests()[2:]
    assert len(probes) == 2
    assert len(sent) == 4
    for request in sent:
        assert request.path == "/v1/chat/completions"
        assert request.json["tool_choice"] == "none"
        assert [t["function"]["name"] for t in request.json["tools"]] == ["get_weather"]
    assert sent[2].json["max_tokens"] == 512  # Anthropic's max_tokens, as Claude Code sends it
    assert sent[3].json["max_tokens"] == 512  # Ollama's options.num_predict


def test_a_front_without_the_call_is_reported_and_is_no_failure(start_fake):
    fake = start_fake(tool_parser=True)
    native = vllm_completion(None, tool_calls=[vllm_tool_call("get_weather", '{"city": "Paris"}')],
                             finish_reason="tool_calls")
    asked = []

    def answer(received: Received) -> Answer:
        asked.append(received)
        return Answer(body=native if len(asked) != 4 else vllm_completion("Sunny, I guess."))

    fake.answer(answer)
    report = _report(fake.url)
    fronts = {probe["front"]: probe for probe in report["fronts"]}
    assert fronts["responses"]["calls"] == []
    assert fronts["responses"]["recovered"] is False
    assert fronts["chat"]["recovered"] is fronts["messages"]["recovered"] is True


def test_a_front_whose_turn_fails_is_a_failed_probe(start_fake):
    fake = start_fake(tool_parser=True)
    native = vllm_completion(None, tool_calls=[vllm_tool_call("get_weather", '{"city": "Paris"}')],
                             finish_reason="tool_calls")
    asked = []

    def answer(received: Received) -> Answer:
        asked.append(received)
        if len(asked) == 5:  # the Messages front's turn
            return vllm_error(400, "request (9000 tokens) exceeds the available context size "
                                   "(4096 tokens), try increasing it")
        return Answer(body=native)

    fake.answer(answer)
    done = _doctor("--upstream", fake.url, "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["recommended"] is not None  # the server was judged; one API's turn failed
    assert report["failed"] == [{"probe": "front messages", "status": 400, "error":
                                 "request (9000 tokens) exceeds the available context size "
                                 "(4096 tokens), try increasing it"}]
    assert done.stderr.splitlines() == [
        "toolcall-proxy doctor: probe front messages: HTTP 400: request (9000 tokens) exceeds "
        "the available context size (4096 tokens), try increasing it"]


def test_the_human_report_has_a_line_per_front(start_fake):
    fake = start_fake(tool_parser=False)
    fake.answer(Answer(body=vllm_completion(HERMES)))
    done = _doctor("--upstream", fake.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert ("each front, as the proxy answers its clients with the recommended settings:"
            in lines)
    for name, path in FRONT_PATHS.items():
        line = next(line for line in lines if line.startswith(f"  front {name} "))
        assert f" {path}: HTTP 200 in " in line
        assert line.endswith('the client gets get_weather({"city":"Paris"})')


def test_nothing_recommended_means_no_front_is_probed(start_fake):
    fake = start_fake(tool_parser=True)
    fake.answer(vllm_error(500, "boom"))
    done = _doctor("--upstream", fake.url, "--json")
    assert json.loads(done.stdout)["fronts"] == []
    assert len(fake.chat_requests()) == 2


def test_a_relayed_front_is_not_probed():
    from proxy.base.config import Config
    from proxy.diagnose.doctor.fronts import Turn, probe_front
    from proxy.diagnose.doctor.probe import PROMPT, WEATHER_TOOL
    from proxy.fronts.registry import front_for

    turn = Turn("m", WEATHER_TOOL["function"], PROMPT, 64)
    probe = probe_front("/v1/responses", front_for("POST", "/v1/responses"), turn,
                        Config(responses_mode="relay"), None, {}, None)  # type: ignore[arg-type]
    assert probe.relayed is True
    assert probe.status is None


@pytest.mark.parametrize(("content", "reasoning", "opened"), [
    (f"The user wants Paris.\n</think>\n\n{HERMES}", None, "true"),  # a lone closer
    (f"<think>\nThe user wants Paris.\n</think>\n\n{HERMES}", None, "false"),  # its own <think>
    (HERMES, "The user wants Paris.", "false"),  # the server's reasoning parser is on
    (HERMES, None, None),  # nothing tells
])
def test_thinking_opened_by_template_is_recommended_from_how_thinking_ends(
        start_fake, content, reasoning, opened):
    fake = start_fake(tool_parser=False)
    fake.answer(Answer(body=vllm_completion(content, reasoning=reasoning)))
    report = _report(fake.url)
    assert report["recommended"]["proxy"].get("thinking_opened_by_template") == opened
    assert report["proxy_recovers"] is True
    if opened == "true":
        assert report["probes"]["none"]["thinking_in_content"] == "lone"
        assert report["reasoning"] == "content"


def test_each_replica_is_probed(start_fake):
    """`upstream` listing replicas: each is probed and reported (a JSON line each); one that
    cannot be reached makes the exit status 1 without hiding the other's report."""
    fakes = [start_fake(tool_parser=True), start_fake(tool_parser=True)]
    native = vllm_completion(None, tool_calls=[vllm_tool_call("get_weather", '{"city": "Paris"}')],
                             finish_reason="tool_calls")
    for fake in fakes:
        fake.answer(Answer(body=native))
    closed = f"http://127.0.0.1:{_closed_port()}"
    done = _doctor("--upstream", ",".join([fakes[0].url, closed, fakes[1].url]), "--json")
    assert done.returncode == 1
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["upstream"] for r in reports] == [fakes[0].url, closed, fakes[1].url]
    assert reports[0]["failed"] == []
    assert reports[2]["recommended"]["proxy"]["upstream"] == fakes[1].url
    assert "could not be reached" in reports[1]["error"]
    assert all(fake.chat_requests() for fake in fakes)

    done = _doctor("--upstream", f"{fakes[0].url},{fakes[1].url}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("toolcall-proxy doctor: ") == 2
