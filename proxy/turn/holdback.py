"""The hold-back rule of the streamed mode: how much of a text written so far may go out
before the turn ends, so that the finished answer still starts with what was sent.

Extraction (at the end, on the whole text) takes tool-call frames out and trims the space at
each seam. So a text flows until the first character that could open a frame in the
configured formats — an opening tag or special token (whole, or its start at the end of the
text), and for the formats recognised by shape a call object, a list or a code fence at the
start of a line — and from there on everything waits for the end. Space is never released
at the end of what went out (a seam would trim it), and a `</think>` not followed by exactly
one blank line holds what comes after it (the thinking's seam is rewritten to one when a
call is taken from the rest).

Each format lists where its frames can begin (`OPENERS`); a test checks that every format of
the registry is listed, and the property that the finished content always starts with what
was released (tests/test_turn_holdback.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..toolcalls.registry import resolve

# -- opener patterns: a whole opener, and (for the end of the text) any proper prefix of one


@dataclass(frozen=True)
class Pattern:
    """A regex for whole openers and one for the proper prefixes of an opener."""

    full: str
    prefix: str  # possibly empty; only ever matched against the end of the text


_NEVER = "(?!)"


def lit(text: str) -> Pattern:
    """An exact string."""
    prefix = ""
    for char in reversed(text[:-1]):
        prefix = re.escape(char) + (f"(?:{prefix})?" if prefix else "")
    return Pattern(re.escape(text), f"(?:{prefix})?" if prefix else "")


def run(chars: str, least: int, most: int) -> Pattern:
    """`least` to `most` characters of the class `chars` (a regex class such as `\\w`)."""
    return Pattern(f"{chars}{{{least},{most}}}", f"{chars}{{0,{most - 1}}}")


def seq(*parts: Pattern) -> Pattern:
    """One pattern after the other."""
    if not parts:
        return Pattern("", _NEVER)
    prefixes = ["".join(p.full for p in parts[:i]) + parts[i].prefix for i in range(len(parts))]
    return Pattern("".join(p.full for p in parts), "(?:" + "|".join(prefixes) + ")")


def alt(*parts: Pattern | str) -> Pattern:
    """Any one of the patterns (strings are exact)."""
    items = [lit(p) if isinstance(p, str) else p for p in parts]
    return Pattern("(?:" + "|".join(p.full for p in items) + ")",
                   "(?:" + "|".join(p.prefix for p in items) + ")")


def opt(part: Pattern | str) -> Pattern:
    """The pattern, or nothing."""
    return alt(part, seq())


def _seq(*parts: Pattern | str) -> Pattern:
    return seq(*(lit(p) if isinstance(p, str) else p for p in parts))


_SPACE = run(r"\s", 0, 64)
_WORD = run(r"\w", 1, 200)


@dataclass(frozen=True)
class Opener:
    """Where a frame can begin: its pattern, and where it must stand. `anywhere`; `line`:
    with only space between it and the start of a line (or of the text, or of what follows
    a think tag); `start`: with only space before it in the text (or after a think tag)."""

    pattern: Pattern
    where: str = "anywhere"


def tag(*texts: str) -> tuple[Opener, ...]:
    """Openers that are exact strings, anywhere."""
    return tuple(Opener(lit(text)) for text in texts)


_CALL_OBJECT = Opener(_seq("{", _SPACE, alt('"', "'", "}")), "line")  # `{"name": …}`
_CALL_LIST = Opener(_seq("[", _SPACE, alt("{", "]")), "line")
_FENCE = Opener(_seq("```", opt(alt("json", "xml", "tool_call", "tool_calls", "function_call")),
                     run(r"[ \t\r]", 0, 64), "\n", _SPACE, alt("{", "[", "<")), "line")
# `<｜tool▁calls▁begin｜>`, `<|tool_call_begin|>` and the other spellings of DeepSeek's tokens.
_DEEPSEEK = Opener(_seq("<", alt("｜", "|"), "tool", alt("▁", "_", " ", "\\_"), "call"))
_HARMONY = Opener(_seq(opt(_seq("<|start|>", _SPACE)), opt(_seq("assistant", _SPACE)),
                       opt(_seq("<|channel|>", _SPACE)),
                       opt(_seq(alt("commentary", "analysis"), _SPACE)), "to=functions."))

OPENERS: dict[str, tuple[Opener, ...]] = {
    "hermes": (*tag("<tool_call>"), _CALL_OBJECT),  # a call object closed by an orphan close
    "longcat": tag("<longcat_tool_call>"),
    "qwen_xml": tag("<function=", "<tool_call>", "<seed:tool_call>"),
    "glm": tag("<tool_call>"),
    "tools_wrapper": (*tag("<tools>", "<tool>", "<response>", "<json>", "<xml>", "<JSON>",
                           "<function_call>"), _FENCE),
    "granite_20b_fc": tag("<function_call>"),
    "tool_calls_tag": tag("<tool_calls>"),
    "granite": tag("<|tool_call|>", "<tool_call>"),
    "llama3": (*tag("<|python_tag|>", "<function=", '<function name="'),
               Opener(_CALL_OBJECT.pattern, "start")),  # `{…}; {…}` as the whole content
    "mistral": tag("[TOOL_CALLS]"),
    "deepseek": (_DEEPSEEK,),
    "deepseek_dsml": tag("<｜DSML｜invoke", "<｜DSML｜function_calls>"),
    "step3": (*tag("<steptml:invoke"), _DEEPSEEK),
    "kimi_k2": tag("<|tool_call_begin|>", "<|tool_calls_section_begin|>"),
    "minimax_m2": tag("<invoke", "<minimax:tool_call>"),
    "harmony": (_HARMONY,),
    "internlm": tag("<|action_start|>"),
    "phi4_mini": tag("functools["),
    "apertus": tag("<|tools_prefix|>"),
    "gemma4": tag("<|tool_call>"),
    "functionary": (Opener(_seq(opt(">>>"), _WORD, "\n", "{"), "start"),
                    Opener(_seq(">>>", _WORD, "\n", "{"))),
    "pythonic": (Opener(_seq(opt(_seq("<|python_tag|>", _SPACE)), "[", _SPACE,
                             run("[A-Za-z_]", 1, 1), run(r"[\w.]", 0, 200), "("), "line"),
                 *tag("<|python_start|>", "<function_calls>")),
    "code_fence": (_FENCE,),
    "bare_json": (_CALL_OBJECT, _CALL_LIST),
}

# A think block's end: what follows is the visible answer, joined back to the thinking with
# one blank line when a call is taken from it (`normalize.split_thinking`).
_THINK_CLOSE = ("</think>", "</seed:think>")
_THINK_TAGS = ("<think>", "<seed:think>", *_THINK_CLOSE)
_AFTER_CLOSE = "(?:" + "|".join(f"(?<={re.escape(t)})" for t in _THINK_CLOSE) + ")"
_SEAM = Pattern(_AFTER_CLOSE + r"(?=[^\n]|\n[^\n]|\n\n\s)", _AFTER_CLOSE + r"\n\n?")
_WHERE = ("anywhere", "line", "start")


@dataclass(frozen=True)
class HoldRule:
    """The compiled openers of a set of formats: one regex, each alternative a named group
    saying where its match must stand and whether it is whole or the text's unfinished end."""

    regex: re.Pattern[str]


@lru_cache(maxsize=32)
def hold_rule(formats: tuple[str, ...]) -> HoldRule | None:
    """The rule for the configured formats (names as in the config, "auto" for all); None
    when there is nothing to hold (no format)."""
    names = [name for name, _ in resolve(formats)]
    if not names:
        return None
    by_where: dict[str, list[Pattern]] = {where: [] for where in _WHERE}
    for name in names:
        for opener in OPENERS[name]:
            if opener.pattern not in by_where[opener.where]:
                by_where[opener.where].append(opener.pattern)
    groups = [f"(?P<seam>{_SEAM.full})", rf"(?P<seam_end>{_SEAM.prefix}\Z)"]
    for where in _WHERE:
        patterns = by_where[where]
        if patterns:
            either = alt(*patterns)
            groups.append(f"(?P<{where}>{either.full})")
            groups.append(rf"(?P<{where}_end>(?=[\s\S]){either.prefix}\Z)")
    return HoldRule(re.compile("|".join(groups)))


def _stands(text: str, at: int, where: str) -> bool:
    """Whether an opener found `at` stands where it must (only space before it back to the
    start of a line, of the text, or of what follows a think tag)."""
    if where in ("anywhere", "seam"):
        return True
    start = at
    while start > 0 and text[start - 1].isspace():
        start -= 1
    if start == 0 or text.endswith(_THINK_TAGS, 0, start):
        return True
    return where == "line" and "\n" in text[start:at]


def hold_point(text: str, rule: HoldRule, start: int = 0) -> tuple[int, bool]:
    """Where the first possible frame in `text` begins (at or after `start`; len(text) when
    none), and whether that is final (a whole opener) rather than an unfinished end that
    more text may still turn into prose."""
    pos = start
    while (match := rule.regex.search(text, pos)) is not None:
        where = match.lastgroup or "seam"
        if _stands(text, match.start(), where.removesuffix("_end")):
            return match.start(), not where.endswith("_end")
        pos = match.start() + 1
    return len(text), False


def releasable(text: str, rule: HoldRule | None) -> int:
    """How many leading characters of `text` may go out: up to the first possible frame,
    without the space before it."""
    if rule is None:
        return len(text)
    end, _ = hold_point(text, rule)
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


class Held:
    """One text as it streams in (a choice's content or reasoning): each push says what of
    it may go out now. It keeps only the unsent tail (and a few characters before it, for
    the think tags): once a whole opener is seen, the rest waits for the end."""

    _BEHIND = max(map(len, _THINK_TAGS))

    def __init__(self, rule: HoldRule | None) -> None:
        self._rule = rule
        self._base = 0  # where `_tail` begins in the whole text
        self._tail = ""
        self._sent = 0  # characters released so far
        self._scan = 0  # before this, no frame can begin
        self._closed = rule is None  # True: nothing to look for (no rule, or a frame seen)

    @property
    def sent(self) -> int:
        """How many characters have been released."""
        return self._sent

    def push(self, piece: str) -> str:
        """Add `piece`; the text that may go out now (possibly empty)."""
        if self._rule is None:
            self._sent += len(piece)
            return piece
        if self._closed:
            return ""
        self._tail += piece
        base, tail = self._base, self._tail
        at, final = hold_point_in(tail, self._rule, self._scan - base, base)
        end = at
        while end > self._sent - base and tail[end - 1].isspace():
            end -= 1
        out = tail[self._sent - base:end] if end > self._sent - base else ""
        self._sent = max(self._sent, base + end)
        self._scan = base + at
        if final:
            self._closed = True
            self._tail = ""
            return out
        keep = max(0, self._sent - self._BEHIND - base)
        self._tail, self._base = tail[keep:], base + keep
        return out


def hold_point_in(tail: str, rule: HoldRule, start: int, base: int) -> tuple[int, bool]:
    """`hold_point` on a tail of the text that begins at `base` in the whole (the start of
    the whole text is only where `base` is 0)."""
    if base == 0:
        return hold_point(tail, rule, start)
    at, final = hold_point("\0" + tail, rule, start + 1)  # not the text's start: a sentinel
    return at - 1, final
