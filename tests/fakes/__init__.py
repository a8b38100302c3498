"""Fakes of the inference servers the proxy sits beside, each on loopback with the real
server's identity endpoints, the fields it takes, refuses and ignores, its own constraint for a
demanded call, and its answer shapes: FakeVLLM (tests/fakes/vllm.py), FakeLlamaCpp
(tests/fakes/llamacpp.py), FakeSGLang (tests/fakes/sglang.py), FakeOllama
(tests/fakes/ollama.py). docs/upstreams.md sums them up.

Each runs a model behaviour (tests/fakes/models.py) under the constraint its server would
decode with, or a scripted answer:

    fake = FakeVLLM(tool_parser=None)              # started without --tool-call-parser
    fake.behave(never_calls_unless_constrained())  # prose, unless constrained
    fake.behave(botches_arguments("violating"))    # its markers, arguments off the schema
    fake.answer(Answer(body=vllm_completion("…")))  # a fixed answer, as before
    fake.received, fake.chat_requests(), fake.ignored  # what it got, and what it ignored
"""
