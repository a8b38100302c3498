"""The fake vLLM 0.33 takes, refuses and ignores what vLLM's source says, honours each
constraint with an answer that fits it, and answers in vLLM's shapes, read back by the official
OpenAI SDK. Each rule cites the vLLM source it copies (vllm-project/vllm, newest snapshot)."""

from __future__ import annotations

import openai
import orjson
import pytest
import requests

from tests.fakes.base import Answer
from tests.fakes.constraints import Constraint, fit_errors
from tests.fakes.helpers import TOOLS, USER, parameters_of, sdk
from tests.fakes.models import botches_arguments, never_calls_unless_constrained, says
from tests.fakes.schema import schema_errors
from tests.fakes.template import ChatTemplate
from tests.fakes.vllm import FakeVLLM
from tests.fakes.vllm_shapes import vllm_completion

SEARCH = parameters_of("search")
NAMED = {"type": "function", "function": {"name": "search"}}
LOOSE = [{**t, "function": {**t["function"], "strict": False}} for t in TOOLS]
STRICT = [{**t, "function": {**t["function"], "strict": True}} for t in TOOLS]


@pytest.fixture
def parser_less(serve):
    fake = serve(FakeVLLM, tool_parser=None)
    fake.behave(never_calls_unless_constrained())
    return fake


@pytest.fixture
def with_parser(serve):
    fake = serve(FakeVLLM, tool_parser="hermes")
    fake.behave(never_calls_unless_constrained())
    return fake


def _refusal(fake, **request):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(fake).chat.completions.create(model="m", messages=USER, **request)
    return caught.value.body


# -- identity and profile endpoints -------------------------------------------------------

def test_version_health_and_models_are_vllms(serve):
    fake = serve(FakeVLLM, max_model_len=40960)
    # vllm/frontend/entrypoints/serve/instrumentator/basic.py: show_version → {"version"}
    assert requests.get(fake.url + "/version", timeout=5).json() == {"version": "0.33.0"}
    # .../instrumentator/health.py: Response(status_code=200), no body
    health = requests.get(fake.url + "/health", timeout=5)
    assert (health.status_code, health.content) == (200, b"")
    # vllm/entrypoints/openai/models/protocol.py: ModelCard.max_model_len
    (card,) = sdk(fake).models.list().data
    assert card.id == fake.model
    assert card.model_extra["max_model_len"] == 40960


@pytest.mark.parametrize("opens", [True, False])
def test_tokenize_renders_the_chat_and_shows_whether_the_generation_prompt_opens_thinking(
        serve, opens):
    fake = serve(FakeVLLM, template=ChatTemplate(opens_thinking=opens))
    # vllm/entrypoints/serve/tokenize/protocol.py: TokenizeChatRequest.return_token_strs,
    # TokenizeResponse {count, max_model_len, tokens, token_strs}
    answer = requests.post(fake.url + "/tokenize", timeout=5, json={
        "messages": USER, "tools": TOOLS, "return_token_strs": True}).json()
    assert set(answer) == {"count", "max_model_len", "tokens", "token_strs"}
    assert answer["count"] == len(answer["tokens"]) == len(answer["token_strs"])
    prompt = "".join(answer["token_strs"])
    assert "<tool_call>" in prompt  # the template's call wrapper, shown with tools
    assert prompt.endswith("<|im_start|>assistant\n<think>\n" if opens
                           else "<|im_start|>assistant\n")
    assert (answer["token_strs"][-2:] == ["<think>", "\n"]) is opens
    plain = requests.post(fake.url + "/tokenize", timeout=5, json={"messages": USER}).json()
    assert plain["token_strs"] is None


# -- tool_choice without a parser: refused as render_chat does ------------------------------

@pytest.mark.parametrize(("choice", "message"), [
    # vllm/renderers/online_renderer.py: render_chat, "auto" without --enable-auto-tool-choice
    ("auto", '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
             "to be set"),
    # ... "required" or a named tool without a tool parser
    ("required", 'tool_choice="required" requires --tool-call-parser to be set'),
    (NAMED, 'tool_choice=function "search" requires --tool-call-parser to be set'),
])
def test_without_a_parser_auto_required_and_named_choices_are_refused(parser_less, choice,
                                                                       message):
    body = _refusal(parser_less, tools=TOOLS, tool_choice=choice)
    # error_response.py: create_error_response, type BadRequestError, integer code
    assert body == {"message": message, "type": "BadRequestError", "param": None, "code": 400}


def test_without_a_parser_tools_alone_mean_auto_and_are_refused_but_none_is_taken(parser_less):
    # vllm/entrypoints/openai/chat_completion/protocol.py: check_tool_usage defaults
    # tool_choice to "auto" when tools come without one
    assert "--enable-auto-tool-choice" in _refusal(parser_less, tools=TOOLS)["message"]
    completion = sdk(parser_less).chat.completions.create(
        model="m", messages=USER, tools=TOOLS, tool_choice="none")
    assert completion.choices[0].message.content == "I would rather describe what to do."
    assert completion.choices[0].message.tool_calls is None


# -- tool_choice with a parser: vLLM's own constrained path ---------------------------------

@pytest.mark.parametrize("parser", ["hermes", "llama3_json"])
@pytest.mark.parametrize("stream", [False, True])
def test_with_a_parser_required_is_honoured_with_calls_that_fit_the_tools(serve, parser,
                                                                          stream):
    # hermes: its structural tag (structural_tag_registry.py: get_hermes_structural_tag, at
    # least one call); a parser without one: the array schema (tool_parsers/utils.py)
    with_parser = serve(FakeVLLM, tool_parser=parser)
    with_parser.behave(never_calls_unless_constrained())
    client = sdk(with_parser)
    if stream:
        chunks = list(client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                                     tool_choice="required", stream=True))
        calls = [(c.function.name, c.function.arguments) for chunk in chunks
                 for choice in chunk.choices for c in choice.delta.tool_calls or ()]
        name = next(n for n, _ in calls if n)
        arguments = "".join(a or "" for _, a in calls)
        finish = [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason]
    else:
        message = client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                                 tool_choice="required").choices[0]
        (call,) = message.message.tool_calls
        name, arguments, finish = call.function.name, call.function.arguments, [
            message.finish_reason]
        assert message.message.content == ""
    # serving.py: finish_reason "tool_calls" for "required"
    assert finish == ["tool_calls"]
    assert name == "search"
    assert schema_errors(orjson.loads(arguments), SEARCH) == []
    sent = with_parser.chat_requests()[-1].json
    assert "structured_outputs" not in sent  # the server constrains on its own


@pytest.mark.parametrize("parser", ["hermes", "llama3_json"])
def test_with_a_parser_a_named_choice_gets_that_call_and_finish_stop(serve, parser):
    with_parser = serve(FakeVLLM, tool_parser=parser)
    with_parser.behave(never_calls_unless_constrained())
    choice = sdk(with_parser).chat.completions.create(
        model="m", messages=USER, tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "read"}}).choices[0]
    # serving.py: a named call keeps the engine's finish_reason ("stop"), content ""
    assert choice.finish_reason == "stop"
    assert choice.message.content == ""
    (call,) = choice.message.tool_calls
    assert call.function.name == "read"
    assert schema_errors(orjson.loads(call.function.arguments), parameters_of("read")) == []


def test_with_a_parser_auto_reads_calls_from_text_and_leaves_botched_ones_as_text(serve):
    fake = serve(FakeVLLM)
    client = sdk(fake)
    fake.behave(never_calls_unless_constrained("No call from me."))
    prose = client.chat.completions.create(model="m", messages=USER, tools=TOOLS).choices[0]
    assert (prose.message.content, prose.message.tool_calls) == ("No call from me.", None)
    fake.behave(botches_arguments("broken"))
    broken = client.chat.completions.create(model="m", messages=USER, tools=TOOLS).choices[0]
    # hermes_tool_parser.py: a call whose JSON cannot be read stays content
    assert broken.message.tool_calls is None
    assert broken.message.content.startswith("<tool_call>")
    fake.behave(botches_arguments("violating"))
    violating = client.chat.completions.create(model="m", messages=USER, tools=TOOLS).choices[0]
    # the parser reads JSON; it does not check the tool's schema
    (call,) = violating.message.tool_calls
    assert violating.finish_reason == "tool_calls"
    assert schema_errors(orjson.loads(call.function.arguments), SEARCH)


# -- constraint fields taken at 0.33 ----------------------------------------------------------

TAG = {"type": "structural_tag", "format": {
    "type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True,
    "tags": [{"type": "tag", "begin": '<tool_call>\n{"name": "search", "arguments": ',
              "content": {"type": "json_schema", "json_schema": SEARCH},
              "end": "}\n</tool_call>"}]}}
TAKEN = [
    # vllm/sampling_params.py: StructuredOutputsParams.json / regex / choice / structural_tag
    ({"structured_outputs": {"json": SEARCH}}, Constraint("json_schema", SEARCH)),
    ({"structured_outputs": {"json": orjson.dumps(SEARCH).decode()}},
     Constraint("json_schema", SEARCH)),
    ({"structured_outputs": {"regex": r"call:(search|read)"}},
     Constraint("regex", r"call:(search|read)")),
    ({"structured_outputs": {"choice": ["search", "read"]}},
     Constraint("choice", ["search", "read"])),
    ({"structured_outputs": {"json_object": True}}, Constraint("json_object")),
    ({"structured_outputs": {"structural_tag": orjson.dumps(TAG).decode()}},
     Constraint("structural_tag", TAG)),
    # vllm/entrypoints/generate/base/protocol.py: structured_outputs_from_response_format
    ({"response_format": {"type": "json_schema",
                          "json_schema": {"name": "args", "schema": SEARCH}}},
     Constraint("json_schema", SEARCH)),
    ({"response_format": {"type": "json_object"}}, Constraint("json_object")),
    ({"response_format": TAG}, Constraint("structural_tag", TAG)),
    ({"response_format": {"type": "structural_tag", "triggers": ["<tool_call>"], "structures": [
        {"begin": "<tool_call>", "schema": SEARCH, "end": "</tool_call>"}]}},
     Constraint("structural_tag", {"type": "structural_tag", "triggers": ["<tool_call>"],
                                   "structures": [{"begin": "<tool_call>", "schema": SEARCH,
                                                   "end": "</tool_call>"}]})),
]


@pytest.mark.parametrize(("fields", "constraint"), TAKEN)
@pytest.mark.parametrize("tool_parser", ["hermes", None])
def test_each_constraint_field_is_honoured_with_an_answer_that_fits(serve, fields, constraint,
                                                                    tool_parser):
    fake = serve(FakeVLLM, tool_parser=tool_parser)
    fake.behave(never_calls_unless_constrained(script="call:read"))
    completion = sdk(fake).chat.completions.create(model="m", messages=USER, extra_body=fields)
    assert fit_errors(constraint, completion.choices[0].message.content) == []
    assert fake.ignored == [set()]


def test_the_removed_guided_fields_are_ignored_so_nothing_constrains(with_parser):
    completion = sdk(with_parser).chat.completions.create(
        model="m", messages=USER,
        extra_body={"guided_json": SEARCH, "guided_decoding_backend": "xgrammar"})
    # engine/protocol.py: OpenAIBaseModel logs "present in the request but ignored"
    assert completion.choices[0].message.content == "I would rather describe what to do."
    assert with_parser.ignored == [{"guided_json", "guided_decoding_backend"}]


# -- refusals before generating ---------------------------------------------------------------

REFUSED = [
    # chat_completion/protocol.py: check_structured_outputs_count
    ({"structured_outputs": {"json": SEARCH, "regex": "x"}},
     "You can only use one kind of constraints for structured outputs", None),
    ({"structured_outputs": {"json": SEARCH}, "tools": TOOLS, "tool_choice": NAMED},
     "You can only either use constraints for structured outputs or tools, not both.", None),
    # sampling_params.py: StructuredOutputsParams.__post_init__ (exactly one kind)
    ({"structured_outputs": {"grammar": "root ::= x", "structural_tag": "{}"}},
     "multiple are specified", "body.structured_outputs"),
    ({"structured_outputs": {}}, "none are specified", "body.structured_outputs"),
    ({"structured_outputs": {"structural_tag": TAG}}, "Input should be a valid string",
     "body.structured_outputs.structural_tag"),
    # chat_completion/protocol.py: validate_response_format; base/protocol.py: name required,
    # validate_structural_tag_response_format
    ({"response_format": {"type": "json_schema"}},
     "the 'json_schema' field must be provided.", "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": SEARCH}}},
     "Field required", "body.response_format.json_schema.name"),
    ({"response_format": {"type": "structural_tag", "structures": [{"begin": "<a>"}]}},
     "Invalid response_format structural_tag specification.", "response_format"),
    ({"response_format": {"type": "grammar", "grammar": "root ::= x"}},
     "does not match any of the expected tags", "body.response_format"),
    # chat_completion/protocol.py: check_tool_usage
    ({"tools": []}, "`tools` must not be an empty array.", "tools"),
    ({"tool_choice": "required"}, "When using `tool_choice`, `tools` must be set.",
     "tool_choice"),
    ({"tools": TOOLS, "tool_choice": "any"}, "Invalid value for `tool_choice`: any!",
     "tool_choice"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "does not match any of the specified `tools`", "tool_choice"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {}}},
     "Expected field `name` in `function` in `tool_choice`!", "tool_choice.function.name"),
    # validate_stream_options
    ({"stream_options": {"include_usage": True}},
     "Stream options can only be defined when `stream=True`.", "stream_options"),
]


@pytest.mark.parametrize(("fields", "reason", "param"), REFUSED)
def test_what_vllms_validators_refuse_is_a_400_bad_request_naming_the_parameter(
        with_parser, fields, reason, param):
    response = requests.post(with_parser.url + "/v1/chat/completions", timeout=5,
                             json={"model": "m", "messages": USER, **fields})
    assert response.status_code == 400
    error = response.json()["error"]
    # exception_handling/handlers/validation.py: "N validation error(s)", "Bad Request"
    assert error["message"].startswith("1 validation error:")
    assert reason in error["message"]
    assert (error["type"], error["param"], error["code"]) == ("Bad Request", param, 400)
    assert with_parser.ignored == []


def test_an_unscripted_grammar_is_a_500_not_a_silent_answer(with_parser):
    with pytest.raises(openai.InternalServerError):
        sdk(with_parser).chat.completions.create(
            model="m", messages=USER, extra_body={"structured_outputs": {"grammar": "root"}})


def test_a_scripted_answer_replaces_the_behaviour_and_unknown_paths_are_404(serve):
    fake = serve(FakeVLLM)
    fake.behave(never_calls_unless_constrained("prose"))
    fake.answer(Answer(body=vllm_completion("scripted")))
    completion = sdk(fake).chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].message.content == "scripted"
    fake.behave(never_calls_unless_constrained("prose"))
    assert sdk(fake).chat.completions.create(model="m", messages=USER).choices[0] \
        .message.content == "prose"
    assert requests.post(fake.url + "/v1/unknown", timeout=5, json={}).status_code == 404


def test_parallel_tool_calls_false_keeps_the_first_call_only(with_parser):
    two = "".join(f'<tool_call>\n{{"name": "read", "arguments": {{"path": "{p}"}}}}\n</tool_call>'
                  for p in ("a", "b"))
    with_parser.behave(says(two))
    both = _choice_of(with_parser, tools=TOOLS)
    assert [c.function.arguments for c in both.message.tool_calls] == [
        '{"path":"a"}', '{"path":"b"}']
    # vllm/entrypoints/serve/utils/tool_calls_utils.py: maybe_filter_parallel_tool_calls
    first = _choice_of(with_parser, tools=TOOLS, parallel_tool_calls=False)
    assert [c.function.arguments for c in first.message.tool_calls] == ['{"path":"a"}']


@pytest.mark.parametrize("include", [True, False])
def test_a_stream_carries_usage_only_when_asked(with_parser, include):
    chunks = list(sdk(with_parser).chat.completions.create(
        model="m", messages=USER, stream=True, stream_options={"include_usage": include}))
    # serve/utils/api_utils.py: should_include_usage
    assert (chunks[-1].usage is not None) is include
    assert "".join(c.delta.content or "" for chunk in chunks for c in chunk.choices) == \
        "I would rather describe what to do."


def _choice_of(fake, **request):
    return sdk(fake).chat.completions.create(model="m", messages=USER, **request).choices[0]


def test_the_tag_holds_arguments_to_the_schema_unless_the_tool_says_strict_false(serve):
    fake = serve(FakeVLLM)
    fake.behave(botches_arguments("violating"))
    # structural_tag_registry.py: get_function_parameters (strict false: any JSON)
    (held,) = _choice_of(fake, tools=TOOLS, tool_choice="required").message.tool_calls
    assert schema_errors(orjson.loads(held.function.arguments), SEARCH) == []
    (free,) = _choice_of(fake, tools=LOOSE, tool_choice="required").message.tool_calls
    assert schema_errors(orjson.loads(free.function.arguments), SEARCH)
    pinned = serve(FakeVLLM, tool_strict_level="parameter")  # as if every tool were strict
    pinned.behave(botches_arguments("violating"))
    (call,) = _choice_of(pinned, tools=LOOSE, tool_choice="required").message.tool_calls
    assert schema_errors(orjson.loads(call.function.arguments), SEARCH) == []


@pytest.mark.parametrize(("tools", "level"), [(STRICT, "auto"), (TOOLS, "function")])
def test_auto_is_shaped_when_a_tool_is_strict_or_the_level_says_so(serve, tools, level):
    fake = serve(FakeVLLM, tool_strict_level=level)
    fake.behave(botches_arguments("broken"))
    # get_model_structural_tag: auto without a strict tool has no tag (at level auto)
    (call,) = _choice_of(fake, tools=tools).message.tool_calls
    assert schema_errors(orjson.loads(call.function.arguments), SEARCH) == []
    fake.behave(never_calls_unless_constrained("Words."))
    assert _choice_of(fake, tools=tools).message.content == "Words."  # the tag only triggers
