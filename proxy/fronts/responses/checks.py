"""What the Responses API itself refuses, checked before a request is kept or sent on:
`metadata` within its limits, and input items of types the API knows. And what of a turn's
items the store keeps: only those a later turn reads back."""

from __future__ import annotations

from typing import Any

from ...base.errors import bad_request

METADATA_PAIRS = 16
METADATA_KEY_CHARS = 64
METADATA_VALUE_CHARS = 512

# Every input item type of the Responses API (openai-python's `ResponseInputItemParam`), and
# Codex's own names for two (`ghost_snapshot`, `compaction_summary`). Those the translation
# does not read (hosted tools' calls, …) are left out of the turn, as before; a type outside
# this list is a 400.
KNOWN_ITEM_TYPES = frozenset({
    "message", "function_call", "function_call_output", "custom_tool_call",
    "custom_tool_call_output", "reasoning", "item_reference", "compaction",
    "compaction_trigger", "file_search_call", "web_search_call", "computer_call",
    "computer_call_output", "tool_search_call", "tool_search_output", "additional_tools",
    "configuration_update", "image_generation_call", "code_interpreter_call",
    "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
    "apply_patch_call", "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request",
    "mcp_approval_response", "mcp_call", "program", "program_output",
    "ghost_snapshot", "compaction_summary",
})
# The items a continuation reads back (`request.to_messages`): all the store keeps.
KEPT_ITEM_TYPES = frozenset({"message", "function_call", "function_call_output",
                             "custom_tool_call", "custom_tool_call_output"})


def check_metadata(metadata: Any) -> None:
    """At most 16 pairs, string keys of at most 64 characters, string values of at most 512
    (the Responses API's limits); a 400 naming the field otherwise."""
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise bad_request("metadata must be an object.", "metadata")
    if len(metadata) > METADATA_PAIRS:
        raise bad_request(f"metadata may hold at most {METADATA_PAIRS} pairs, not {len(metadata)}.",
                          "metadata")
    for key, value in metadata.items():
        if len(key) > METADATA_KEY_CHARS:
            raise bad_request(f"metadata keys may be at most {METADATA_KEY_CHARS} characters long "
                              f"({key[:METADATA_KEY_CHARS]!r}… is {len(key)}).", "metadata")
        if not isinstance(value, str):
            raise bad_request(f"metadata.{key} must be a string.", f"metadata.{key}")
        if len(value) > METADATA_VALUE_CHARS:
            raise bad_request(
                f"metadata.{key} may be at most {METADATA_VALUE_CHARS} characters long, "
                f"not {len(value)}.", f"metadata.{key}")


def kind_of(item: dict[str, Any]) -> str | None:
    """An input item's type: its `type`, else a message (with a `role`) or an item reference
    (an `id` alone), else None."""
    kind = item.get("type")
    if kind is None:
        return "message" if "role" in item else "item_reference" if "id" in item else None
    return kind if isinstance(kind, str) else None


def check_item_types(items: list[dict[str, Any]]) -> None:
    """Every input item of a type the Responses API knows; a 400 naming the first that is
    not (`input[3].type`)."""
    for i, item in enumerate(items):
        kind = kind_of(item)
        if kind not in KNOWN_ITEM_TYPES:
            shown = "missing" if item.get("type") is None else repr(item["type"])[:60]
            raise bad_request(f"input[{i}].type {shown} is not an input item type of the Responses "
                              "API.", f"input[{i}].type")


def kept_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items a later turn reads back: what the store keeps of a turn."""
    return [item for item in items if kind_of(item) in KEPT_ITEM_TYPES]
