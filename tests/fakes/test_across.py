"""What every fake does alike with the same model behaviour: the reasoning in the server's own
field, the prose of a model that will not call, and the scripted answer that replaces it."""

from __future__ import annotations

import pytest

from tests.fakes.base import Answer
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
