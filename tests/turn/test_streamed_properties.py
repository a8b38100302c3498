"""The streamed mode's promise, as a property (issue 19): for every case of the test corpus
and for fuzzed outputs, what a client assembles is identical in both modes — the same
content, reasoning, calls and finish, whatever was sent live on the way — through every
front's writer, each read by its official SDK (chat and Responses: OpenAI's; Messages:
Anthropic's; Ollama's: the `ollama` client's types)."""

from __future__ import annotations

import ast
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.toolcalls import extract
from tests.fake_vllm import vllm_completion, vllm_stream_of
from tests.streamed_cases import (
    ASSEMBLERS,
    FRONT_NAMES,
    TOOL_NAMES,
    answers_for,
    both_modes,
    buffered_stream,
    corpus,
    fuzzed,
    plans,
    responses_read,
    streamed_stream,
)

# Each text's answers are read by the front's SDK: all of them, but for Responses one in
# three, in turn (each shape of answer for a third of the texts), as its SDK's stream state
# costs three times the others' per answer (~2 ms of fixed work per stream: the response
# snapshot and its parsed copy). The other two in three are read from the events alone
# (`responses_read`: the final response against the finished items and their deltas).
_STRIDE = {"responses": 3}
_LIGHT = {"responses": responses_read}


def _same_in_both_modes(front: str, texts: list[str], size: int, answers_of=answers_for,
                        **settings: str) -> tuple[int, int]:
    """Every answer of every text gives the same message through `front`, as its SDK reads
    it (for Responses, a share of them, `_STRIDE`; the rest as its events say); (answers,
    answers with live text: some of it went out before the end)."""
    buffered, streamed = plans(front, **settings)
    stride = _STRIDE.get(front, 1)
    answers = live = 0
    for position, text in enumerate(texts):
        for shape, completion in enumerate(answers_of(text)):
            sdk = not (position + shape) % stride
            assemble = ASSEMBLERS[front] if sdk else _LIGHT[front]
            raw, flowed = streamed_stream(streamed, vllm_stream_of(completion, size=size),
                                          front=front)
            expected = assemble(buffered_stream(buffered, completion, front))
            assert assemble(raw) == expected, (text, completion["choices"][0]["message"])
            answers += 1
            live += any(flowed)
    return answers, live


# ~40 s of CPU per front on an idle machine (chat's; Messages' less, Responses' more: the
# SDKs' own stream assembly of > 5000 answers, twice each): the suite's 60 s limit is a guard
# against hangs, and a loaded CI runner (2-3x slower) must not trip it.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("front", FRONT_NAMES)
def test_every_corpus_text_gives_the_same_message_in_both_modes(front):
    answers, live = _same_in_both_modes(front, corpus(), size=4)
    assert answers > 5000
    assert live > answers // 2  # not vacuous: most answers did flow before their end


def _without(raw: bytes, kind: bytes) -> bytes:
    """A stream with its first event of `kind` left out."""
    frames = raw.split(b"\n\n")
    gone = next(i for i, frame in enumerate(frames) if b'"type":"' + kind + b'"' in frame)
    return b"\n\n".join(frames[:gone] + frames[gone + 1:])


_RESPONSES_KINDS = [b"response.output_text.delta", b"response.reasoning_summary_text.delta",
                    b"response.function_call_arguments.delta", b"response.output_item.done",
                    b"response.completed"]


@pytest.mark.parametrize(("front", "reader", "kind"), [
    *(("responses", "sdk", kind) for kind in _RESPONSES_KINDS),
    *(("responses", "events", kind) for kind in _RESPONSES_KINDS),
    ("messages", "sdk", b"message_stop"),
])
def test_the_readers_refuse_a_stream_that_does_not_add_up(front, reader, kind):
    """Not vacuous: a final response its deltas or finished items do not add up to, or a
    stream without its end, fails the reader (the whole stream is read as it is), the SDK's
    and the one that reads the events alone."""
    read = ASSEMBLERS[front] if reader == "sdk" else _LIGHT[front]
    call = {"id": "call_1", "type": "function",
            "function": {"name": "read", "arguments": '{"path": "/a"}'}}
    completion = vllm_completion("Hello there", reasoning="Hmm.", tool_calls=[call],
                                 finish_reason="tool_calls")
    raw = buffered_stream(plans(front)[0], completion, front)
    assert read(raw)["id"]  # read whole, as it is
    with pytest.raises(AssertionError):
        read(_without(raw, kind))


# Issue 26: the shapes the reference parsers read (their test module is in the corpus above),
# and calls to names a little off or matching no tool, under either `unknown_tool_calls`.
_OFF_NAMES = [
    '<tool_call>{"name": "%s", "arguments": {"path": "/a"}}</tool_call>',
    "Let me run it.\n<tool_call>\n<function=%s>\n<parameter=path>\n/a\n</parameter>\n"
    "</function>\n</tool_call>",
    '[TOOL_CALLS][{"name": "read", "arguments": {}}, {"name": "%s", "arguments": {}}]',
    '{"name": "%s", "arguments": {"path": "/a"}}',
    "[%s(path='/a')]",
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("unknown", ["deliver", "text"])
@pytest.mark.parametrize("front", FRONT_NAMES)
def test_issue_26_shapes_give_the_same_message_in_both_modes(front, unknown):
    from tests.toolcalls import test_reference as reference

    source = ast.parse(Path(reference.__file__).read_text(encoding="utf-8"))
    texts = sorted({node.value for node in ast.walk(source) if isinstance(node, ast.Constant)
                    and isinstance(node.value, str) and node.value.strip()})
    texts += list(reference.CUT_PARALLEL.values())
    texts += [shape % name for shape in _OFF_NAMES
              for name in ("Read", "functions.read", "run_shell", "rm -rf")]
    answers, _ = _same_in_both_modes(front, texts, size=3, unknown_tool_calls=unknown)
    assert answers >= 5 * len(texts)


def _module_texts(module) -> list[str]:
    source = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    return sorted({node.value for node in ast.walk(source) if isinstance(node, ast.Constant)
                   and isinstance(node.value, str) and node.value.strip()})


# Issue 41, item 6: every text of the improvised-call tests (their positives and negatives),
# in every answer shape, through every front, under either `unknown_tool_calls`.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("unknown", ["deliver", "text"])
@pytest.mark.parametrize("front", FRONT_NAMES)
def test_improvised_calls_give_the_same_message_in_both_modes(front, unknown):
    from tests.toolcalls import test_improvised as improvised

    texts = _module_texts(improvised)
    answers, live = _same_in_both_modes(front, texts, size=3, unknown_tool_calls=unknown)
    assert answers >= 5 * len(texts)
    tools = {name: {"type": "object"} for name in TOOL_NAMES}
    assert sum(bool(extract(text, tools).calls) for text in texts) > 40  # not vacuous
    assert live > 0


def _as_content(text: str) -> list[dict]:
    """The text as the whole content, finished and cut by `length`."""
    return [vllm_completion(text), vllm_completion(text, finish_reason="length")]


# The same corpus with a template that opens thinking (issue 26): the content flows live as
# reasoning until a lone closer, and all of it is reasoning without one.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("front", FRONT_NAMES)
def test_every_corpus_text_gives_the_same_message_when_the_template_opens_thinking(front):
    answers, live = _same_in_both_modes(front, corpus(), size=4, answers_of=_as_content,
                                        thinking_opened_by_template="true")
    assert answers > 2000
    assert live > answers // 3  # not vacuous (reasoning that may hold a call waits too)


def _cut(text: str) -> list[dict]:
    """The text as the whole content, cut by `length`."""
    return [vllm_completion(text, finish_reason="length")]


# Issue 37, item 1: a format whose models' templates open thinking (`kimi_k2` here) makes a
# cut output all thinking under `auto`, from the first turn: the same in both modes (the
# streamed mode holds such content until a closer or the end; none of it goes out as text).
@pytest.mark.timeout(600)
@pytest.mark.parametrize("front", FRONT_NAMES)
def test_every_corpus_text_cut_by_length_is_alike_when_the_format_opens_thinking(front):
    answers, _ = _same_in_both_modes(front, corpus(), size=4, answers_of=_cut,
                                     formats=["kimi_k2", "auto"])
    assert answers > 1000


@pytest.mark.parametrize("front", FRONT_NAMES)
def test_fuzzed_outputs_give_the_same_message_in_both_modes(front):
    answers, live = _same_in_both_modes(front, fuzzed(300), size=3)
    assert answers > 1000
    assert live > 0


# Reasoning as vLLM's parsers end it (the newline before `</think>`), or that the hold-back
# keeps (a word that may open a call, a call drafted in it), before content: the whole
# reasoning comes first in every front (a Responses reasoning item, a Messages thinking block
# cannot grow once the text has begun).
_REASONINGS = ["Let me think.\n", "Let me think.\n\n", "Okay", 'Plan:\n{"name": "read"}',
               "I could call <tool_call>read</tool_call> here.\n"]


def _after_reasoning(text: str) -> list[dict]:
    return [vllm_completion(text, reasoning=reasoning) for reasoning in _REASONINGS]


@pytest.mark.parametrize("front", FRONT_NAMES)
def test_held_reasoning_comes_before_the_content_in_every_front(front):
    texts = ["The answer is 4.", "\n\nThe answer is 4.", *fuzzed(40, seed=7)]
    answers, live = _same_in_both_modes(front, texts, size=3, answers_of=_after_reasoning)
    assert answers >= len(texts) * len(_REASONINGS)
    assert live > answers // 3


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
_ARGUMENTS = st.dictionaries(st.sampled_from(["path", "city", "n", "q"]),
                             st.one_of(st.integers(-1000, 1000), _TEXT, st.none()),
                             max_size=3).map(lambda d: orjson.dumps(d).decode())
_CALL = st.builds(lambda i, name, args: {"id": f"chatcmpl-tool-{i}", "type": "function",
                                         "function": {"name": name, "arguments": args}},
                  st.integers(0, 10**6), st.sampled_from([*TOOL_NAMES, "not_offered"]),
                  _ARGUMENTS)


@settings(max_examples=150, deadline=None)
@given(content=st.one_of(st.none(), _TEXT), reasoning=st.one_of(st.none(), _TEXT),
       calls=st.lists(_CALL, max_size=3, unique_by=lambda c: c["id"]),
       finish=st.sampled_from(["stop", "length", "tool_calls"]), choices=st.integers(1, 2),
       size=st.integers(1, 9), cumulative=st.booleans(), ids=st.booleans(),
       indexes=st.booleans())
@pytest.mark.parametrize("front", FRONT_NAMES)
def test_upstreams_own_calls_give_the_same_message_in_both_modes(
        front, content, reasoning, calls, finish, choices, size, cumulative, ids, indexes):
    """vLLM's own parsed calls, streamed as deltas or as llama.cpp's snapshots, with or
    without their ids and indices: accumulated whole, they come out as the buffered ones
    (the Responses and Messages fronts answer the first choice; minted ids compare by
    shape)."""
    if not (ids or indexes) and len({c["function"]["name"] for c in calls}) < len(calls):
        calls = calls[:1]  # neither id nor index: only a new name tells a new call apart
    completion = vllm_completion(content, reasoning=reasoning, tool_calls=calls,
                                 finish_reason=finish, choices=choices)
    buffered, streamed = both_modes(completion, front=front, size=size, cumulative=cumulative,
                                    ids=ids, indexes=indexes)
    if not ids:  # upstream's ids left out: minted ones in their place
        for call in _calls(buffered) + _calls(streamed):
            call["call_id" if "call_id" in call else "id"] = "…"
    assert streamed == buffered


def _calls(assembled: dict) -> list[dict]:
    """The calls of an assembled answer (chat's tool calls, Responses' call items, Ollama's
    message's calls; a Messages tool_use id is minted anyway, so compared by shape
    already)."""
    if "calls" in assembled:
        return assembled["calls"]
    if "choices" in assembled:
        return [call for choice in assembled["choices"]
                for call in choice["message"].get("tool_calls") or ()]
    return [item for item in assembled.get("output") or () if "call_id" in item]
