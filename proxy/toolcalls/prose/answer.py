"""An answer without the markup that frames it: the model's words only.

A server without the matching parser (or with `skip_special_tokens: false`) leaves a format's
framing tokens around a plain answer: Harmony's message headers and end tokens, Command's
`<|START_RESPONSE|>` pairs, Kimi K3's response section, Ling's and Muse's role and end
tokens, Kimi K2's empty tool sections. Each format that has such markup declares
`answer_markup(text)`: the spans of it, and those of reasoning it holds (Harmony's analysis
channel). The answer is what is left, each piece exactly as written, pieces a line apart (as
messages are); reasoning found there joins the reasoning.

A call's opening tag left alone at the very end of an answer (`It is 4.<tool_call>`), with
nothing after it, opened no call: it is markup too, when it stands on a line of its own or
right after the answer's words; after a space and words it is a mention ("wrap each call in
<tool_call>") and stays.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ..formats.spec import AnswerMarkup
from ..registry import ANSWER_MARKUP, TAG_OPENERS, resolve

_SENTENCE_END = re.compile(r"[.!?:。！？…]\s*+\Z")


def plain_answer(text: str, formats: Sequence[str]) -> tuple[str, str]:
    """(the answer without its framing, the reasoning found in it) for the configured
    `formats`; `text` as it is and no reasoning when none of them frames it."""
    reasoning: list[str] = []
    names = tuple(formats)
    for hook in _hooks(names):
        if not text:
            break
        markup, thinking = hook(text)
        if not markup and not thinking:
            continue
        reasoning += [piece for start, end in thinking if (piece := text[start:end].strip())]
        text = _without(text, sorted(markup + thinking))
    return _without_last_opener(text, resolve(names), _openers(names)), "\n".join(reasoning)


@lru_cache(maxsize=64)
def _hooks(formats: tuple[str, ...]) -> tuple[AnswerMarkup, ...]:
    """The `answer_markup` hooks of the formats named, in their order (made once per list:
    every answer asks for its model's, and most formats have none)."""
    return tuple(hook for name, _ in resolve(formats)
                 if (hook := ANSWER_MARKUP.get(name)) is not None)


@lru_cache(maxsize=64)
def _openers(formats: tuple[str, ...]) -> tuple[str, ...]:
    """Every opening tag of the formats named, to rule out with one look at the end."""
    return tuple(tag for name, _ in resolve(formats) for tag in TAG_OPENERS.get(name, ()))


def _without_last_opener(text: str, chosen: Sequence[tuple[str, object]],
                         openers: tuple[str, ...]) -> str:
    """`text` without a format's opening tag left alone at its very end (see above);
    `openers`: every tag of `chosen`, for the common case (the end is none of them)."""
    stripped = text.rstrip()
    if not stripped.endswith(openers):
        return text
    for name, _ in chosen:
        for tag in TAG_OPENERS.get(name, ()):
            if not stripped.endswith(tag):
                continue
            before = stripped[:-len(tag)]
            line = before[before.rfind("\n") + 1:]
            if (not line.strip() or _SENTENCE_END.search(line)
                    or not (line[-1].isspace() or line[-1] in "`'\"“‘«")):
                return before.rstrip()
    return text


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` without `spans`: the pieces left, a line apart, those of space alone dropped."""
    pieces = []
    pos = 0
    for start, end in spans:
        if start > pos:
            pieces.append(text[pos:start])
        pos = max(pos, end)
    pieces.append(text[pos:])
    kept = [piece for piece in pieces if piece.strip()]
    return "\n".join(kept) if len(kept) > 1 else kept[0] if kept else ""
