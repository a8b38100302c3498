"""A context window's refusal: read from the upstream's words (vLLM's, earlier vLLM's,
SGLang's), decided on (ask again for what fits, once), and told to Anthropic clients in
Anthropic's words. No server."""

from __future__ import annotations

import orjson
import pytest

from proxy.config import Config
from proxy.errors import ProxyError
from proxy.fronts.messages import error_body
from proxy.turn import waiting
from proxy.turn.context_window import MIN_ROOM, Overflow, overflow_of, with_max_tokens
from proxy.turn.core import Failure, UpstreamReply, decide
from proxy.turn.plan import TurnPlan, plan_chat
from tests.conftest import TOOLS

VLLM = ("'max_tokens' or 'max_completion_tokens' is too large: 32000. This model's maximum "
        "context length is 32768 tokens and your request has 20110 input tokens (32000 > "
        "32768 - 20110).")
VLLM_EARLIER = ("This model's maximum context length is 32768 tokens. However, you requested "
                "52110 tokens (20110 in the messages, 32000 in the completion). Please reduce "
                "the length of the messages or completion.")
SGLANG = ("Requested token count exceeds the model's maximum context length of 32768 tokens. "
          "You requested a total of 52110 tokens: 20110 tokens from the input messages and "
          "32000 tokens for the completion. Please reduce the number of tokens in the input "
          "messages or the completion to fit within the limit.")
PROMPT_ALONE = ("This model's maximum context length is 32768 tokens. However, your request "
                "has 40000 input tokens. Please reduce the length of the input messages.")
PROMPT_ALONE_V1 = ("The decoder prompt (length 40000) is longer than the maximum model length "
                   "of 32768. Make sure that `max_model_len` is no smaller than the number of "
                   "text tokens.")


@pytest.mark.parametrize("message", [VLLM, VLLM_EARLIER, SGLANG])
def test_a_completion_too_long_for_the_window_is_read(message: str) -> None:
    overflow = overflow_of(message)
    assert overflow == Overflow(window=32768, prompt=20110, asked=32000)
    assert overflow.room == 32768 - 20110


@pytest.mark.parametrize("message", [PROMPT_ALONE, PROMPT_ALONE_V1])
def test_a_prompt_too_long_for_the_window_is_read(message: str) -> None:
    assert overflow_of(message) == Overflow(window=32768, prompt=40000, asked=None)


@pytest.mark.parametrize("message", [
    "context too long",
    "This model's maximum context length is 32768 tokens.",  # no counts: nothing to fit
    "'max_tokens' must be at least 1, got 0.",
    "max_tokens is too large: 32000 for this deployment",
    "Please reduce the length of the messages or completion.",
    "",
])
def test_other_refusals_are_no_overflow(message: str) -> None:
    assert overflow_of(message) is None


@pytest.mark.parametrize(("body", "expected"), [
    ({"model": "m", "max_tokens": 32000}, {"model": "m", "max_tokens": 900}),
    ({"model": "m", "max_completion_tokens": 32000},
     {"model": "m", "max_completion_tokens": 900}),
    ({"model": "m"}, {"model": "m", "max_tokens": 900}),
])
def test_the_request_asks_what_fits_under_the_name_it_used(body: dict, expected: dict) -> None:
    assert orjson.loads(with_max_tokens(orjson.dumps(body), 900)) == expected


def _plan(config: Config | None = None, **body: object) -> TurnPlan:
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
               "max_tokens": 32000, **body}
    plan = plan_chat(orjson.dumps(request), config or Config())
    assert isinstance(plan, TurnPlan)
    return plan


def _refusal(message: str, status: int = 400) -> UpstreamReply:
    body = {"error": {"message": message, "type": "BadRequestError", "param": None,
                      "code": status}}
    return UpstreamReply(status, {}, orjson.dumps(body))


def _window(window: int, prompt: int, asked: int) -> str:
    return (f"'max_tokens' or 'max_completion_tokens' is too large: {asked}. This model's "
            f"maximum context length is {window} tokens and your request has {prompt} input "
            f"tokens ({asked} > {window} - {prompt}).")


def test_the_turn_asks_again_for_the_room_the_window_leaves() -> None:
    decision = decide(_plan(), _refusal(VLLM))
    assert isinstance(decision, Failure)
    assert decision.fit_max_tokens == 32768 - 20110
    assert decision.error.status == 400  # what the client gets if asking again is not allowed


@pytest.mark.parametrize(("reply", "config"), [
    (_refusal(PROMPT_ALONE), Config()),  # nothing fits: the prompt must shrink
    (_refusal(_window(4096, 4096 - MIN_ROOM + 1, 1000)), Config()),  # too little room
    (_refusal(VLLM), Config(fit_max_tokens=False)),
    (_refusal(VLLM, 422), Config()),
    (_refusal("context too long"), Config()),
])
def test_the_turn_does_not_ask_again_when_nothing_worth_asking_fits(
        reply: UpstreamReply, config: Config) -> None:
    decision = decide(_plan(config), reply)
    assert isinstance(decision, Failure)
    assert decision.fit_max_tokens is None


def test_the_least_room_worth_asking_for_is_asked_for() -> None:
    decision = decide(_plan(), _refusal(_window(4096, 4096 - MIN_ROOM, 1000)))
    assert isinstance(decision, Failure)
    assert decision.fit_max_tokens == MIN_ROOM


def test_the_wait_asks_again_once_with_the_room_then_fails() -> None:
    state = waiting.start(0.0, 60.0, retries=1)
    fit = Failure(ProxyError(400, VLLM), fit_max_tokens=12658)
    state, actions = waiting.step(state, waiting.Decided(1.0, fit))
    assert isinstance(actions[0], waiting.AskAgain)
    assert actions[0].max_tokens == 12658
    state, actions = waiting.step(state, waiting.Decided(2.0, fit))
    assert [type(a) for a in actions] == [waiting.Fail]
    assert actions[0].error.message == VLLM


def test_fitting_leaves_the_required_call_retry_in_place() -> None:
    state = waiting.start(0.0, 60.0, retries=1)
    state, _ = waiting.step(state, waiting.Decided(
        1.0, Failure(ProxyError(400, VLLM), fit_max_tokens=12658)))
    state, actions = waiting.step(state, waiting.Decided(
        2.0, Failure(ProxyError(502, "no call"), ask_again=True)))
    assert isinstance(actions[0], waiting.AskAgain)
    assert actions[0].max_tokens is None  # the same (fitted) body


@pytest.mark.parametrize(("message", "expected"), [
    (PROMPT_ALONE, "prompt is too long: 40000 tokens > 32768 maximum"),
    (PROMPT_ALONE_V1, "prompt is too long: 40000 tokens > 32768 maximum"),
    (VLLM, "input length and `max_tokens` exceed context limit: 20110 + 32000 > 32768, "
           "decrease input length or `max_tokens` and try again"),
    (_window(4096, 5000, 1000), "prompt is too long: 5000 tokens > 4096 maximum"),
    ("context too long", "context too long"),
])
def test_anthropic_clients_are_told_in_anthropic_s_words(message: str, expected: str) -> None:
    status, body = error_body(ProxyError(400, message))
    assert status == 400
    assert body == {"type": "error", "error": {"type": "invalid_request_error",
                                               "message": expected}}


def test_only_a_refusal_of_the_request_is_reworded() -> None:
    _, body = error_body(ProxyError(500, PROMPT_ALONE))
    assert body["error"]["message"] == PROMPT_ALONE
