"""Where each tool-call format's frames can begin, for the streamed mode's hold-back rule.

A frame may begin before the marker that gives it away (a Qwen XML call inside its
`<tool_call>` wrapper, DeepSeek's section token, gpt-oss's `<|start|>assistant…` header), so
each format lists its openers here: patterns of what a frame can start with, and where it must
stand (anywhere, at the start of a line, or at the start of the text). A test checks that every
format of the registry is listed, and the hold-back property over the test corpus that the
list is complete (tests/test_turn_holdback.py).

Patterns are built from a few combinators that compile to two regexes: one for a whole
opener, one for any proper prefix of an opener (matched against the end of a text still being
written: `<tool_ca` may yet become `<tool_call>`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NEVER = "(?!)"


@dataclass(frozen=True)
class Pattern:
    """A regex for whole openers, one for their proper prefixes (possibly empty), and the
    characters an opener can begin with (`first`: None when that is a class, not literals)."""

    full: str
    prefix: str
    first: frozenset[str] | None
    nullable: bool = False


def lit(text: str) -> Pattern:
    """An exact string."""
    prefix = ""
    for char in reversed(text[:-1]):
        prefix = re.escape(char) + (f"(?:{prefix})?" if prefix else "")
    return Pattern(re.escape(text), f"(?:{prefix})?" if prefix else "", frozenset(text[:1]))


def run(chars: str, least: int, most: int) -> Pattern:
    """`least` to `most` characters of the regex class `chars` (such as `\\w`)."""
    return Pattern(f"{chars}{{{least},{most}}}", f"{chars}{{0,{most - 1}}}", None, least == 0)


def seq(*parts: Pattern | str) -> Pattern:
    """One pattern after the other (strings are exact)."""
    items = [lit(p) if isinstance(p, str) else p for p in parts]
    if not items:
        return Pattern("", _NEVER, frozenset(), True)
    prefixes = ["".join(p.full for p in items[:i]) + items[i].prefix for i in range(len(items))]
    first: frozenset[str] | None = frozenset()
    for item in items:
        first = None if first is None or item.first is None else first | item.first
        if not item.nullable:
            break
    return Pattern("".join(p.full for p in items), "(?:" + "|".join(prefixes) + ")", first,
                   all(p.nullable for p in items))


def alt(*parts: Pattern | str) -> Pattern:
    """Any one of the patterns (strings are exact)."""
    items = [lit(p) if isinstance(p, str) else p for p in parts]
    first: frozenset[str] | None = frozenset()
    for item in items:
        first = None if first is None or item.first is None else first | item.first
    return Pattern("(?:" + "|".join(p.full for p in items) + ")",
                   "(?:" + "|".join(p.prefix for p in items) + ")", first,
                   any(p.nullable for p in items))


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


def tag(*texts: str) -> tuple[Opener, ...]:
    """Openers that are exact strings, anywhere."""
    return tuple(Opener(lit(text)) for text in texts)


_SPACE = run(r"\s", 0, 64)
_WORD = run(r"\w", 1, 200)
_CALL_OBJECT = Opener(seq("{", _SPACE, alt('"', "'", "}")), "line")  # `{"name": …}`
_CALL_LIST = Opener(seq("[", _SPACE, alt("{", "]")), "line")
# A fence of any language (the content cleanup takes any fence that held only calls).
_FENCE = Opener(seq(alt("```", "~~~"), run(r"[\w+.-]", 0, 32), run(r"[ \t\r]", 0, 64), "\n",
                    _SPACE, alt("{", "[", "<")), "line")
# `<｜tool▁calls▁begin｜>`, `<|tool_call_begin|>` and the other spellings of DeepSeek's tokens.
_DEEPSEEK = Opener(seq("<", alt("｜", "|"), "tool", alt("▁", "_", " ", "\\_"), "call"))
# gpt-oss: the recipient, and the header pieces before it, which belong to the frame.
_HARMONY = Opener(lit("to=functions."), lead=seq(
    opt(seq("<|start|>", _SPACE)), opt(seq("assistant", _SPACE)), opt(seq("<|channel|>", _SPACE)),
    opt(seq(alt("commentary", "analysis"), _SPACE))))

_MUSE_TO = opt(seq(opt(seq("<|start|>assistant", run(r"[ \t]", 0, 64))), "to=",
                   run(r"[^\s<>]", 1, 200)))

OPENERS: dict[str, tuple[Opener, ...]] = {
    "hermes": (*tag("<tool_call>"), _CALL_OBJECT),  # a call object closed by an orphan close
    "longcat": tag("<longcat_tool_call>"),
    "qwen_xml": tag("<function=", "<tool_call>", "<seed:tool_call>"),
    "glm": tag("<tool_call>", "<role>ASSISTANT</role>", "<|role_end|>"),  # and Ling's role tokens
    "tools_wrapper": (*tag("<tools>", "<tool>", "<response>", "<json>", "<xml>", "<JSON>",
                           "<function_call>"), _FENCE),
    "granite_20b_fc": tag("<function_call>"),
    "tool_calls_tag": tag("<tool_calls>", "<TOOLCALL>"),
    "granite": tag("<|tool_call|>", "<tool_call>"),
    "llama3": (*tag("<|python_tag|>", "<function=", '<function name="'),
               Opener(_CALL_OBJECT.pattern, "start")),  # `{…}; {…}` as the whole content
    "mistral": tag("[TOOL_CALLS]"),
    "deepseek": (_DEEPSEEK,),
    "deepseek_dsml": tag("<｜DSML｜"),
    "step3": (*tag("<steptml:invoke"), _DEEPSEEK),
    "kimi_k2": tag("<|tool_call_begin|>", "<|tool_calls_section_begin|>"),
    "minimax_m2": tag("<invoke", "<minimax:tool_call>"),
    # Raw Harmony text: the engine reads its other messages around a taken call (analysis to
    # the reasoning, headers and end tokens out), so nothing from the first token on is sure
    # to stay.
    "harmony": (_HARMONY, *tag("<|channel|>", "<|start|>", "<|message|>", "<|constrain|>",
                               "<|end|>", "<|call|>", "<|return|>")),
    "internlm": tag("<|action_start|>"),
    "phi4_mini": tag("functools["),
    "apertus": tag("<|tools_prefix|>"),
    "gemma4": tag("<|tool_call>", "<turn|>"),
    "functionary": (Opener(seq(opt(">>>"), _WORD, "\n", "{"), "start"),
                    Opener(seq(">>>", _WORD, "\n", "{"))),
    "pythonic": (Opener(seq(opt(seq("<|python_tag|>", _SPACE)), "[", _SPACE,
                            run("[A-Za-z_]", 1, 1), run(r"[\w.]", 0, 200), "("), "line"),
                 *tag("<|python_start|>", "<function_calls>")),
    "kimi_k3": tag("<|open|>tools", "<|open|>response", "<|close|>response", "<|close|>message"),
    "minimax_m3": tag("]<]minimax[>["),
    "lfm2": tag("<|tool_call_start|>"),
    "gigachat": (*tag("<|message_sep|>", "<|function_call|>", "<｜GCML｜"),
                 Opener(seq("function call", _SPACE, "<|role_sep|>"))),
    "command_r": (*tag("<|START_ACTION|>", "<|START_RESPONSE|>", "<|START_TEXT|>",
                       "<|END_RESPONSE|>", "<|END_TEXT|>", "<|END_OF_TURN_TOKEN|>"),
                  Opener(seq("Action: ```"), "line")),
    "solar_open": tag("<|tool_calls|>", "<|tool_call:"),
    "k2_horizon": tag("<ifm|tool_call"),
    "inkling": tag("<|message_model|>", "<|content_invoke_tool_json|>"),
    "functiongemma": tag("<start_function_call>"),
    "hunyuan": tag("<tool_call"),
    "minicpm": (Opener(seq("<function", run(r"[\sĠ]", 0, 8), "name=")),),
    "dots": tag("<dots_function_call>"),
    # Muse's header (`<|start|>assistant to=NAME<|message|>`) goes with the call after it.
    "muse": (Opener(lit("<|message|>"), lead=_MUSE_TO),
             Opener(lit("<atem:"), lead=opt(seq(_MUSE_TO, "<|message|>", _SPACE))),
             *tag("<|start|>assistant", "<|eot|>", "<|eom|>", "<|end|>")),
    "code_fence": (_FENCE,),
    "bare_json": (_CALL_OBJECT, _CALL_LIST),
}
