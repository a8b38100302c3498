"""A tool-call format declared once: each format module ends with its `SPEC`, and everything
else that knows formats (the registry's tables and aliases, the streamed mode's hold-back,
`doctor`, the coverage table of docs/formats.md, checked by a test) reads it from there."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import orjson

from ..opener_patterns import Opener
from ..scan import Document
from ..types import Frame

Span = tuple[int, int]
FrameFinder = Callable[[Document], Iterator[Frame]]
# Given the text and the spans of the frames taken from it: the spans of the markup around
# them (Harmony's other messages) and of the reasoning that markup holds.
ContentMarkup = Callable[[str, Sequence[Span]], tuple[list[Span], list[Span]]]
# Given a plain answer: the spans of the format's tokens framing it, and of reasoning in it.
AnswerMarkup = Callable[[str], tuple[list[Span], list[Span]]]


@dataclass(frozen=True)
class StructuralTag:
    """One call of a format as begin, the arguments (a JSON object to the tool's schema) and
    end: what vLLM's and SGLang's `structural_tag` response formats and xgrammar's
    `triggered_tags` take. `begin` holds `{name}`, replaced by the tool's name as it would
    appear inside a JSON string; `trigger` is the literal every call of the format starts
    with (the engine arms the tag when the model writes it)."""

    trigger: str
    begin: str
    end: str

    def begin_for(self, name: str) -> str:
        """`begin` for the tool `name` (escaped as a JSON string's content)."""
        return self.begin.replace("{name}", orjson.dumps(name).decode()[1:-1])


@dataclass(frozen=True)
class FormatSpec:
    """One tool-call format: how it is read, and every name and marker it is known by.

    `markers`: literals of which every frame the format finds holds at least one (the format
    is not run on a text holding none; empty: recognised by shape, always run).
    `openers`: what a frame can begin with, for the streamed mode's hold-back.
    `vllm`, `sglang`: the engines' tool-parser names that read it (docs/formats.md's coverage
    table; accepted in the `formats` setting); `llama_cpp`: llama.cpp's chat formats that write it
    (descriptions, as the table gives them); `aliases`: other accepted names (llama.cpp's
    format names, names in vLLM's or SGLang's tree that a release does not register). A name
    several specs list stands for all of them, in the order of their names (xLAM's).
    `doctor_parser`: the vLLM parser `doctor` recommends for it (None: none reads it);
    `doctor_markers`: (marker, vLLM parser) pairs `doctor` names when a text holds the marker
    but no call could be read from it.
    `needs`: groups of literals of which a text must hold every one of some group for the
    format to find a frame in it (each frame's opener is made of them): a text holding no
    group whole is not read by it. Empty: no such rule beyond `markers`.
    `own_markers_at_start`: where `markers` are not all the model's own, the ones a frame made
    with this format's markers starts with (None: all of `markers` are).
    `content_markup` / `answer_markup`: the format's markup around a taken call, or around a
    plain answer (see `answer`), for the formats that have such markup. `wrapper_tags`: the
    names of the tags the model writes around or beside its calls (`<tool_call>`), which the
    content cleanup takes with a frame they touch (see `cleanup`); `message_header`: a regex
    of the header that starts another of the format's messages (Harmony's), which is not prose
    beside a frame (see `context`).
    `thinking_opened`: the names (this format's or the engines') of the models whose chat
    templates open the thinking block in the prompt, so that the output starts inside it
    (Kimi K2.6/K3, GLM-4.7, DeepSeek V4): with `thinking_opened_by_template: auto`, an
    output cut by `length` before any closer is all thinking (see turn.thinking).
    `text_joined`: the engines' parsers join the text before and after a call of this format
    as written (Kimi K2's: `I'll check. ` and ` Done.` make `I'll check.  Done.`); the text
    around other formats' calls is trimmed at each seam and the pieces set a line apart.
    `call_separator`: with `text_joined`, what the format's template writes between the text
    and a call, which the parsers drop from the text before it (DeepSeek V4's blank line:
    SGLang's `_extract_preamble` is `text[:start].removesuffix("\n\n")`).
    `structural_tag`: how the engine is made to write one call in this format (begin, the
    arguments' schema, end per tool; see `StructuralTag`); None where the format's call is
    no JSON object between two literals (Qwen3-Coder's XML parameters): constrained re-asks
    then fall back to a JSON array of calls.
    """

    name: str
    find_frames: FrameFinder
    markers: tuple[str, ...]
    openers: tuple[Opener, ...]
    vllm: tuple[str, ...] = ()
    sglang: tuple[str, ...] = ()
    llama_cpp: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    doctor_parser: str | None = None
    doctor_markers: tuple[tuple[str, str], ...] = ()
    own_markers_at_start: tuple[str, ...] | None = None
    needs: tuple[tuple[str, ...], ...] = ()
    content_markup: ContentMarkup | None = None
    answer_markup: AnswerMarkup | None = None
    wrapper_tags: tuple[str, ...] = ()
    message_header: str | None = None
    thinking_opened: tuple[str, ...] = ()
    text_joined: bool = False
    call_separator: str = ""
    structural_tag: StructuralTag | None = None

    @property
    def engine_names(self) -> tuple[str, ...]:
        """Every name the `formats` setting accepts for this format besides its own."""
        names = dict.fromkeys((*self.vllm, *self.sglang, *self.aliases))
        names.pop(self.name, None)
        return tuple(names)
