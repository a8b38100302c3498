"""The Ollama front's tool turn for `doctor`: a request as Home Assistant sends one (a chat
function, Ollama's default stream turned off), and the calls of its answer."""

from __future__ import annotations

from typing import Any

import orjson


def sample_request(model: str, tool: dict[str, Any], prompt: str,
                   max_tokens: int) -> dict[str, Any]:
    """An Ollama `/api/chat` tool turn, answered as one object."""
    return {"model": model, "messages": [{"role": "user", "content": prompt}],
            "tools": [{"type": "function", "function": tool}], "stream": False,
            "options": {"num_predict": max_tokens}}


def sample_calls(answer: Any) -> list[dict[str, str]]:
    """The calls of the answer's message, their arguments (an object) as JSON text."""
    message = answer.get("message") if isinstance(answer, dict) else None
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return [{"name": call["function"]["name"],
             "arguments": orjson.dumps(call["function"]["arguments"]).decode()}
            for call in calls or ()]
