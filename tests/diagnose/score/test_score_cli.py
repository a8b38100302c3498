"""`python app.py doctor --score` and `make score` as an operator runs them: the report a
person reads, the key never printed, the request budget and the concurrency kept, the
progress bar only on a terminal, and the exit statuses."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from proxy.diagnose.score import Progress
from proxy.diagnose.score import main as score_main
from proxy.diagnose.score.suite import SUITE
from tests.diagnose.score.suite_models import botches_arguments, calls_as_text
from tests.fakes.models import Generation, Model, Turn
from tests.fakes.vllm import FakeVLLM
from tests.serving import ROOT

pytestmark = pytest.mark.integration
SECRET = "sk-score-secret-7f3a9c"


def test_make_score_prints_the_table_and_never_the_key(serve, tmp_path):
    fake = serve(FakeVLLM, tool_parser="hermes")
    fake.behave(calls_as_text())
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"upstream_api_key": SECRET}))
    done = subprocess.run(
        ["make", "--no-print-directory", "-o", f"{sys.prefix}/.installed", "score",
         f"VENV={sys.prefix}", f"UPSTREAM={fake.url}", f"MODEL={fake.model}",
         f"ARGS=--config {config} --max-requests 40"],
        cwd=ROOT, capture_output=True, text=True, timeout=180)

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert SECRET not in done.stdout + done.stderr
    assert done.stderr == ""  # no bar (not a terminal), no log line of the proxy's
    report = done.stdout[done.stdout.index("Tool Call Proxy score"):]
    assert f"suite 1 ({len(SUITE)} turns), vllm 0.33.0, model {fake.model}" in report
    assert "asks left out by --max-requests 40" in report
    for label in ("answered", "right tool", "schema-valid", "fixed arguments",
                  "no call invented", "content clean", "finish reason", "turns right",
                  "streamed = buffered", "upstream requests", "seconds"):
        assert f"\n{label} " in report
    assert "No turn differs straight and through the proxy." in report
    chats = fake.chat_requests()
    assert 0 < len(chats) <= 40
    assert len(chats) % 4 == 0  # whole turns: straight and through, buffered and streamed
    assert all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in chats)


def test_the_request_budget_is_never_passed_and_leaves_out_whole_turns(serve, scored):
    fake = serve(FakeVLLM, tool_parser="hermes")
    fake.behave(botches_arguments())  # through the proxy, most turns ask twice
    report = scored(fake, "--max-requests", "30", "--concurrency", "3")

    assert len(fake.chat_requests()) == report["requests"] <= 30
    assert report["not_asked"] > 0
    asked: dict[str, set[tuple[str, str]]] = {}
    for entry in report["turns"]:
        if entry["asked"]:
            asked.setdefault(entry["turn"], set()).add((entry["way"], entry["mode"]))
        else:
            assert entry["left_out"] == "budget"
    assert asked  # and each asked turn was asked every way, in both modes
    assert all(ways == {(w, m) for w in ("straight", "chat") for m in ("buffered", "streamed")}
               for ways in asked.values())


def _counting(model: Model, seen: list[int], delay: float) -> Model:
    """`model`, counting how many of its generations run at once."""
    lock, running = threading.Lock(), [0]

    def counted(turn: Turn) -> Generation:
        with lock:
            running[0] += 1
            seen.append(running[0])
        time.sleep(delay)
        with lock:
            running[0] -= 1
        return model(turn)
    return counted


def test_no_more_turns_are_under_way_than_the_concurrency_lets(serve, scored):
    fake = serve(FakeVLLM, tool_parser="hermes")
    seen: list[int] = []
    fake.behave(_counting(calls_as_text(), seen, 0.02))
    scored(fake, "--concurrency", "2", "--max-requests", "48")

    assert 1 < max(seen) <= 2


class _Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_progress_bar_is_drawn_on_a_terminal_only():
    terminal, piped = _Terminal(True), _Terminal(False)
    for stream in (terminal, piped):
        bar = Progress(stream)
        for done in (0, 46, 92, 184):
            bar(done, 184)
    assert "scoring [###############...............] 92/184" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r")  # the bar is wiped at the end
    assert piped.getvalue() == ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_that_cannot_be_reached_is_exit_1_with_one_line(capsys):
    status = score_main(["--upstream", f"http://127.0.0.1:{_free_port()}", "--json"])
    out = capsys.readouterr()
    assert status == 1
    assert json.loads(out.out)["error"]
    assert out.err.startswith("toolcall-proxy doctor --score: ")
    assert out.err.count("\n") == 1


@pytest.mark.parametrize("flags", [["--fronts", "grpc"], ["--max-requests", "0"],
                                   ["--concurrency", "x"], ["--timeout", "-1"]])
def test_a_bad_command_line_is_exit_2(capsys, flags: list[str]):
    with pytest.raises(SystemExit) as exited:
        score_main(flags)
    assert exited.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_a_model_the_server_does_not_serve_is_named(serve, capsys: Any):
    fake = serve(FakeVLLM)
    assert score_main(["--upstream", fake.url, "--model", "nope"]) == 1
    err = capsys.readouterr().err
    assert "'nope' is not served" in err
    assert fake.model in err
    assert fake.chat_requests() == []


def test_the_table_lists_the_turns_that_differ_with_what_each_side_got(serve, tmp_path,
                                                                        capsys):
    fake = serve(FakeVLLM, tool_parser=None)
    fake.behave(calls_as_text())
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"upstream_tool_parser": False}))
    assert score_main(["--upstream", fake.url, "--config", str(config),
                       "--max-requests", "24", "--concurrency", "1"]) == 0
    out = capsys.readouterr().out
    first = SUITE[0]
    assert "Turns that differ straight and through the proxy (" in out
    assert f"  {first.id} (buffered+streamed, chat): straight wrong (answered, " in out
    assert "      straight: HTTP 400: " in out
    assert '      proxy:    get_weather({"city":"Paris"}), finish tool_calls' in out
