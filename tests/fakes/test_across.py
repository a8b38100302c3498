"""What every fake does alike with the same model behaviour: the reasoning in the server's own
field, the prose of a model that will not call, and the scripted answer that replaces it."""

from __future__ import annotations

import pytest

from tests.fakes.base import Answer
from tests.fakes.constraints import Constraint, fit_errors
from tests.fakes.helpers import TOOLS, USER, sdk
from tests.fakes.llamacpp import FakeLlamaCpp, llamacpp_completion
from tests.fakes.models import never_calls_unless_constrained, thinks
from tests.fakes.sglang import FakeSGLang, sglang_completion
from tests.fakes.vllm import FakeVLLM
from tests.fakes.vllm_shapes import vllm_completion

# Each server's reasoning field: vLLM's ChatMessage.reasoning, llama.cpp's and SGLang's
# reasoning_content (common_chat_msg::to_json_oaicompat; protocol.py ChatMessage).
SERVERS = [(FakeVLLM, "reasoning", vllm_completion),
           (FakeLlamaCpp, "reasoning_content", llamacpp_completion),
           (FakeSGLang, "reasoning_content", sglang_completion)]


@pytest.mark.parametrize(("kind", "field", "completion"), SERVERS)
def test_a_thinking_model_s_reasoning_comes_in_the_servers_field(serve, kind, field,
                                                                 completion):
    fake = serve(kind)
    fake.behave(thinks("Let me look.", never_calls_unless_constrained("No call.")))
    message = sdk(fake).chat.completions.create(model="m", messages=USER,
                                                tools=TOOLS, tool_choice="none"
                                                ).choices[0].message
    assert message.content == "No call."
    assert message.model_extra[field] == "Let me look."
    fake.answer(Answer(body=completion("scripted")))
    assert sdk(fake).chat.completions.create(model="m", messages=USER).choices[0] \
        .message.content == "scripted"


SEARCH = TOOLS[0]["function"]["parameters"]
CALLS = {"type": "array", "minItems": 1, "items": {
    "type": "object", "properties": {"name": {"type": "string", "enum": ["search"]},
                                     "arguments": SEARCH},
    "required": ["name", "arguments"], "additionalProperties": False}}
FORCED_TAG = {"type": "structural_tag", "format": {
    "type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True,
    "stop_after_first": True,
    "tags": [{"type": "tag", "begin": '<tool_call>\n{"name": "search", "arguments": ',
              "content": {"type": "json_schema", "json_schema": SEARCH},
              "end": "}\n</tool_call>"}]}}
LEGACY_FORCED = {"type": "structural_tag", "triggers": ["<tool_call>"], "at_least_one": True,
                 "structures": [{"begin": '<tool_call>\n{"name": "search", "arguments": ',
                                 "schema": SEARCH, "end": "}\n</tool_call>"}]}
# A constrained re-ask as the proxy sends it: the tools kept, tool_choice "none" (no parser
# takes the text), the constraint in a field the server takes.
REASKS = [
    (FakeVLLM, {"response_format": FORCED_TAG, "skip_special_tokens": False}, FORCED_TAG),
    (FakeVLLM, {"structured_outputs": {"json": CALLS}}, CALLS),
    (FakeSGLang, {"response_format": FORCED_TAG, "skip_special_tokens": False}, FORCED_TAG),
    (FakeSGLang, {"response_format": LEGACY_FORCED}, LEGACY_FORCED),
    (FakeSGLang, {"response_format": {"type": "json_schema",
                                      "json_schema": {"name": "calls", "schema": CALLS}}}, CALLS),
    (FakeLlamaCpp, {"json_schema": CALLS}, CALLS),
    (FakeLlamaCpp, {"response_format": {"type": "json_schema",
                                        "json_schema": {"name": "calls", "schema": CALLS}}}, CALLS),
]


@pytest.mark.parametrize(("kind", "fields", "value"), REASKS,
                         ids=[f"{k.__name__}-{next(iter(f))}" for k, f, _ in REASKS])
def test_a_constrained_reask_comes_back_as_text_that_fits(serve, kind, fields, value):
    fake = serve(kind)
    fake.behave(never_calls_unless_constrained("No call."))
    message = sdk(fake).chat.completions.create(
        model="m", messages=USER, tools=TOOLS, tool_choice="none", extra_body=fields
    ).choices[0].message
    constraint = Constraint("json_schema" if "type" not in value or value["type"] == "array"
                            else "structural_tag", value)
    assert message.tool_calls is None
    assert fit_errors(constraint, message.content) == []
    assert "<tool_call>" in message.content or message.content.startswith("[")
