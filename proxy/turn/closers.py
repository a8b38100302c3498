"""Where thinking that the chat template opened ends: the first *lone* closing tag of a
thinking block (`</think>`, `[/THINK]`, `<|END_THINKING|>`, …) that the model wrote as the
end of its thinking, not one its text mentions.

Templates of DeepSeek R1/V3.x, Qwen3, GLM 4.5+, MiniMax, Step, Nemotron, Ling and others open
the block in the prompt, so the output starts inside it and only its close is written. The
same tag in an answer that talks about it stays text: a closer is a mention (and the look
goes on past it) when it stands in inline code or a fenced block, right inside quotation
marks, introduced after a colon on its line, or inside a sentence (a space and words before
it on its line, and after it on its line more words in lower case or the punctuation that
ends a clause). A closer whose own
opening tag was written before it closes that block, not a template's: no lone close then.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..base.frozen import quick_init

# (opening tag, closing tag) of each family's thinking block.
FAMILIES: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),  # DeepSeek, Qwen3, GLM, MiniMax, Step, Nemotron, Ling, Hunyuan…
    ("<seed:think>", "</seed:think>"),  # Seed-OSS
    ("[THINK]", "[/THINK]"),  # Magistral, Ministral 3, Devstral
    ("<|START_THINKING|>", "<|END_THINKING|>"),  # Command R7B, Command A Reasoning
    ("<|open|>think<|sep|>", "<|close|>think<|sep|>"),  # Kimi K3
    ("<|channel>thought", "<channel|>"),  # Gemma 4
    ("◁think▷", "◁/think▷"),  # Kimi VL / K1.5
    ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]"),  # Apriel (its template opens it)
)
OPENERS = tuple(opener for opener, _ in FAMILIES)
CLOSERS = tuple(closer for _, closer in FAMILIES)
_OPENER_OF = {closer: opener for opener, closer in FAMILIES}
_CLOSER = re.compile("|".join(re.escape(closer) for closer in CLOSERS))
MAY_CLOSE = _CLOSER  # whether a text holds a closer at all
LONGEST_CLOSER = max(map(len, CLOSERS))
_QUOTES = "\"'“‘«`"
_IN_SENTENCE_AFTER = re.compile(r"[ \t]*+[.,;:!?)\]]|[ \t]++[a-z0-9(]")
_FENCE_LINE = re.compile(r"(?m)^[ \t]{0,3}(?:```|~~~)")


@quick_init
@dataclass(frozen=True)
class Close:
    """A lone closer that ends the thinking: its span."""

    start: int
    end: int


def _mention(text: str, start: int, end: int, whole: bool, in_fence: bool) -> bool | None:
    """Whether the tag at [start, end) is one the text mentions; None when what follows it
    on its line is still to come (`whole` False: the text is not finished)."""
    line = text.rfind("\n", 0, start) + 1
    before = text[line:start]
    if in_fence or before.count("`") % 2 or (before and before[-1] in _QUOTES):
        return True
    if not before.strip() or before[-1] not in " \t":
        return False  # at the start of its line, or glued to the word before (`…over</think>`)
    if before.rstrip().endswith(":"):
        return True  # introduced as a value: `closing tag: </think>`
    rest = text[end:end + 64]
    if not whole and not rest.strip(" \t"):
        return None
    return _IN_SENTENCE_AFTER.match(rest) is not None


class _Fences:
    """Whether a position lies in a fenced block, for positions asked in increasing order."""

    def __init__(self, text: str) -> None:
        self._text, self._pos, self._count = text, 0, 0

    def inside(self, at: int) -> bool:
        line = self._text.rfind("\n", 0, at) + 1
        if line > self._pos:
            self._count += len(_FENCE_LINE.findall(self._text, self._pos, line))
            self._pos = line
        return self._count % 2 == 1


BLOCKED = -1  # a closer whose own opening tag stands before it: no lone close in this text


# The closers by their first character, in CLOSERS' order (the regex's alternation's).
_BY_FIRST = {first: tuple(closer for closer in CLOSERS if closer[0] == first)
             for first in dict.fromkeys(closer[0] for closer in CLOSERS)}
# Positions of the closers' first characters read one by one before the regex takes over.
_STEPS = 64


def closers_from(text: str, start: int) -> Iterator[tuple[int, str]]:
    """(position, closer) of each closer in `text` from `start`, in order, as
    `_CLOSER.finditer` finds them: from the positions of the closers' first characters
    (`<`, `[`, `◁`: one-character searches at memchr speed, where the regex tries every
    position of a megabyte, 3 ms); past _STEPS of them (a text full of `<`), by the regex
    from there. No closer is a prefix of another: a position starts one closer at most."""
    nexts = {char: text.find(char, start) for char in _BY_FIRST}
    for _ in range(_STEPS):
        found = [at for at in nexts.values() if at >= 0]
        if not found:
            return
        at = min(found)
        closer = next((c for c in _BY_FIRST[text[at]] if text.startswith(c, at)), None)
        if closer is not None:
            yield at, closer
        after = at + len(closer) if closer is not None else at + 1
        nexts = {char: text.find(char, after) if 0 <= pos < after else pos
                 for char, pos in nexts.items()}
    found = [at for at in nexts.values() if at >= 0]
    if found:
        yield from ((match.start(), match.group()) for match in _CLOSER.finditer(text,
                                                                                min(found)))


def lone_close(text: str, start: int = 0, whole: bool = True) -> Close | int | None:
    """The first closer from `start` that ends a template-opened thinking block; BLOCKED
    when a closer of a block the text opened comes first; when `whole` is False (the text
    is still being written), the start of a candidate whose context is still to come, if
    one comes first; else None."""
    fences = _Fences(text)
    opened: dict[str, int] = {}  # each family's first opening tag that is not a mention
    for at, closer in closers_from(text, start):
        opener = _OPENER_OF[closer]
        if opener not in opened:
            opened[opener] = _first_opening(text, opener)
        if 0 <= opened[opener] < at:
            return BLOCKED  # its block was opened in the text: not the template's
        mention = _mention(text, at, at + len(closer), whole, fences.inside(at))
        if mention is None:
            return at
        if not mention:
            return Close(at, at + len(closer))
    return None


def _first_opening(text: str, opener: str) -> int:
    """Where `opener` is first written as a tag, not mentioned (-1: nowhere)."""
    inside = _Fences(text)
    at = text.find(opener)
    while at >= 0:
        if not _mention(text, at, at + len(opener), True, inside.inside(at)):
            return at
        at = text.find(opener, at + 1)
    return -1


_PREFIXES = frozenset(closer[:size] for closer in CLOSERS for size in range(1, len(closer)))
_FIRSTS = frozenset(closer[0] for closer in CLOSERS)


def partial_closer(text: str) -> int:
    """How many characters at the end of `text` may be the start of a closer."""
    tail = text[-(LONGEST_CLOSER - 1):]
    for i, char in enumerate(tail):
        if char in _FIRSTS and tail[i:] in _PREFIXES:
            return len(tail) - i
    return 0
