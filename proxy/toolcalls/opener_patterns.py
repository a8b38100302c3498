"""Patterns of what a tool-call frame can start with, for the streamed mode's hold-back rule:
each format's spec lists its openers (`FormatSpec.openers`), built from these combinators.

A frame may begin before the marker that gives it away (a Qwen XML call inside its
`<tool_call>` wrapper, DeepSeek's section token, gpt-oss's `<|start|>assistant…` header), so
each format lists its openers: patterns of what a frame can start with, and where it must
stand (anywhere, at the start of a line, or at the start of the text). A test checks that every
format of the registry lists some, and the hold-back property over the test corpus that the
lists are complete (tests/turn/test_holdback.py).

Patterns are built from a few combinators that compile to two regexes: one for a whole
opener, one for any proper prefix of an opener (matched against the end of a text still being
written: `<tool_ca` may yet become `<tool_call>`), and carry a few texts they match
(`samples`: what the extraction bench, bench/extraction.py, writes as each format's openers).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

_NEVER = "(?!)"
_SAMPLES = 8  # texts a pattern keeps as its samples, at most
# What a run of characters is sampled as: the first of these its class matches (a tool's
# name, a fence's language, space), cut to the run's length; none that fits, no sample.
_RUN_SAMPLES = ("read", "json", " ", "")


@dataclass(frozen=True)
class Pattern:
    """A regex for whole openers, one for their proper prefixes (possibly empty), and the
    characters an opener can begin with (`first`: None when that is a class, not literals);
    `samples`: a few texts `full` matches (each alternative's, a run as a tool's name)."""

    full: str
    prefix: str
    first: frozenset[str] | None
    nullable: bool = False
    samples: tuple[str, ...] = ()


def lit(text: str) -> Pattern:
    """An exact string."""
    prefix = ""
    for char in reversed(text[:-1]):
        prefix = re.escape(char) + (f"(?:{prefix})?" if prefix else "")
    return Pattern(re.escape(text), f"(?:{prefix})?" if prefix else "", frozenset(text[:1]),
                   samples=(text,))


def run(chars: str, least: int, most: int) -> Pattern:
    """`least` to `most` characters of the regex class `chars` (such as `\\w`)."""
    full = f"{chars}{{{least},{most}}}"
    sample = [text[:most] for text in _RUN_SAMPLES if re.fullmatch(full, text[:most])][:1]
    return Pattern(full, f"{chars}{{0,{most - 1}}}", None, least == 0, tuple(sample))


def seq(*parts: Pattern | str) -> Pattern:
    """One pattern after the other (strings are exact)."""
    items = [lit(p) if isinstance(p, str) else p for p in parts]
    if not items:
        return Pattern("", _NEVER, frozenset(), True, ("",))
    prefixes = ["".join(p.full for p in items[:i]) + items[i].prefix for i in range(len(items))]
    first: frozenset[str] | None = frozenset()
    for item in items:
        first = None if first is None or item.first is None else first | item.first
        if not item.nullable:
            break
    samples = itertools.islice(("".join(texts) for texts in
                                itertools.product(*(p.samples for p in items))), _SAMPLES)
    return Pattern("".join(p.full for p in items), "(?:" + "|".join(prefixes) + ")", first,
                   all(p.nullable for p in items), tuple(samples))


def alt(*parts: Pattern | str) -> Pattern:
    """Any one of the patterns (strings are exact)."""
    items = [lit(p) if isinstance(p, str) else p for p in parts]
    first: frozenset[str] | None = frozenset()
    for item in items:
        first = None if first is None or item.first is None else first | item.first
    samples = tuple(dict.fromkeys(text for p in items for text in p.samples))[:_SAMPLES]
    return Pattern("(?:" + "|".join(p.full for p in items) + ")",
                   "(?:" + "|".join(p.prefix for p in items) + ")", first,
                   any(p.nullable for p in items), samples)


def opt(part: Pattern | str) -> Pattern:
    """The pattern, or nothing."""
    return alt(part, seq())


@dataclass(frozen=True)
class Opener:
    """What a frame can begin with, and where it must stand: `anywhere`; `line`: with only
    space before it back to the start of a line (or of the text, or to a think tag); `start`:
    with only space before it back to the start of the text (or to a think tag). `lead`:
    what may stand right before it and then belongs to the frame (a header)."""

    pattern: Pattern
    where: str = "anywhere"
    lead: Pattern | None = None


def literals(*texts: str) -> tuple[Opener, ...]:
    """Openers that are exact strings, anywhere."""
    return tuple(Opener(lit(text)) for text in texts)


# Shapes several formats' frames begin with (no format's own marker).
SPACE = run(r"\s", 0, 64)
WORD = run(r"\w", 1, 200)
CALL_OBJECT = Opener(seq("{", SPACE, alt('"', "'", "}")), "line")  # `{"name": …}`
CALL_LIST = Opener(seq("[", SPACE, alt("{", "]")), "line")
# A fence of any language (the content cleanup takes any fence that held only calls).
FENCE = Opener(seq(alt("```", "~~~"), run(r"[\w+.-]", 0, 32), run(r"[ \t\r]", 0, 64), "\n",
                    SPACE, alt("{", "[", "<")), "line")
