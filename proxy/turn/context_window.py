"""An upstream's refusal for the context window, read from its message: the window, the
prompt's tokens and the completion's tokens asked. A request that asks more than the window
leaves (Claude Code asks 32,000 tokens whatever the model) is asked again for what fits."""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

# Below this many tokens of room a completion is cut before it says anything of use (a tool
# call's arguments alone take more): the client is told the prompt is too long instead.
MIN_ROOM = 256


@dataclass(frozen=True)
class Overflow:
    """The context window (tokens), the prompt's tokens, and the completion's `max_tokens`
    asked (None: the prompt alone does not fit)."""

    window: int
    prompt: int
    asked: int | None

    @property
    def room(self) -> int:
        """The completion tokens that fit beside the prompt (0 or less: none)."""
        return self.window - self.prompt


# (pattern, the groups' meaning): vLLM's current and earlier messages, SGLang's.
_MESSAGES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"is too large: (\d+)\. This model's maximum context length is (\d+) tokens "
                r"and your request has (\d+) input tokens"), ("asked", "window", "prompt")),
    (re.compile(r"maximum context length is (\d+) tokens\. However, you requested \d+ tokens "
                r"\((\d+) in the messages, (\d+) in the completion\)"),
     ("window", "prompt", "asked")),
    (re.compile(r"maximum context length of (\d+) tokens\. You requested a total of \d+ "
                r"tokens: (\d+) tokens from the input messages and (\d+) tokens for the "
                r"completion"), ("window", "prompt", "asked")),
    (re.compile(r"maximum context length is (\d+) tokens\. However, your request has (\d+) "
                r"input tokens"), ("window", "prompt")),
    (re.compile(r"prompt \(length (\d+)\) is longer than the maximum model length of (\d+)"),
     ("prompt", "window")),
)


def overflow_of(message: str) -> Overflow | None:
    """The overflow an upstream's error message reports, or None when it reports none."""
    for pattern, names in _MESSAGES:
        found = pattern.search(message)
        if found is not None:
            values = dict(zip(names, map(int, found.groups()), strict=True))
            return Overflow(values["window"], values["prompt"], values.get("asked"))
    return None


def with_max_tokens(body: bytes, tokens: int) -> bytes:
    """The upstream request `body` asking at most `tokens` completion tokens, in whichever of
    `max_tokens` / `max_completion_tokens` it names."""
    request = orjson.loads(body)
    named = [key for key in ("max_tokens", "max_completion_tokens") if key in request]
    for key in named or ["max_tokens"]:
        request[key] = tokens
    return orjson.dumps(request)

