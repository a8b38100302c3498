"""What the fakes' own tests share: tools with demanding schemas, and the official OpenAI SDK
pointed at a fake."""

from __future__ import annotations

from typing import Any

import openai

from tests.fakes.base import FakeServer

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the code base",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 3},
                "scope": {"type": "string", "enum": ["repo", "file"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "filters": {"type": "object",
                            "properties": {"lang": {"type": "string"},
                                           "paths": {"type": "array", "minItems": 2,
                                                     "items": {"type": "string"}}},
                            "required": ["lang", "paths"], "additionalProperties": False},
            },
            "required": ["query", "scope", "limit", "filters"],
            "additionalProperties": False,
        },
    },
}
READ_TOOL = {
    "type": "function",
    "function": {"name": "read", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
}
TOOLS = [SEARCH_TOOL, READ_TOOL]
USER = [{"role": "user", "content": "Find the parser."}]


def sdk(server: FakeServer, prefix: str = "/v1") -> openai.OpenAI:
    """The official OpenAI SDK pointed at `server`."""
    return openai.OpenAI(base_url=server.url + prefix, api_key="sk-test", max_retries=0,
                         timeout=20)


def parameters_of(name: str) -> dict[str, Any]:
    """The parameters schema of the tool `name` in TOOLS."""
    return next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)
