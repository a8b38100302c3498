"""Thinking written into the content (issue 21, item 4): a leading think block is the
reasoning — in a finished answer, as it streams, and in the history sent back upstream."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.base.config import Config
from proxy.shell.config_load import build_config
from proxy.turn.plan import plan_chat
from proxy.turn.result import Outcome, Repair
from proxy.turn.thinking import (
    LONE,
    ThinkingMemory,
    ThinkingRule,
    ThinkRouter,
    answer_thinking,
    leading_thinking,
    learn_from,
    learned_rule,
    move_history_thinking,
)
from tests.clients import Reader, delta
from tests.conftest import TOOLS
from tests.fake_vllm import paused_after, vllm_answer, vllm_completion, vllm_stream_of
from tests.streamed_cases import both_modes

FRAGMENTS = ["<think>", "</think>", "<seed:think>", "</seed:think>", " ", "\n", "\n\n", "a",
             "b c", "<", "</", "th", "ink>", "</thi", "x<think>y", "<tool_call>", "{",
             "<|channel|>", "analysis", "<|message|>", "<|end|>", "<|start|>assistant", "<|"]


@pytest.mark.parametrize(("content", "split"), [
    ("<think>\nTwo and two.\n</think>\n\nIt is 4.", ("Two and two.", "It is 4.")),
    ("  <seed:think>s</seed:think>answer", ("s", "answer")),
    ("<think>cut while thinking", ("cut while thinking", "")),
    ("<think></think>", ("", "")),
    ("It is 4.<think>x</think>", None),
    ("x</think>y", None),
    ("<seed:think>a</think>b", ("a</think>b", "")),  # its own close only
    # gpt-oss's analysis channel, raw (a server without the Harmony reasoning parser)
    ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>final"
     "<|message|>Sunny.", ("Need the weather.",
                           "<|start|>assistant<|channel|>final<|message|>Sunny.")),
    ("<|start|>assistant<|channel|>analysis<|message|>a<|end|>b", ("a", "b")),
    ("<|channel|>analysis<|message|>cut while thinking", ("cut while thinking", "")),
    ("<|channel|>final<|message|>Sunny.", None),
    ("<|channel|>commentary to=functions.f <|message|>{}<|call|>", None),
    ("Sunny.<|channel|>analysis<|message|>a<|end|>", None),
    ("<|channel|>analysis<|message|>a</think>b", ("a</think>b", "")),
    # the other families' blocks (issue 26)
    ("[THINK]Check.[/THINK]Sunny.", ("Check.", "Sunny.")),
    ("<|START_THINKING|>Plan.<|END_THINKING|><|START_RESPONSE|>Hi",
     ("Plan.", "<|START_RESPONSE|>Hi")),
    ("<|open|>think<|sep|>k<|close|>think<|sep|>r", ("k", "r")),
    ("<|channel>thought\nG.<channel|>Hi", ("G.", "Hi")),
    ("Sunny. [THINK]not leading[/THINK]", None),
])
def test_a_leading_block_is_split_off(content, split):
    assert leading_thinking(content) == split


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=10), st.data())
def test_what_streams_out_agrees_with_the_whole_text_however_it_is_cut(fragments, data):
    text = "".join(fragments)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    router = ThinkRouter()
    out = [item for piece in pieces for item in router.push(piece)]
    reasoning = "".join(text for kind, text in out if kind == "reasoning")
    content = "".join(text for kind, text in out if kind == "content")
    split = leading_thinking(text)
    want_reasoning, want_content = split if split is not None else ("", text)
    assert want_reasoning.startswith(reasoning)
    assert want_content.startswith(content)
    if split is None:
        assert reasoning == ""


LONE_FRAGMENTS = [*FRAGMENTS, "[/THINK]", "<|END_THINKING|>", "<channel|>", "`", '"', "```\n",
                  "word", " is", ".", "<|close|>think<|sep|>", "[THINK]", "<|START_THINKING|>"]
RULES = [ThinkingRule(), ThinkingRule(opened=True, cut_opened=True),
         ThinkingRule(cut_opened=True, learns=True)]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(LONE_FRAGMENTS), max_size=12), st.data(),
       st.sampled_from(RULES))
def test_thinking_before_a_lone_closer_streams_out_as_the_whole_text_reads(fragments, data,
                                                                            rule):
    text = "".join(fragments)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    router = ThinkRouter(rule)
    out = [item for piece in pieces for item in router.push(piece)]
    reasoning = "".join(text for kind, text in out if kind == "reasoning")
    content = "".join(text for kind, text in out if kind == "content")
    split = answer_thinking(text, rule, "stop")
    want_reasoning, want_content = split[:2] if split is not None else ("", text)
    assert want_reasoning.startswith(reasoning)
    assert want_content.startswith(content)
    if split is None:
        assert reasoning == ""


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(LONE_FRAGMENTS), max_size=12), st.data(),
       st.sampled_from([*RULES, ThinkingRule(lone_close=False)]))
def test_a_router_that_passes_through_gives_each_piece_back_as_content(fragments, data, rule):
    """`passes_through` (LiveTurn's shortcut past `push`) holds only where push would give
    the piece back whole, as content, and leave the router as it was."""
    text = "".join(fragments)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    router = ThinkRouter(rule)
    for piece in pieces:
        passing, before = router.passes_through, dict(vars(router))
        out = router.push(piece)
        if passing:
            assert out == ([("content", piece)] if piece else [])
            assert vars(router) == before


def test_with_the_template_opening_thinking_it_flows_live_until_the_closer():
    router = ThinkRouter(ThinkingRule(opened=True))
    assert router.push("The user asks for ") == [("reasoning", "The user asks for")]
    assert router.push("the weather. Closing: `</think>` is ") == [
        ("reasoning", " the weather. Closing: `</think>` is")]  # a mention: still thinking
    assert router.push("it.\n</thi") == [("reasoning", " it.")]
    assert router.push("nk>\n\nIt is sunny.") == [("content", "It is sunny.")]
    unknown = ThinkRouter(ThinkingRule())  # auto: the content waits for the closer
    assert unknown.push("The user asks. ") == []
    assert unknown.push("</think>It is sunny.") == [("reasoning", "The user asks."),
                                                    ("content", "It is sunny.")]
    never = ThinkRouter(ThinkingRule(lone_close=False))
    assert never.push("It is sunny.") == [("content", "It is sunny.")]


def test_most_of_a_think_block_flows_before_it_closes():
    router = ThinkRouter()
    out = router.push("<think>\nFirst I add") + router.push(" two and two.\n</thi")
    assert out == [("reasoning", "First I add"), ("reasoning", " two and two.")]
    assert router.push("nk>\n\nIt is") == [("content", "It is")]


def test_harmony_analysis_flows_as_reasoning_and_a_near_miss_as_content():
    router = ThinkRouter()
    assert router.push("<|channel|>analy") == []
    assert router.push("sis<|message|>Need it.<|e") == [("reasoning", "Need it.")]
    assert router.push("nd|>Sunny.") == [("content", "Sunny.")]
    other = ThinkRouter()
    assert other.push("<|channel|>final<|message|>Sunny.") == [
        ("content", "<|channel|>final<|message|>Sunny.")]


def _history(content: str) -> list[dict]:
    return [{"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "and 3+3?"}]


def test_history_sent_back_with_thinking_in_the_content_goes_upstream_as_reasoning():
    body = {"model": "m", "tools": TOOLS, "messages": _history(
        "<think>\nadd them\n</think>\n\nIt is 4.")}
    plan = plan_chat(orjson.dumps(body), Config())
    sent = orjson.loads(plan.upstream_body)["messages"][1]
    assert (sent["reasoning_content"], sent["content"]) == ("add them", "It is 4.")
    assert "history_thinking_as_reasoning" in plan.rewrites
    kept = plan_chat(orjson.dumps(body), Config(reasoning_from_content=False))
    assert orjson.loads(kept.upstream_body)["messages"][1] == body["messages"][1]
    assert "history_thinking_as_reasoning" not in kept.rewrites


@pytest.mark.parametrize("message", [
    {"role": "assistant", "content": "It is 4. <think>not leading</think>"},
    {"role": "assistant", "content": "<think>a</think>b", "reasoning_content": "its own"},
    {"role": "user", "content": "<think>a user's text</think>"},
])
def test_history_without_a_leading_block_of_its_own_is_left_as_it_is(message):
    messages = [dict(message)]
    assert not move_history_thinking(messages)
    assert messages == [message]


THOUGHT = "<think>\nThe user wants 2+2; that is simple arithmetic, four.\n</think>\n\nIt is 4."


def _flows_live_as_reasoning(fake, streamed, content: str) -> None:
    """Upstream answers `content` (2+2's thinking, then "It is 4."), pausing after "simple":
    the thinking reaches the client as reasoning while upstream still writes, no content
    before it, and the whole stream reads as the thinking then the answer."""
    messages = [{"role": "user", "content": "2+2?"}]
    answer, resume = paused_after(vllm_stream_of(vllm_completion(content), size=5), "simple")
    fake.answer(answer)
    try:
        reader = Reader(streamed.chat.completions.create(model="m", messages=messages,
                                                         tools=TOOLS, stream=True))
        first = reader.next_where(lambda chunk: delta(chunk).get("reasoning_content"))
        assert first is not None
        assert not resume.is_set()  # the thinking flowed while upstream was still writing
        assert not any(delta(chunk).get("content") for chunk in reader.seen)
    finally:
        resume.set()
    chunks = reader.rest()
    assert "".join(delta(c).get("reasoning_content", "") for c in chunks) == (
        "The user wants 2+2; that is simple arithmetic, four.")
    assert "".join(delta(c).get("content", "") for c in chunks) == "It is 4."


@pytest.mark.integration
def test_over_http_the_thinking_is_the_reasoning_in_both_modes_and_flows_live(
        fake, start_proxy):
    messages = [{"role": "user", "content": "2+2?"}]
    buffered = start_proxy().client()
    fake.answer(vllm_answer(vllm_completion(THOUGHT)))
    message = buffered.chat.completions.create(model="m", messages=messages,
                                               tools=TOOLS).choices[0].message
    assert (message.content, message.model_extra["reasoning_content"]) == (
        "It is 4.", "The user wants 2+2; that is simple arithmetic, four.")

    _flows_live_as_reasoning(fake, start_proxy(stream_mode="stream").client(), THOUGHT)


CUT = "The user wants the weather, so I call the tool for the city of"


@pytest.mark.integration
def test_auto_learns_from_a_lone_closer_that_the_model_opens_thinking_in_its_template(
        fake, start_proxy):
    messages = [{"role": "user", "content": "Weather?"}]
    fake.tokenize = None  # a server whose profile does not say: `auto` learns from answers
    fresh = start_proxy().client()
    fake.answer(vllm_answer(vllm_completion(CUT, finish_reason="length")))
    cut = fresh.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    assert cut.choices[0].message.content == CUT  # nothing known yet: the text stays

    learning = start_proxy().client()
    fake.answer(vllm_answer(vllm_completion("Plan it.\n</think>\n\nIt is sunny.")))
    first = learning.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    assert first.choices[0].message.content == "It is sunny."
    fake.answer(vllm_answer(vllm_completion(CUT, finish_reason="length")))
    cut = learning.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    message = cut.choices[0].message
    assert (message.model_extra["reasoning_content"], message.content) == (CUT, "")
    assert cut.choices[0].finish_reason == "length"
    fake.answer(vllm_answer(vllm_completion(CUT, finish_reason="length")))
    other = learning.chat.completions.create(model="other", messages=messages, tools=TOOLS)
    assert other.choices[0].message.content == CUT  # learned per model


OPENED = "The user wants 2+2; that is simple arithmetic, four.\n</think>\n\nIt is 4."


@pytest.mark.integration
def test_over_http_a_template_opened_thinking_flows_live_as_reasoning(fake, start_proxy):
    """`thinking_opened_by_template: true`: the thinking before the lone closer flows as
    reasoning while upstream still writes; the answer after it is the content, as buffered."""
    messages = [{"role": "user", "content": "2+2?"}]
    streamed = start_proxy(stream_mode="stream", thinking_opened_by_template="true").client()
    _flows_live_as_reasoning(fake, streamed, OPENED)
    buffered = start_proxy(thinking_opened_by_template="true").client()
    fake.answer(vllm_answer(vllm_completion(OPENED)))
    message = buffered.chat.completions.create(model="m", messages=messages,
                                               tools=TOOLS).choices[0].message
    assert (message.model_extra["reasoning_content"], message.content) == (
        "The user wants 2+2; that is simple arithmetic, four.", "It is 4.")


@pytest.mark.integration
def test_auto_learns_from_a_finished_answer_without_a_closer_that_text_may_flow_live(
        fake, start_proxy):
    """`auto`: once a model finished an answer with no closer, its template opens no block:
    its text flows live in the streamed mode, and a later lone closer is the answer's text
    (in both modes alike)."""
    messages = [{"role": "user", "content": "Hi?"}]
    fake.tokenize = None  # a server whose profile does not say: `auto` learns from answers
    streamed = start_proxy(stream_mode="stream").client()
    text = "Hello there, friend. How can I help?"
    fake.answer(vllm_answer(vllm_completion(text)))  # the first: nothing learned yet
    first = streamed.chat.completions.create(model="m", messages=messages, tools=TOOLS,
                                             stream=True)
    assert "".join(delta(c).get("content") or "" for c in first) == text
    answer, resume = paused_after(vllm_stream_of(vllm_completion(text), size=5), "friend")
    fake.answer(answer)
    try:
        reader = Reader(streamed.chat.completions.create(model="m", messages=messages,
                                                         tools=TOOLS, stream=True))
        live = reader.next_where(lambda chunk: "Hello" in (delta(chunk).get("content") or ""))
        assert live is not None
        assert not resume.is_set()  # the text flowed while upstream was still writing
    finally:
        resume.set()
    reader.rest()

    buffered = start_proxy().client()
    fake.answer(vllm_answer(vllm_completion("Sure.")))
    buffered.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    fake.answer(vllm_answer(vllm_completion("Plan it.\n</think>\n\nIt is sunny.")))
    later = buffered.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    # Learned plain: a lone closer later is the answer's words, not thinking.
    assert later.choices[0].message.content == "Plan it.\n</think>\n\nIt is sunny."
    fake.answer(vllm_answer(vllm_completion("Plan it.\n</think>\n\nIt is sunny.")))
    other = buffered.chat.completions.create(model="fresh", messages=messages, tools=TOOLS)
    assert other.choices[0].message.content == "It is sunny."  # another model: the rule holds


# -- what `thinking_opened_by_template: auto` learns of a model ----------------------------------


def _outcome(*repairs: str, finish: str | None = "stop") -> Outcome:
    return Outcome(repairs=[Repair("content", repair, None) for repair in repairs],
                   finish_before=[finish])


def test_auto_learns_a_template_opens_thinking_from_a_lone_closer():
    memory, auto = ThinkingMemory(), ThinkingRule(learns=True)
    assert learned_rule(auto, "m", memory) is auto  # nothing learned yet: the rule as it is
    learn_from(auto, "m", _outcome(LONE), memory)
    assert learned_rule(auto, "m", memory) == ThinkingRule(cut_opened=True, learns=True)
    assert learned_rule(auto, "other", memory) is auto  # per model


def test_auto_learns_a_template_opens_none_from_answers_finished_without_a_closer():
    memory, auto = ThinkingMemory(), ThinkingRule(learns=True)
    learn_from(auto, "m", _outcome(finish="length"), memory)  # cut: says nothing
    assert learned_rule(auto, "m", memory) is auto
    learn_from(auto, "m", _outcome(finish="tool_calls"), memory)
    assert learned_rule(auto, "m", memory) == ThinkingRule(lone_close=False, learns=True)
    learn_from(auto, "m", _outcome(LONE), memory)  # a lone closer outweighs plain answers
    assert learned_rule(auto, "m", memory) == ThinkingRule(cut_opened=True, learns=True)


def test_a_rule_that_does_not_learn_neither_teaches_nor_changes():
    memory, fixed = ThinkingMemory(), ThinkingRule(lone_close=False)
    learn_from(fixed, "m", _outcome(LONE), memory)
    assert not memory.knows("m")
    learn_from(ThinkingRule(learns=True), "m", _outcome(LONE), memory)
    assert learned_rule(fixed, "m", memory) is fixed
    learn_from(ThinkingRule(learns=True), "n", None, memory)  # no outcome: nothing
    assert not memory.knows("n")
    assert not memory.answers_plainly("n")


def test_a_plan_takes_a_learned_rule_and_keeps_itself_for_its_own():
    plan = plan_chat(orjson.dumps({"model": "m", "tools": TOOLS,
                                   "messages": [{"role": "user", "content": "hi"}]}), Config())
    rule = plan.extraction.thinking
    assert plan.with_thinking(rule) is plan
    learned = plan.with_thinking(ThinkingRule(cut_opened=True, learns=True))
    assert learned.extraction.thinking == ThinkingRule(cut_opened=True, learns=True)
    assert learned.extraction.tools == plan.extraction.tools


# --- thinking cut by `length` where the template opened it (issue 37, item 1) ----------------

_CUT_THOUGHT = ("Two files to compare; first I open notes.md, then I call <tool_call> on the "
                "other one once I know")


@pytest.mark.parametrize("front", ["chat", "responses", "messages"])
@pytest.mark.parametrize("formats", [["kimi_k2"], ["kimi_k3"], ["glm47"], ["deepseek_v4"],
                                     ["hermes", "kimi"]])
def test_a_cut_output_is_all_thinking_when_the_format_says_the_template_opens_it(
        formats, front):
    """Kimi K2.6/K3, GLM-4.7, DeepSeek V4 open the thinking block in the prompt: cut before
    its closer, the whole output is reasoning and the content empty, `length` kept; buffered
    and streamed alike."""
    completion = vllm_completion(_CUT_THOUGHT, finish_reason="length")
    buffered, streamed = both_modes(completion, front=front, settings={"formats": formats})
    assert streamed == buffered
    if front == "chat":
        choice = buffered["choices"][0]
        assert choice["message"]["reasoning_content"] == _CUT_THOUGHT
        assert choice["message"]["content"] in ("", None)
        assert choice["finish_reason"] == "length"
    elif front == "messages":
        assert [block["type"] for block in buffered["content"]] == ["thinking"]
        assert buffered["content"][0]["thinking"] == _CUT_THOUGHT
        assert buffered["stop_reason"] == "max_tokens"
    else:
        assert [item["type"] for item in buffered["output"]] == ["reasoning"]


@pytest.mark.parametrize(("formats", "finish", "settings"), [
    (["glm45"], "length", {}),  # GLM-4.5's template opens no block
    (["hermes"], "length", {}),
    (["auto"], "length", {}),  # nothing known of the template
    (["kimi_k2"], "stop", {}),  # finished without a closer: not the cut this rule is for
    (["glm47"], "length", {"thinking_opened_by_template": "false"}),  # the setting wins
])
def test_a_cut_output_stays_the_answer_when_nothing_says_the_template_opened_thinking(
        formats, finish, settings):
    completion = vllm_completion(_CUT_THOUGHT, finish_reason=finish)
    buffered, streamed = both_modes(completion, settings={"formats": formats, **settings})
    assert streamed == buffered
    message = buffered["choices"][0]["message"]
    assert (message["content"], message.get("reasoning_content")) == (_CUT_THOUGHT, None)
    assert buffered["choices"][0]["finish_reason"] == finish


def test_a_template_opened_thinking_that_closed_before_the_cut_is_split_as_usual():
    completion = vllm_completion("Compare both.</think>\n\nThe first file is longer and",
                                 finish_reason="length")
    buffered, streamed = both_modes(completion, settings={"formats": ["kimi_k2"]})
    assert streamed == buffered
    message = buffered["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == (
        "Compare both.", "The first file is longer and")


def test_a_request_that_switches_thinking_off_keeps_a_cut_output_as_the_answer():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    config = build_config({"formats": ["glm47"]})
    assert plan_chat(orjson.dumps(body), config).extraction.thinking.cut_opened
    off = {**body, "chat_template_kwargs": {"enable_thinking": False}}
    assert not plan_chat(orjson.dumps(off), config).extraction.thinking.cut_opened
