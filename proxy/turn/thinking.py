"""Thinking written into the content: a leading `<think>…</think>` (or Seed-OSS's
`<seed:think>…</seed:think>`, or gpt-oss's Harmony analysis channel
`<|channel|>analysis<|message|>…<|end|>`) that a server without a reasoning parser leaves in
the content. With `reasoning_from_content` (the default) it is the reasoning, not the answer:
moved out of a finished completion (`leading_thinking`), routed to the reasoning as it
streams (`ThinkRouter`), and moved out of the history a client sends back
(`move_history_thinking`). Only a block whose opening tag starts the content counts: a tag
further on is the answer's own text."""

from __future__ import annotations

import re
from typing import Any

from .assemble import CONTENT, REASONING

_HARMONY_ANALYSIS = "<|channel|>analysis<|message|>"
_TAGS = {"<think>": "</think>", "<seed:think>": "</seed:think>",
         _HARMONY_ANALYSIS: "<|end|>", "<|start|>assistant" + _HARMONY_ANALYSIS: "<|end|>"}
_OPENING = re.compile(r"\s*+(" + "|".join(map(re.escape, _TAGS)) + ")")
_LONGEST_OPENER = max(map(len, _TAGS))


def leading_thinking(content: str) -> tuple[str, str] | None:
    """(the thinking, the answer after it) when `content` opens with a think block, else
    None. Both are stripped of the space around them; a block never closed (cut by length
    while thinking) is all thinking."""
    opening = _OPENING.match(content)
    if opening is None:
        return None
    close = content.find(_TAGS[opening[1]], opening.end())
    if close < 0:
        return content[opening.end():].strip(), ""
    return (content[opening.end():close].strip(),
            content[close + len(_TAGS[opening[1]]):].lstrip())


def _could_open(text: str) -> bool:
    """Whether `text` (space, then the start of a tag) may still become an opening."""
    rest = text.lstrip()
    return any(tag.startswith(rest) for tag in _TAGS) and len(rest) < _LONGEST_OPENER


class ThinkRouter:
    """One choice's content as it streams: pieces of it go out as reasoning while inside a
    leading think block, as content after it (or throughout, when the content does not open
    with one). What it lets out always agrees with `leading_thinking` on the whole text:
    the space around the thinking and the answer's leading space are held back (and dropped
    once they turn out to be edges), and so is what may be the start of a closing tag."""

    def __init__(self) -> None:
        self._state = "start"  # start → think → after → content
        self._buffer = ""
        self._close = ""
        self._thinking = False  # some of the thinking has gone out (its leading space is gone)

    def push(self, piece: str) -> list[tuple[str, str]]:
        """Add `piece`; the (kind, text) that may go out now."""
        self._buffer += piece
        out: list[tuple[str, str]] = []
        while True:
            state, buffer = self._state, self._buffer
            if state == "content":
                self._buffer = ""
                return [*out, (CONTENT, buffer)] if buffer else out
            if state == "start":
                opening = _OPENING.match(buffer)
                if opening is None:
                    if _could_open(buffer):
                        return out
                    self._state = "content"
                    continue
                self._close, self._state = _TAGS[opening[1]], "think"
                self._buffer = buffer[opening.end():]
                continue
            if state == "think":
                if not self._thinking:
                    buffer = self._buffer = buffer.lstrip()
                close = buffer.find(self._close)
                if close >= 0:
                    text = buffer[:close].rstrip()
                    if text:
                        out.append((REASONING, text))
                    self._state, self._buffer = "after", buffer[close + len(self._close):]
                    continue
                keep = _partial_suffix(buffer, self._close)
                text = buffer[:len(buffer) - keep].rstrip()
                if text:
                    out.append((REASONING, text))
                    self._buffer = buffer[len(text):]
                    self._thinking = True
                return out
            # "after": the answer begins at its first character that is not space
            rest = buffer.lstrip()
            if not rest:
                self._buffer = ""
                return out
            self._state, self._buffer = "content", rest


def _partial_suffix(text: str, tag: str) -> int:
    """How many characters at the end of `text` may be the start of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def move_history_thinking(messages: Any) -> bool:
    """Move a leading think block out of each assistant message's content in the history,
    into its `reasoning_content` (unless it has a reasoning of its own), as the proxy's own
    answers had it; whether any message changed."""
    changed = False
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if (not isinstance(content, str) or message.get("reasoning_content")
                or message.get("reasoning")):
            continue
        split = leading_thinking(content)
        if split is None:
            continue
        message["reasoning_content"], message["content"] = split
        changed = True
    return changed
