"""The fake SGLang server takes, refuses and ignores what SGLang's source says, constrains
demanded calls as its own tool-call path does (a structural tag that forces a call but checks
the arguments only for `strict` tools; a JSON array without a parser), honours the request's own
constraint first, and answers in its shapes, read back by the official OpenAI SDK. Each rule
cites the SGLang source it copies (sgl-project/sglang, newest snapshot read)."""

from __future__ import annotations

import openai
import orjson
import pytest
import requests

from tests.fakes.constraints import Constraint, fit_errors
from tests.fakes.helpers import TOOLS, USER, parameters_of, sdk
from tests.fakes.models import botches_arguments, never_calls_unless_constrained
from tests.fakes.schema import schema_errors
from tests.fakes.sglang import EOS_TOKEN, FakeSGLang

SEARCH = parameters_of("search")
PROSE = "I would rather describe what to do."
STRICT = [{**t, "function": {**t["function"], "strict": True}} for t in TOOLS]
TAG = {"type": "structural_tag", "triggers": ["<tool_call>"], "at_least_one": True,
       "structures": [{"begin": '<tool_call>\n{"name":"search", "arguments":', "schema": SEARCH,
                       "end": "}\n</tool_call>"}]}


@pytest.fixture
def sglang(serve):
    fake = serve(FakeSGLang)
    fake.behave(never_calls_unless_constrained(script="call:read"))
    return fake


def _post(fake, **fields):
    return requests.post(fake.url + "/v1/chat/completions", timeout=5,
                         json={"model": "m", "messages": USER, **fields})


def _choice(fake, **request):
    return sdk(fake).chat.completions.create(model="m", messages=USER, **request).choices[0]


def _arguments(call):
    return orjson.loads(call.function.arguments)


# -- identity endpoints -----------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/get_server_info", "/server_info"])
def test_server_info_gives_version_parsers_and_grammar_backend(serve, path):
    fake = serve(FakeSGLang, reasoning_parser="qwen3", context_length=40960)
    info = requests.get(fake.url + path, timeout=5).json()
    # entrypoints/http_server.py: get_server_info = server args + scheduler info + version
    assert info["version"] == "0.5.9"
    assert (info["tool_call_parser"], info["reasoning_parser"], info["grammar_backend"]) == (
        "qwen25", "qwen3", "xgrammar")
    assert info["context_length"] is None  # the argument; the model's length is below
    assert info["max_req_input_len"] < 40960
    # protocol.py: ModelCard.max_model_len
    (card,) = sdk(fake).models.list().data
    assert card.model_extra["max_model_len"] == 40960
    assert requests.get(fake.url + "/get_model_info", timeout=5).json()["is_generation"]
    health = requests.get(fake.url + "/health", timeout=5)
    assert (health.status_code, health.content) == (200, b"")


# -- refusals ---------------------------------------------------------------------------------

SERVING_REFUSALS = [
    # entrypoints/openai/serving_chat.py: _validate_request
    ({"messages": []}, "Messages cannot be empty."),
    ({"tool_choice": "required"}, "Tools cannot be empty if tool choice is set to required."),
    ({"tool_choice": {"type": "function", "function": {"name": "read"}}},
     "Tools cannot be empty if tool choice is set to a specific tool."),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "Tool 'nope' not found in tools list."),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "schema_ is required for json_schema response format request."),
    # sampling/sampling_params.py: verify
    ({"regex": "a", "ebnf": "root ::= \"a\""},
     "Only one of regex, json_schema, or ebnf can be set."),
    ({"regex": "a", "response_format": {"type": "json_object"}},
     "Only one of regex, json_schema, or ebnf can be set."),
]


@pytest.mark.parametrize(("fields", "message"), SERVING_REFUSALS)
def test_what_sglang_refuses_is_a_flat_400_bad_request_error(sglang, fields, message):
    response = _post(sglang, **fields)
    assert response.status_code == 400
    # entrypoints/openai/protocol.py: ErrorResponse, not wrapped in "error"
    assert response.json() == {"object": "error", "message": message,
                               "type": "BadRequestError", "param": None, "code": 400}


@pytest.mark.parametrize("fields", [
    {"response_format": {"type": "grammar", "grammar": "root ::= x"}},
    {"response_format": {"type": "json_schema", "json_schema": {"schema": SEARCH}}},
    {"tools": TOOLS, "tool_choice": "any"},
])
def test_a_body_its_model_refuses_is_a_400_bad_request(sglang, fields):
    response = _post(sglang, **fields)
    assert response.status_code == 400
    assert response.json()["type"] == "Bad Request"
    with pytest.raises(openai.BadRequestError):
        sdk(sglang).chat.completions.create(model="m", messages=USER, extra_body=fields)


# -- constraints taken, and ignored -----------------------------------------------------------

TAKEN = [
    # protocol.py: to_sampling_params — response_format, regex, ebnf
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": SEARCH}}},
     Constraint("json_schema", SEARCH)),
    ({"response_format": {"type": "json_object"}}, Constraint("json_object")),
    ({"response_format": TAG}, Constraint("structural_tag", TAG)),
    ({"regex": "call:(search|read)"}, Constraint("regex", "call:(search|read)")),
    ({"ebnf": 'root ::= "call:read"'}, Constraint("regex", "call:read")),
]


@pytest.mark.parametrize(("fields", "constraint"), TAKEN)
def test_its_constraint_fields_are_honoured(sglang, fields, constraint):
    content = _choice(sglang, extra_body=fields).message.content
    assert fit_errors(constraint, content) == []
    assert sglang.ignored == [set()]


def test_fields_it_does_not_declare_are_dropped(sglang):
    # protocol.py: ChatCompletionRequest is a plain BaseModel (extra fields ignored); a chat
    # request has no top-level json_schema (the completion request has)
    content = _choice(sglang, extra_body={"structured_outputs": {"json": SEARCH},
                                          "guided_json": SEARCH, "json_schema": SEARCH}
                      ).message.content
    assert content == PROSE
    assert sglang.ignored == [{"structured_outputs", "guided_json", "json_schema"}]


def test_the_requests_own_constraint_wins_over_the_tools(sglang):
    # protocol.py: to_sampling_params — "Constrained decoding is not compatible with tool calls"
    choice = _choice(sglang, tools=TOOLS, tool_choice="required",
                     response_format={"type": "json_schema",
                                      "json_schema": {"name": "a", "schema": SEARCH}})
    assert choice.message.tool_calls is None
    assert schema_errors(orjson.loads(choice.message.content), SEARCH) == []


# -- tool choice with a parser: its structural tag --------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
def test_required_forces_a_call_in_the_models_own_wrapper(sglang, stream):
    # function_call/function_call_parser.py: get_structure_constraint → legacy structural tag
    # with at_least_one for required and named choices
    if stream:
        chunks = list(sdk(sglang).chat.completions.create(
            model="m", messages=USER, tools=TOOLS, tool_choice="required", stream=True))
        deltas = [c for chunk in chunks for ch in chunk.choices for c in ch.delta.tool_calls or ()]
        finish = [ch.finish_reason for chunk in chunks for ch in chunk.choices if ch.finish_reason]
        assert {d.index for d in deltas} == {0}
        call = deltas[0]
        call.function.arguments = "".join(d.function.arguments or "" for d in deltas)
    else:
        choice = _choice(sglang, tools=TOOLS, tool_choice="required")
        (call,), finish = choice.message.tool_calls, [choice.finish_reason]
    assert finish == ["tool_calls"]
    assert call.function.name == "search"
    assert call.id.startswith("call_")
    assert schema_errors(_arguments(call), SEARCH) == []


def test_the_forced_call_checks_arguments_only_for_strict_tools(serve):
    fake = serve(FakeSGLang)
    fake.behave(botches_arguments("violating"))
    # get_legacy_structural_tag: "Schema is only included when strict=True"
    (loose,) = _choice(fake, tools=TOOLS, tool_choice="required").message.tool_calls
    assert schema_errors(_arguments(loose), SEARCH)
    (strict,) = _choice(fake, tools=STRICT, tool_choice="required").message.tool_calls
    assert schema_errors(_arguments(strict), SEARCH) == []


def test_a_named_choice_shows_the_template_that_tool_only_and_gets_its_call(sglang):
    # serving_chat.py: _process_messages keeps the named tool for the template
    (call,) = _choice(sglang, tools=TOOLS, tool_choice={
        "type": "function", "function": {"name": "read"}}).message.tool_calls
    assert call.function.name == "read"
    assert schema_errors(_arguments(call), parameters_of("read")) == []


def test_auto_is_free_and_a_botched_call_vanishes(serve):
    fake = serve(FakeSGLang)
    fake.behave(never_calls_unless_constrained())
    assert _choice(fake, tools=TOOLS).message.content == PROSE
    fake.behave(botches_arguments("broken"))
    # function_call/qwen25_detector.py: detect_and_parse skips a call whose JSON fails
    broken = _choice(fake, tools=TOOLS)
    assert (broken.message.content, broken.message.tool_calls) == ("", None)
    fake.behave(botches_arguments("violating"))
    (call,) = _choice(fake, tools=TOOLS).message.tool_calls
    assert schema_errors(_arguments(call), SEARCH)


def test_auto_with_a_strict_tool_shapes_an_opened_call(serve):
    fake = serve(FakeSGLang)
    fake.behave(botches_arguments("broken"))
    # get_structure_constraint: auto is constrained when a tool is strict
    (call,) = _choice(fake, tools=STRICT).message.tool_calls
    assert schema_errors(_arguments(call), SEARCH) == []


# -- tool choice without a parser: the JSON array ---------------------------------------------

@pytest.mark.parametrize(("choice", "name"), [
    ("required", "search"), ({"type": "function", "function": {"name": "read"}}, "read")])
def test_without_a_parser_demanded_calls_come_from_the_json_array(serve, choice, name):
    fake = serve(FakeSGLang, tool_call_parser=None)
    fake.behave(never_calls_unless_constrained())
    # function_call/utils.py: get_json_schema_constraint
    answer = _choice(fake, tools=TOOLS, tool_choice=choice)
    (call,) = answer.message.tool_calls
    assert call.function.name == name
    assert schema_errors(_arguments(call), parameters_of(name)) == []
    assert _choice(fake, tools=TOOLS).message.content == PROSE  # auto: nothing to parse with


# -- shapes -----------------------------------------------------------------------------------

def test_the_completion_is_sglangs(sglang):
    completion = sdk(sglang).chat.completions.create(model="m", messages=USER)
    choice = completion.choices[0]
    # protocol.py: ChatCompletionResponseChoice.matched_stop, ChatMessage.reasoning_content,
    # ChatCompletionResponse.metadata, UsageInfo.reasoning_tokens
    assert choice.model_extra["matched_stop"] == EOS_TOKEN
    assert choice.message.model_extra["reasoning_content"] is None
    assert completion.to_dict()["metadata"] == {"weight_version": "default"}
    assert completion.usage.model_extra["reasoning_tokens"] == 0
