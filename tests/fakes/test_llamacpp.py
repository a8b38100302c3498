"""The fake llama-server takes, refuses and ignores what llama.cpp's server source says,
constrains answers as its grammars do (and, like the newest builds, does not enforce
`required` nor honour a named choice), and answers in its shapes, read back by the official
OpenAI SDK. Each rule cites the llama.cpp source it copies (ggml-org/llama.cpp, newest
snapshot read); the known bugs cite their issue."""

from __future__ import annotations

import openai
import orjson
import pytest
import requests

from tests.fakes.constraints import Constraint, fit_errors
from tests.fakes.helpers import TOOLS, USER, parameters_of, sdk
from tests.fakes.llamacpp import BUILD, NEWEST_BUILD, PEG_BUILD, FakeLlamaCpp
from tests.fakes.models import botches_arguments, never_calls_unless_constrained, says
from tests.fakes.schema import schema_errors
from tests.fakes.template import ChatTemplate

SEARCH = parameters_of("search")
PROSE = "I would rather describe what to do."


@pytest.fixture
def llama(serve):
    fake = serve(FakeLlamaCpp)
    fake.behave(never_calls_unless_constrained(script="call:read"))
    return fake


def _post(fake, path="/v1/chat/completions", **fields):
    return requests.post(fake.url + path, timeout=5, json={"messages": USER, **fields})


def _message(fake, **request):
    return sdk(fake).chat.completions.create(model="m", messages=USER, **request).choices[0]


# -- identity endpoints -----------------------------------------------------------------------

@pytest.mark.parametrize("opens", [True, False])
def test_props_give_the_context_the_template_and_the_build(serve, opens):
    fake = serve(FakeLlamaCpp, n_ctx=65536, template=ChatTemplate(opens_thinking=opens))
    props = requests.get(fake.url + "/props", timeout=5).json()
    # tools/server/server-context.cpp: props JSON, n_ctx per slot under
    # default_generation_settings; chat_template is the template's source
    assert props["default_generation_settings"]["n_ctx"] == 65536
    assert props["build_info"] == BUILD
    assert "<tool_call>" in props["chat_template"]
    assert ("<think>" in props["chat_template"]) is opens
    assert props["chat_template_caps"]["supports_tool_calls"] is True
    assert requests.get(fake.url + "/health", timeout=5).json() == {"status": "ok"}
    models = requests.get(fake.url + "/v1/models", timeout=5).json()
    assert models["data"][0]["owned_by"] == "llamacpp"
    assert models["data"][0]["meta"]["n_ctx"] == 65536
    assert models["models"][0]["model"] == fake.model  # Ollama's listing beside OpenAI's


@pytest.mark.parametrize("opens", [True, False])
def test_apply_template_renders_the_prompt_without_generating(serve, opens):
    fake = serve(FakeLlamaCpp, template=ChatTemplate(opens_thinking=opens))
    # tools/server: /apply-template runs oaicompat_chat_params_parse, answers {"prompt"}
    answer = _post(fake, "/apply-template", tools=TOOLS).json()
    assert set(answer) == {"prompt"}
    assert "<tool_call>" in answer["prompt"]
    assert answer["prompt"].endswith("<|im_start|>assistant\n<think>\n" if opens
                                     else "<|im_start|>assistant\n")
    assert fake.chat_requests() == []
    refused = _post(fake, "/apply-template", response_format={"type": "structural_tag"})
    assert refused.status_code == 400


# -- refusals ---------------------------------------------------------------------------------

REFUSED = [
    # server-common.cpp: oaicompat_chat_params_parse. std::runtime_error → 500 server_error,
    # std::invalid_argument → 400 invalid_request_error (ex_wrapper, format_error_response)
    ({"json_schema": SEARCH, "grammar": "root ::= \"x\""}, 500,
     "Cannot use both json_schema and grammar"),
    ({"response_format": {"type": "structural_tag", "structures": []}}, 400,
     'response_format type must be one of "text" or "json_object", but got: structural_tag'),
    ({"tools": TOOLS, "grammar": "root ::= \"x\""}, 400,
     "Cannot use custom grammar constraints with tools."),
    ({"messages": [{"role": "user"}]}, 400, "All non-assistant messages must contain 'content'"),
    ({"messages": [{"role": "assistant"}]}, 400,
     "Assistant message must contain either 'content' or 'tool_calls'!"),
    ({"top_logprobs": 3}, 400, "top_logprobs requires logprobs to be set to true"),
    ({"tools": TOOLS, "logprobs": True, "stream": True}, 400,
     "logprobs is not supported with tools + stream"),
    # common/chat.cpp: common_chat_tool_choice_parse_oaicompat
    ({"tools": TOOLS, "tool_choice": "any"}, 400, "Invalid tool_choice: any"),
]


@pytest.mark.parametrize(("fields", "status", "message"), REFUSED)
def test_what_llama_server_refuses_comes_in_its_error_shape(llama, fields, status, message):
    response = _post(llama, **fields)
    assert response.status_code == status
    kind = {400: "invalid_request_error", 500: "server_error"}[status]
    assert response.json() == {"error": {"code": status, "message": message, "type": kind}}


def test_without_jinja_tools_and_tool_choice_are_500s_but_a_named_choice_slips_through(serve):
    fake = serve(FakeLlamaCpp, jinja=False)
    # server-common.cpp: "tools param requires --jinja flag" (runtime_error: 500)
    assert _post(fake, tools=TOOLS).json()["error"]["message"] == \
        "tools param requires --jinja flag"
    refused = _post(fake, tool_choice="required")
    assert refused.status_code == 500
    assert refused.json()["error"]["message"] == "tool_choice param requires --jinja flag"
    # json_value(body, "tool_choice", "auto") reads an object as "auto"
    assert _post(fake, tool_choice={"type": "function", "function": {"name": "x"}}).ok


# -- constraints taken ------------------------------------------------------------------------

TAKEN = [
    ({"json_schema": SEARCH}, Constraint("json_schema", SEARCH)),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": SEARCH}}},
     Constraint("json_schema", SEARCH)),
    ({"response_format": {"type": "json_object", "schema": SEARCH}},
     Constraint("json_schema", SEARCH)),
    ({"grammar": 'root ::= "call:read"'}, Constraint("regex", "call:read")),
]


@pytest.mark.parametrize(("fields", "constraint"), TAKEN)
def test_json_schema_grammar_and_response_format_are_honoured(llama, fields, constraint):
    # server-common.cpp: json_schema, grammar, response_format (json_object/json_schema)
    content = _message(llama, extra_body=fields).message.content
    assert fit_errors(constraint, content) == []
    assert llama.ignored == [set()]


def test_fields_it_does_not_read_are_copied_and_ignored(llama):
    # server-common.cpp: "Copy remaining properties to llama_params"
    content = _message(llama, extra_body={"structured_outputs": {"json": SEARCH},
                                          "guided_json": SEARCH}).message.content
    assert content == PROSE
    assert llama.ignored == [{"structured_outputs", "guided_json"}]


# -- tool choice: the newest builds' behaviour -----------------------------------------------

def test_required_is_accepted_and_not_enforced(llama):
    # ggml-org/llama.cpp#27217, #27767: the model may answer in prose
    choice = _message(llama, tools=TOOLS, tool_choice="required")
    assert (choice.message.content, choice.message.tool_calls) == (PROSE, None)
    assert choice.finish_reason == "stop"


def test_a_build_that_enforces_required_makes_the_call_and_it_fits(serve):
    fake = serve(FakeLlamaCpp, enforces_required=True)
    fake.behave(never_calls_unless_constrained())
    choice = _message(fake, tools=TOOLS, tool_choice="required")
    (call,) = choice.message.tool_calls
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None  # to_json_oaicompat: null beside calls
    assert schema_errors(orjson.loads(call.function.arguments),
                         parameters_of(call.function.name)) == []


def test_a_named_choice_is_silently_read_as_auto(llama):
    # server-common.cpp: json_value(body, "tool_choice", "auto"); #26535 (PR #28806 unmerged)
    choice = _message(llama, tools=TOOLS,
                      tool_choice={"type": "function", "function": {"name": "read"}})
    assert (choice.message.content, choice.message.tool_calls) == (PROSE, None)


@pytest.mark.parametrize("how", ["broken", "violating"])
def test_the_lazy_tool_grammar_shapes_a_call_the_model_opens(serve, how):
    fake = serve(FakeLlamaCpp)
    fake.behave(botches_arguments(how))
    # common/chat.cpp: with tools, a grammar armed by the call's opener
    (call,) = _message(fake, tools=TOOLS).message.tool_calls
    assert call.function.name == "search"
    assert schema_errors(orjson.loads(call.function.arguments), SEARCH) == []


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_tools_with_a_json_schema_take_the_generic_handler(llama, choice):
    # common/chat.cpp: "Use generic handler when mixing tools + JSON schema"
    answer = _message(llama, tools=TOOLS, tool_choice=choice,
                      response_format={"type": "json_schema",
                                       "json_schema": {"name": "r", "schema": {"type": "string"}}})
    (call,) = answer.message.tool_calls
    assert answer.finish_reason == "tool_calls"
    assert schema_errors(orjson.loads(call.function.arguments),
                         parameters_of(call.function.name)) == []


# -- shapes -----------------------------------------------------------------------------------

def test_the_completion_carries_timings_and_the_build_as_fingerprint(llama):
    completion = sdk(llama).chat.completions.create(model="m", messages=USER)
    # tools/server/server-task.cpp: to_json_oaicompat_chat
    assert completion.system_fingerprint == BUILD
    assert set(completion.model_extra["timings"]) >= {"prompt_n", "predicted_n",
                                                      "predicted_per_second"}
    assert completion.choices[0].message.content == PROSE


def test_a_stream_assembles_to_the_same_call_with_usage_at_the_end(serve):
    fake = serve(FakeLlamaCpp, enforces_required=True)
    fake.behave(never_calls_unless_constrained())
    chunks = list(sdk(fake).chat.completions.create(
        model="m", messages=USER, tools=TOOLS, tool_choice="required", stream=True,
        stream_options={"include_usage": True}))
    deltas = [c for chunk in chunks for choice in chunk.choices
              for c in choice.delta.tool_calls or ()]
    arguments = "".join(d.function.arguments or "" for d in deltas)
    assert deltas[0].function.name == "search"
    assert schema_errors(orjson.loads(arguments), SEARCH) == []
    assert [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason] \
        == ["tool_calls"]
    assert chunks[-1].usage.total_tokens == 52
    assert chunks[-1].choices == []


def test_an_unknown_path_is_llamas_404(llama):
    response = requests.get(llama.url + "/nope", timeout=5)
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"
    with pytest.raises(openai.NotFoundError):
        sdk(llama, "/nope").models.list()


# -- a call its chat parser cannot read, by build (CHAT: common_chat_peg_parse) ---------------

XML_CALL = ("<tool_call>\n<function=read>\n<parameter=path>\na\n</parameter>\n</function>\n"
            "</tool_call>")


@pytest.mark.parametrize(("build", "message"), [
    (PEG_BUILD, f"Failed to parse input at pos 6: {XML_CALL}"),
    (NEWEST_BUILD, "The model produced output that does not match the expected peg-native "
                   "format"),
])
def test_a_call_its_parser_cannot_read_is_a_500_with_the_output_from_where_it_stopped(
        serve, build, message):
    fake = serve(lambda: FakeLlamaCpp(build=build))
    fake.behave(says(f"Look.\n{XML_CALL}"))
    answer = _post(fake, tools=TOOLS)
    assert answer.status_code == 500
    assert answer.json() == {"error": {"code": 500, "message": message,
                                       "type": "server_error"}}


def test_streamed_the_error_event_follows_what_was_sent_and_ends_it_without_done(serve):
    fake = serve(lambda: FakeLlamaCpp(build=PEG_BUILD))
    fake.behave(says(f"Look.\n{XML_CALL}"))
    answer = _post(fake, tools=TOOLS, stream=True)
    assert answer.status_code == 200
    events = [line.removeprefix("data: ") for line in answer.text.split("\n\n") if line]
    assert "[DONE]" not in events
    text = "".join((orjson.loads(e)["choices"][0]["delta"].get("content") or "")
                   for e in events[:-1])
    assert text == "Look.\n"
    assert orjson.loads(events[-1])["error"]["message"].startswith(
        "Failed to parse input at pos 6: <tool_call>")


@pytest.mark.parametrize("text", [XML_CALL, "Look.\n" + XML_CALL])
def test_before_the_peg_parser_and_without_tools_the_output_is_the_content(serve, text):
    old = serve(FakeLlamaCpp)  # BUILD: the content-only fallback of the old parser
    old.behave(says(text))
    assert _message(old, tools=TOOLS).message.content == text
    new = serve(lambda: FakeLlamaCpp(build=PEG_BUILD))
    new.behave(says(text))
    assert _message(new).message.content == text  # no tools: no chat parser to fail
