"""The Messages front's tool turn for `doctor`: a request as Claude Code sends one (a tool
with its `input_schema`, the choice left to the model), and the calls of its answer."""

from __future__ import annotations

from typing import Any

import orjson


def sample_request(model: str, tool: dict[str, Any], prompt: str,
                   max_tokens: int) -> dict[str, Any]:
    """An Anthropic Messages tool turn."""
    return {"model": model, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}],
            "tools": [{"name": tool["name"], "description": tool.get("description", ""),
                       "input_schema": tool["parameters"]}]}


def sample_calls(answer: Any) -> list[dict[str, str]]:
    """The `tool_use` blocks of a message, their input as JSON text."""
    content = answer.get("content") if isinstance(answer, dict) else None
    return [{"name": block["name"], "arguments": orjson.dumps(block["input"]).decode()}
            for block in content or () if block.get("type") == "tool_use"]
