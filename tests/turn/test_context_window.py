"""A context window's refusal: read from the upstream's words (vLLM's current and earlier,
SGLang's), decided on (ask again for what fits, once), and told to Anthropic clients in
Anthropic's words. No server."""

from __future__ import annotations

import orjson
import pytest

from proxy.base.config import Config
from proxy.base.errors import ProxyError
from proxy.fronts.messages import error_body
from proxy.turn import waiting
from proxy.turn.context_window import (
    MIN_ROOM,
    Overflow,
    Refit,
    overflow_of,
    refit,
    with_max_tokens,
)
from proxy.turn.core import Failure, UpstreamReply, decide
from proxy.turn.plan import TurnPlan, plan_chat
from tests.conftest import TOOLS

# vLLM today counts the prompt only up to where the window overflows (32768 - 32000 + 1).
VLLM = ("This model's maximum context length is 32768 tokens. However, you requested 32000 "
        "output tokens and your prompt contains at least 769 input tokens, for a total of at "
        "least 32769 tokens. Please reduce the length of the input prompt or the number of "
        "requested output tokens. (parameter=input_tokens, value=769)")
VLLM_PASSED = ("You passed 769 input tokens and requested 32000 output tokens. However, the "
               "model's context length is only 32768 tokens, resulting in a maximum input "
               "length of 768 tokens. Please reduce the length of the input prompt. "
               "(parameter=input_tokens, value=769)")
VLLM_PROMPT_ALONE = ("This model's maximum context length is 32768 tokens. However, you "
                     "requested 0 output tokens and your prompt contains at least 32769 input "
                     "tokens, for a total of at least 32769 tokens. Please reduce the length "
                     "of the input prompt or the number of requested output tokens. "
                     "(parameter=input_tokens, value=32769)")
VLLM_EARLIER = ("'max_tokens' or 'max_completion_tokens' is too large: 32000. This model's "
                "maximum context length is 32768 tokens and your request has 20110 input "
                "tokens (32000 > 32768 - 20110).")
VLLM_OLDER = ("This model's maximum context length is 32768 tokens. However, you requested "
              "52110 tokens (20110 in the messages, 32000 in the completion). Please reduce "
              "the length of the messages or completion.")
SGLANG = ("Requested token count exceeds the model's maximum context length of 32768 tokens. "
          "You requested a total of 52110 tokens: 20110 tokens from the input messages and "
          "32000 tokens for the completion. Please reduce the number of tokens in the input "
          "messages or the completion to fit within the limit.")
PROMPT_ALONE = [
    "This model's maximum context length is 32768 tokens. However, your request has 40000 "
    "input tokens. Please reduce the length of the input messages.",
    "The decoder prompt (length 40000) is longer than the maximum model length of 32768. "
    "Make sure that `max_model_len` is no smaller than the number of text tokens.",
    "The decoder prompt (length 40000) plus the number of requested output tokens (at least "
    "1) is longer than the maximum model length of 32768. Make sure that `max_model_len` is "
    "no smaller than the number of text tokens plus the number of requested output tokens.",
    "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
    "request (40000 tokens) exceeds the available context size (32768 tokens), try "
    "increasing it",  # llama.cpp's server
]


@pytest.mark.parametrize("message", [VLLM, VLLM_PASSED])
def test_vllm_s_refusal_is_read_with_its_prompt_count_a_floor(message: str) -> None:
    assert overflow_of(message) == Overflow(window=32768, prompt=769, asked=32000, exact=False)


@pytest.mark.parametrize("message", [VLLM_EARLIER, VLLM_OLDER, SGLANG])
def test_a_refusal_that_counts_the_whole_prompt_is_read(message: str) -> None:
    overflow = overflow_of(message)
    assert overflow == Overflow(window=32768, prompt=20110, asked=32000, exact=True)
    assert overflow.room == 32768 - 20110


@pytest.mark.parametrize("message", PROMPT_ALONE)
def test_a_prompt_too_long_for_the_window_is_read(message: str) -> None:
    assert overflow_of(message) == Overflow(window=32768, prompt=40000, asked=None)


def test_vllm_s_prompt_alone_overflowing_is_read() -> None:
    assert overflow_of(VLLM_PROMPT_ALONE) == Overflow(32768, 32769, None, exact=False)


@pytest.mark.parametrize("message", [
    "context too long",
    "This model's maximum context length is 32768 tokens.",  # no counts: nothing to fit
    "'max_tokens' must be at least 1, got 0.",
    "max_tokens=140000 cannot be greater than max_model_len=max_total_tokens=131072.",
    "max_tokens is too large: 32000 for this deployment",
    "Please reduce the length of the messages or completion.",
    "the request exceeds the available context size, try increasing it",  # no counts
    "",
])
def test_other_refusals_are_no_overflow(message: str) -> None:
    assert overflow_of(message) is None


def test_a_floor_count_is_refitted_by_naming_no_max_tokens() -> None:
    """vLLM gives a completion with no max_tokens exactly what its window leaves."""
    assert refit(Overflow(32768, 769, 32000, exact=False)) == Refit(None)


@pytest.mark.parametrize(("overflow", "expected"), [
    (Overflow(32768, 20110, 32000), Refit(32768 - 20110 - 1)),  # SGLang refuses a full window
    (Overflow(4096, 4096 - MIN_ROOM - 1, 1000), Refit(MIN_ROOM)),
    (Overflow(4096, 4096 - MIN_ROOM, 1000), None),  # too little room for anything of use
    (Overflow(4096, 5000, 1000), None),
    (Overflow(32768, 40000, None), None),
    (Overflow(32768, 32769, None, exact=False), None),
    (Overflow(4096, 1000, 3096), Refit(3095)),  # a window filled exactly
    (Overflow(4096, 1000, 3000), None),  # it fitted: the refusal was for something else
])
def test_an_exact_count_is_refitted_to_its_room(overflow: Overflow, expected: Refit | None,
                                                ) -> None:
    assert refit(overflow) == expected


@pytest.mark.parametrize(("body", "tokens", "expected"), [
    (b'{"model":"m","max_tokens":32000}', 900, {"model": "m", "max_tokens": 900}),
    (b'{"model":"m","max_completion_tokens":32000}', 900,
     {"model": "m", "max_completion_tokens": 900}),
    (b'{"model":"m"}', 900, {"model": "m", "max_tokens": 900}),
    (b'{"model":"m","max_tokens":32000,"max_completion_tokens":32000}', None, {"model": "m"}),
    (b'{"model":"m","max_tokens":null}', None, {"model": "m"}),
])
def test_the_request_asks_what_fits_under_the_name_it_used(body: bytes, tokens: int | None,
                                                           expected: dict) -> None:
    assert orjson.loads(with_max_tokens(body, tokens)) == expected


def test_the_rest_of_the_request_is_kept_exactly() -> None:
    body = b'{"model":"m","seed":1000000000000000000000000000000,"max_tokens":32000}'
    assert with_max_tokens(body, None) == b'{"model":"m","seed":1000000000000000000000000000000}'
    assert with_max_tokens(body, 5) == (b'{"model":"m","seed":1000000000000000000000000000000,'
                                        b'"max_tokens":5}')


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


@pytest.mark.parametrize(("message", "fit"), [(VLLM, Refit(None)), (VLLM_PASSED, Refit(None)),
                                              (SGLANG, Refit(32768 - 20110 - 1))])
def test_the_turn_asks_again_for_what_the_window_leaves(message: str, fit: Refit) -> None:
    decision = decide(_plan(), _refusal(message))
    assert isinstance(decision, Failure)
    assert decision.fit == fit
    assert decision.error.status == 400  # what the client gets if asking again is not allowed


@pytest.mark.parametrize(("reply", "config"), [
    (_refusal(VLLM_PROMPT_ALONE), Config()),  # nothing fits: the prompt must shrink
    (_refusal(PROMPT_ALONE[0]), Config()),
    (_refusal(VLLM), Config(fit_max_tokens=False)),
    (_refusal(VLLM, 422), Config()),
    (_refusal("context too long"), Config()),
])
def test_the_turn_does_not_ask_again_when_nothing_worth_asking_fits(
        reply: UpstreamReply, config: Config) -> None:
    decision = decide(_plan(config), reply)
    assert isinstance(decision, Failure)
    assert decision.fit is None


def test_the_wait_asks_again_once_with_the_fit_then_fails() -> None:
    state = waiting.start(0.0, 60.0, retries=1)
    fit = Failure(ProxyError(400, VLLM), fit=Refit(None))
    state, actions = waiting.step(state, waiting.Decided(1.0, fit))
    assert isinstance(actions[0], waiting.AskAgain)
    assert actions[0].fit == Refit(None)
    state, actions = waiting.step(state, waiting.Decided(2.0, fit))
    assert [type(a) for a in actions] == [waiting.Fail]
    assert actions[0].error.message == VLLM


def test_fitting_leaves_the_required_call_retry_in_place() -> None:
    state = waiting.start(0.0, 60.0, retries=1)
    state, _ = waiting.step(state, waiting.Decided(
        1.0, Failure(ProxyError(400, SGLANG), fit=Refit(12657))))
    state, actions = waiting.step(state, waiting.Decided(
        2.0, Failure(ProxyError(502, "no call"), ask_again=True)))
    assert isinstance(actions[0], waiting.AskAgain)
    assert actions[0].fit is None  # the same (fitted) body


@pytest.mark.parametrize(("message", "expected"), [
    (PROMPT_ALONE[0], "prompt is too long: 40000 tokens > 32768 maximum"),
    (PROMPT_ALONE[3], "prompt is too long: 40000 tokens > 32768 maximum"),
    (PROMPT_ALONE[4], "prompt is too long: 40000 tokens > 32768 maximum"),
    (VLLM_PROMPT_ALONE, "prompt is too long: 32769 tokens > 32768 maximum"),
    (VLLM, "input length and `max_tokens` exceed context limit: 769 + 32000 > 32768, "
           "decrease input length or `max_tokens` and try again"),
    (VLLM_EARLIER, "input length and `max_tokens` exceed context limit: 20110 + 32000 > "
                   "32768, decrease input length or `max_tokens` and try again"),
    (SGLANG.replace("20110", str(32768 - MIN_ROOM + 1)),  # too little room to lower into
     f"prompt is too long: {32768 - MIN_ROOM + 1} tokens > 32768 maximum"),
    (SGLANG.replace("20110", str(32768 - MIN_ROOM)),  # the least room the proxy still refuses
     f"prompt is too long: {32768 - MIN_ROOM} tokens > 32768 maximum"),
    (SGLANG.replace("20110", str(32768 - MIN_ROOM - 1)),  # the least it asks again for
     f"input length and `max_tokens` exceed context limit: {32768 - MIN_ROOM - 1} + 32000 > "
     "32768, decrease input length or `max_tokens` and try again"),
    ("context too long", "context too long"),
])
def test_anthropic_clients_are_told_in_anthropic_s_words(message: str, expected: str) -> None:
    status, body = error_body(ProxyError(400, message))
    assert status == 400
    assert body == {"type": "error", "error": {"type": "invalid_request_error",
                                               "message": expected}}


def test_only_a_refusal_of_the_request_is_reworded() -> None:
    _, body = error_body(ProxyError(500, PROMPT_ALONE[0]))
    assert body["error"]["message"] == PROMPT_ALONE[0]
