"""`doctor --score` against the faithful fakes, each running a scripted model behaviour over
the suite (tests/diagnose/score/suite_models.py): the scores straight and through the proxy differ
exactly as the server and the behaviour imply, and where the server's parser reads every
call right both score the same."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.diagnose.score.checks import CHECKS, RIGHT
from proxy.diagnose.score.suite import SUITE
from tests.diagnose.score.suite_models import (
    botches_arguments,
    calls_as_text,
    never_calls_unless_constrained,
)
from tests.fakes.llamacpp import FakeLlamaCpp
from tests.fakes.ollama import FakeOllama
from tests.fakes.sglang import FakeSGLang
from tests.fakes.vllm import FakeVLLM

pytestmark = pytest.mark.integration

EVERY = {t.id for t in SUITE}
NO_CALL = {t.id for t in SUITE if not t.calls}
DEMANDED = {t.id for t in SUITE if t.demanded}
CHOICE_NONE = {t.id for t in SUITE if t.tool_choice == "none"}
AUTO_ONE = {t.id for t in SUITE if len(t.calls) == 1 and not t.demanded}
AUTO_MANY = {t.id for t in SUITE if len(t.calls) > 1 and not t.demanded}
WITHOUT_PARSER = {"upstream_tool_parser": False}


def _right(report: dict[str, Any], way: str, mode: str) -> set[str]:
    return {e["turn"] for e in report["turns"] if e["way"] == way and e["mode"] == mode
            and e["asked"] and e["verdicts"][RIGHT]}


def _entries(report: dict[str, Any], way: str, mode: str) -> dict[str, dict[str, Any]]:
    return {e["turn"]: e for e in report["turns"] if e["way"] == way and e["mode"] == mode}


def _requests(report: dict[str, Any], way: str, mode: str) -> int:
    return report["totals"][way][mode]["requests"]


def _assert_scores(report: dict[str, Any], straight: set[str], proxy: set[str]) -> None:
    for mode in ("buffered", "streamed"):
        assert _right(report, "straight", mode) == straight, mode
        assert _right(report, "chat", mode) == proxy, mode
        assert report["totals"]["straight"][mode][RIGHT] == {"passed": len(straight),
                                                             "of": len(SUITE)}
    for way in ("straight", "chat"):
        assert report["totals"][way]["stream_equal"] == {"passed": len(SUITE),
                                                         "of": len(SUITE), "differ": []}
    differ = {(d["turn"], d["mode"]) for d in report["differ"]}
    assert differ == {(turn, mode) for turn in straight ^ proxy
                      for mode in ("buffered", "streamed")}


CORRECT_PARSERS = [(FakeVLLM, {"tool_parser": "hermes"}), (FakeSGLang, {}),
                   (FakeLlamaCpp, {}), (FakeOllama, {})]


@pytest.mark.parametrize(("kind", "options"), CORRECT_PARSERS,
                         ids=[kind.__name__ for kind, _ in CORRECT_PARSERS])
def test_where_the_servers_parser_is_right_both_score_the_same(serve, scored, kind, options):
    fake = serve(kind, **options)
    fake.behave(calls_as_text())
    report = scored(fake)

    _assert_scores(report, EVERY, EVERY)
    for mode in ("buffered", "streamed"):
        straight, proxy = _entries(report, "straight", mode), _entries(report, "chat", mode)
        assert {t: e["verdicts"] for t, e in straight.items()} == \
            {t: e["verdicts"] for t, e in proxy.items()}
        assert _requests(report, "straight", mode) == _requests(report, "chat", mode) \
            == len(SUITE)  # nothing asked again
    assert report["model"] == getattr(fake, "model", None) or fake.models[0]
    assert report["server"]["kind"] == {"FakeVLLM": "vllm", "FakeSGLang": "sglang",
                                        "FakeLlamaCpp": "llama.cpp",
                                        "FakeOllama": "ollama"}[kind.__name__]
    assert report["server"]["version"]


def test_without_a_parser_every_tool_turn_is_refused_straight_and_arrives_through_the_proxy(
        serve, scored):
    fake = serve(FakeVLLM, tool_parser=None)
    fake.behave(calls_as_text())
    report = scored(fake, settings=WITHOUT_PARSER)

    _assert_scores(report, CHOICE_NONE, EVERY)
    refused = _entries(report, "straight", "buffered")["weather-city"]
    assert refused["status"] == 400
    assert "--enable-auto-tool-choice" in refused["error"]
    assert _requests(report, "chat", "buffered") == len(SUITE)


def test_a_model_that_calls_only_when_constrained_gets_its_demanded_calls_through_the_proxy(
        serve, scored):
    fake = serve(FakeVLLM, tool_parser=None)
    fake.behave(never_calls_unless_constrained())
    report = scored(fake, settings=WITHOUT_PARSER)

    _assert_scores(report, CHOICE_NONE, NO_CALL | DEMANDED)
    proxy = _entries(report, "chat", "buffered")
    for turn in AUTO_ONE | AUTO_MANY:  # nothing demanded the call: nothing is invented
        assert proxy[turn]["verdicts"]["no_invented"] is True
        assert proxy[turn]["verdicts"]["tool"] is False
        assert proxy[turn]["requests"] == 1
    for turn in DEMANDED:  # asked once more, constrained in the server's dialect
        assert proxy[turn]["requests"] == 2
    assert _requests(report, "chat", "buffered") == len(SUITE) + len(DEMANDED)


def test_a_server_that_constrains_demanded_calls_itself_leaves_the_proxy_nothing_to_do(
        serve, scored):
    fake = serve(FakeVLLM, tool_parser="hermes")
    fake.behave(never_calls_unless_constrained())
    report = scored(fake)

    _assert_scores(report, NO_CALL | DEMANDED, NO_CALL | DEMANDED)
    assert _requests(report, "chat", "streamed") == len(SUITE)


def test_ollama_ignores_tool_choice_and_the_proxy_keeps_it(serve, scored):
    fake = serve(FakeOllama)
    fake.behave(never_calls_unless_constrained())
    report = scored(fake)

    _assert_scores(report, NO_CALL, NO_CALL | DEMANDED)


BOTCHED = [(FakeVLLM, {"tool_parser": "hermes"}, None, DEMANDED),
           # the streamed mode: text flows live, a frame that may be a call is held back
           (FakeVLLM, {"tool_parser": "hermes"}, {"stream_mode": "stream"}, DEMANDED),
           (FakeLlamaCpp, {}, None, set()),
           (FakeOllama, {}, None, set()),
           (FakeSGLang, {}, WITHOUT_PARSER, DEMANDED)]


@pytest.mark.parametrize(("kind", "options", "settings", "constrained"), BOTCHED,
                         ids=[f"{kind.__name__}-{settings}" for kind, _, settings, _ in BOTCHED])
def test_botched_arguments_are_left_in_the_content_straight_and_mended_through_the_proxy(
        serve, scored, kind, options, settings, constrained):
    """`constrained`: the demanded turns the server itself decodes under a constraint when
    asked straight."""
    fake = serve(kind, **options)
    fake.behave(botches_arguments())
    report = scored(fake, settings=settings)

    # a turn with several calls gets the calls that read; the botched one stays as text
    _assert_scores(report, NO_CALL | constrained, EVERY - AUTO_MANY)
    straight, proxy = _entries(report, "straight", "buffered"), _entries(report, "chat",
                                                                         "buffered")
    for turn in AUTO_ONE:
        assert straight[turn]["verdicts"]["tool"] is False
        assert proxy[turn]["requests"] == 2  # the botched call, asked once more
    for turn in AUTO_MANY:
        assert proxy[turn]["verdicts"]["clean"] is False
        assert proxy[turn]["verdicts"]["no_invented"] is True
        assert proxy[turn]["requests"] == 1
    # a demanded call is the server's to constrain unless the proxy sends tool_choice none
    # (upstream_tool_parser false): then the proxy asks for it again itself
    parser_off = (settings or {}).get("upstream_tool_parser") is False
    reasked = len(AUTO_ONE) + len(DEMANDED if parser_off else DEMANDED - constrained)
    assert _requests(report, "chat", "buffered") == len(SUITE) + reasked


def test_a_parser_that_drops_a_botched_call_hides_it_from_the_proxy_too(serve, scored):
    """SGLang's qwen25 detector skips a call whose JSON does not read: with the server's
    parser in use, neither side sees a call to mend (the report shows where the proxy
    needs `upstream_tool_parser: false`)."""
    fake = serve(FakeSGLang)
    fake.behave(botches_arguments())
    report = scored(fake)

    _assert_scores(report, NO_CALL | DEMANDED, NO_CALL | DEMANDED)
    proxy = _entries(report, "chat", "buffered")
    assert all(proxy[turn]["verdicts"]["clean"] for turn in EVERY)
    assert _requests(report, "chat", "buffered") == len(SUITE)


def test_every_front_scores_what_the_chat_front_scores(serve, scored):
    fake = serve(FakeVLLM, tool_parser=None)
    fake.behave(botches_arguments())
    report = scored(fake, "--fronts", settings=WITHOUT_PARSER)

    assert report["ways"] == ["straight", "chat", "responses", "messages", "ollama"]
    unsaid = {t.id for t in SUITE if t.tool_choice is not None}
    assert report["unsaid"] == {"chat": [], "responses": [], "messages": [],
                                "ollama": [t.id for t in SUITE if t.id in unsaid]}
    for mode in ("buffered", "streamed"):
        chat = _entries(report, "chat", mode)
        for way in ("responses", "messages", "ollama"):
            for turn, entry in _entries(report, way, mode).items():
                if way == "ollama" and turn in unsaid:
                    assert entry["asked"] is False
                    assert entry["left_out"] == "unsaid"
                    continue
                assert entry["verdicts"] == chat[turn]["verdicts"], (way, mode, turn)
                assert entry["requests"] == chat[turn]["requests"], (way, mode, turn)
    assert set(report["totals"]) == set(report["ways"])
    assert set(report["totals"]["messages"]["buffered"]) >= set(CHECKS)
