"""An upstream's refusal for the context window, read from its message: the window, the
prompt's tokens and the completion's tokens asked. A request that asks more than the window
leaves (Claude Code asks 32,000 tokens whatever the model) is asked again for what fits."""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from ..toolcalls.exact_json import loads as exact_loads

# Below this many tokens of room a completion is cut before it says anything of use (a tool
# call's arguments alone take more): the client is told the prompt is too long instead.
MIN_ROOM = 256


@dataclass(frozen=True)
class Overflow:
    """The context window (tokens), the prompt's tokens, and the completion's tokens asked
    (None: the prompt alone does not fit). `exact`: the prompt was counted whole; current
    vLLM stops counting where the window overflows, so its count is only a floor."""

    window: int
    prompt: int
    asked: int | None
    exact: bool = True

    @property
    def room(self) -> int:
        """The completion tokens that fit beside the prompt (0 or less: none); a bound
        from above when the prompt's count is a floor."""
        return self.window - self.prompt

    @property
    def leaves_no_room(self) -> bool:
        """Whether nothing worth a generation fits: the prompt alone overflows, or, counted
        whole, it leaves fewer than MIN_ROOM tokens beside it (its last one kept free:
        SGLang refuses a window filled exactly)."""
        return self.asked is None or (self.exact and self.room - 1 < MIN_ROOM)


@dataclass(frozen=True)
class Refit:
    """How to ask again: for at most `max_tokens` completion tokens, or (None) naming none,
    so that the upstream gives the completion all its window leaves (vLLM's default)."""

    max_tokens: int | None


_N = r"(\d+)"
# (pattern, what its groups are, whether it counts the prompt whole): vLLM's current words,
# vLLM's earlier ones, SGLang's, llama.cpp's (which refuses only a prompt that fills its
# context: it cuts a completion short instead).
_MESSAGES: tuple[tuple[re.Pattern[str], tuple[str, ...], bool], ...] = tuple(
    (re.compile(pattern), names, exact) for pattern, names, exact in (
        (rf"maximum context length is {_N} tokens\. However, you requested {_N} output tokens "
         rf"and your prompt contains at least {_N} input tokens", ("window", "asked", "prompt"),
         False),
        (rf"You passed {_N} input tokens and requested {_N} output tokens\. However, the "
         rf"model's context length is only {_N} tokens", ("prompt", "asked", "window"), False),
        (rf"is too large: {_N}\. This model's maximum context length is {_N} tokens and your "
         rf"request has {_N} input tokens", ("asked", "window", "prompt"), True),
        (rf"maximum context length is {_N} tokens\. However, you requested \d+ tokens \({_N} "
         rf"in the messages, {_N} in the completion\)", ("window", "prompt", "asked"), True),
        (rf"maximum context length is {_N} tokens\. However, your request has {_N} input "
         r"tokens", ("window", "prompt"), True),
        (rf"prompt \(length {_N}\) (?:plus the number of requested output tokens \(at least "
         rf"\d+\) )?is longer than the maximum model length of {_N}", ("prompt", "window"), True),
        (rf"maximum context length of {_N} tokens\. You requested a total of \d+ tokens: {_N} "
         rf"tokens from the input messages and {_N} tokens for the completion",
         ("window", "prompt", "asked"), True),
        (rf"The input \({_N} tokens\) is longer than the model's context length \({_N} "
         r"tokens\)", ("prompt", "window"), True),
        (rf"request \({_N} tokens\) exceeds the available context size \({_N} tokens\)",
         ("prompt", "window"), True),
    ))


def overflow_of(message: str) -> Overflow | None:
    """The overflow an upstream's error message reports, or None when it reports none."""
    for pattern, names, exact in _MESSAGES:
        found = pattern.search(message)
        if found is not None:
            values = dict(zip(names, map(int, found.groups()), strict=True))
            return Overflow(values["window"], values["prompt"], values.get("asked") or None,
                            exact)
    return None


# A refusal for the window in words that give no counts (a server's shorter message, a proxy
# in between): nothing to ask again for, but the client is told its prompt is too long.
_WITHOUT_COUNTS = re.compile(r"context length|maximum model length|context window|"
                             r"context size", re.IGNORECASE)


def refuses_window(status: int, message: str) -> bool:
    """Whether an upstream's error refuses the request for the context window: a 400 whose
    message `overflow_of` reads, or one that says so without counts. Every front words such a
    refusal its own way (Anthropic's "prompt is too long", OpenAI's
    `context_length_exceeded`), from this one reading."""
    return status == 400 and (overflow_of(message) is not None
                              or _WITHOUT_COUNTS.search(message) is not None)


def refit(overflow: Overflow) -> Refit | None:
    """How to ask again so that the completion fits, or None when nothing worth a generation
    fits (the prompt alone overflows, or fewer than MIN_ROOM tokens are left). A prompt
    counted whole leaves its room less one (SGLang refuses a window filled exactly); one
    counted only to a floor leaves an unknown room, which the upstream fills itself."""
    if overflow.leaves_no_room or overflow.asked is None:  # (no room when asked is None)
        return None
    if not overflow.exact:
        return Refit(None)
    room = overflow.room - 1
    return Refit(room) if room < overflow.asked else None


def with_max_tokens(body: bytes, tokens: int | None) -> bytes:
    """The upstream request `body` asking at most `tokens` completion tokens, in whichever of
    `max_tokens` / `max_completion_tokens` it names (None: naming neither). The rest of the
    body is kept as it was, integers past 64 bits included."""
    request = exact_loads(body.decode("utf-8"))
    named = [key for key in ("max_tokens", "max_completion_tokens") if key in request]
    for key in named:
        del request[key]
    if tokens is not None:
        for key in named or ["max_tokens"]:
            request[key] = tokens
    return orjson.dumps(request)
