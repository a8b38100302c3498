"""The fake vLLM 0.33 (tests/fakes/vllm.py) and its answer shapes (tests/fakes/vllm_shapes.py),
under the name the suite has always imported them by; `python -m tests.fake_vllm [DELAY]` runs
one in a process of its own."""

from __future__ import annotations

from tests.fakes.base import Answer, Received
from tests.fakes.vllm import FakeVLLM, main
from tests.fakes.vllm_shapes import (
    MODEL,
    fake_token_count,
    vllm_answer,
    vllm_completion,
    vllm_context_window,
    vllm_error,
    vllm_stream_chunks,
    vllm_stream_of,
    vllm_text_completion,
    vllm_tool_call,
)

__all__ = ["MODEL", "Answer", "FakeVLLM", "Received", "fake_token_count", "main", "vllm_answer",
           "vllm_completion", "vllm_context_window", "vllm_error", "vllm_stream_chunks",
           "vllm_stream_of", "vllm_text_completion", "vllm_tool_call"]

if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
