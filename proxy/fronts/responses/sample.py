"""The Responses front's tool turn for `doctor`: a request as Codex sends one (a function
tool, `store: false`), and the calls of its answer."""

from __future__ import annotations

from typing import Any


def sample_request(model: str, tool: dict[str, Any], prompt: str,
                   max_tokens: int) -> dict[str, Any]:
    """A Responses API tool turn, kept nowhere."""
    return {"model": model, "input": prompt, "max_output_tokens": max_tokens, "store": False,
            "tools": [{"type": "function", "name": tool["name"],
                       "description": tool.get("description", ""),
                       "parameters": tool["parameters"]}]}


def sample_calls(answer: Any) -> list[dict[str, str]]:
    """The `function_call` items of a response."""
    output = answer.get("output") if isinstance(answer, dict) else None
    return [{"name": item["name"], "arguments": item["arguments"]}
            for item in output or () if item.get("type") == "function_call"]
