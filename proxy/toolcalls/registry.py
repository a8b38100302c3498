"""The formats the engine knows, in the order they are tried by default; every other table of
formats (names, markers, openers, markup, aliases) is read from their specs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache

from .formats import (
    apertus,
    bare_json,
    code_fence,
    command_r,
    deepseek,
    deepseek_dsml,
    dots,
    functionary,
    functiongemma,
    gemma4,
    gigachat,
    glm,
    granite,
    granite_20b_fc,
    harmony,
    hermes,
    hunyuan,
    improvised,
    inkling,
    internlm,
    k2_horizon,
    kimi_k2,
    kimi_k3,
    lfm2,
    llama3,
    longcat,
    minicpm,
    minimax_m2,
    minimax_m3,
    mistral,
    muse,
    phi4_mini,
    pythonic,
    qwen_xml,
    solar_open,
    step3,
    tool_calls_tag,
    tools_wrapper,
)
from .formats.spec import AnswerMarkup, ContentMarkup, FormatSpec, FrameFinder
from .opener_patterns import Opener
from .types import Frame

# The formats in the order they are tried. Order matters where frames overlap: formats with
# their own special tokens first, then the tag formats, then those recognised by shape alone
# (pythonic, fenced, bare JSON) last. Everything else about a format is in its module's SPEC.
_MODULES = (hermes, longcat, qwen_xml, glm, tools_wrapper, granite_20b_fc, tool_calls_tag,
            granite, llama3, mistral, deepseek, deepseek_dsml, step3, kimi_k2, minimax_m2,
            kimi_k3, minimax_m3, lfm2, gigachat, command_r, solar_open, k2_horizon, inkling,
            harmony, internlm, phi4_mini, apertus, gemma4, functiongemma,
            hunyuan, minicpm, dots, muse, functionary,
            pythonic, code_fence, bare_json, improvised)
SPECS: tuple[FormatSpec, ...] = tuple(module.SPEC for module in _MODULES)

# The views of the specs the engine, the streamed mode and `doctor` read.
FORMATS: dict[str, FrameFinder] = {spec.name: spec.find_frames for spec in SPECS}
MARKERS: dict[str, tuple[str, ...]] = {spec.name: spec.markers for spec in SPECS}
# Each format's `needs` (FormatSpec), where it declares them: their literals are looked for
# with the markers, so that a format whose openers a text cannot hold is not run on it.
NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {spec.name: spec.needs for spec in SPECS
                                                  if spec.needs}
OPENERS: dict[str, tuple[Opener, ...]] = {spec.name: spec.openers for spec in SPECS}
CONTENT_MARKUP: dict[str, ContentMarkup] = {
    spec.name: spec.content_markup for spec in SPECS if spec.content_markup is not None}
ANSWER_MARKUP: dict[str, AnswerMarkup] = {
    spec.name: spec.answer_markup for spec in SPECS if spec.answer_markup is not None}

def _literal(opener: Opener) -> str | None:
    """The exact text of an opener that is one literal standing anywhere, else None."""
    if opener.lead is not None or opener.where != "anywhere":
        return None
    text = re.sub(r"\\(.)", r"\1", opener.pattern.full, flags=re.DOTALL)
    return text if re.escape(text) == opener.pattern.full else None


_TAG = re.compile(r"<[^<>\s]{1,64}>|\[[A-Z_]{2,32}\]")
# Each format's openers that are a whole tag or special token (`<tool_call>`, `[TOOL_CALLS]`):
# one left alone at the very end of an answer opened no call (see answer.py).
TAG_OPENERS: dict[str, tuple[str, ...]] = {
    spec.name: tuple(tag for opener in spec.openers
                     if (tag := _literal(opener)) is not None and _TAG.fullmatch(tag))
    for spec in SPECS}

# The tags of every format's wrappers, which the content cleanup takes beside a taken frame.
WRAPPER_TAGS: tuple[str, ...] = tuple(dict.fromkeys(
    tag for spec in SPECS for tag in spec.wrapper_tags))

# The regexes of the formats' message headers, which are not prose beside a frame.
MESSAGE_HEADERS: tuple[str, ...] = tuple(
    spec.message_header for spec in SPECS if spec.message_header is not None)


def _aliases(specs: Sequence[FormatSpec]) -> dict[str, str | tuple[str, ...]]:
    """The engines' names → our format names: a name one spec lists stands for it; one that
    several list (xLAM's parser reads several shapes) for all of them, in name order."""
    readers: dict[str, list[str]] = {}
    for spec in specs:
        for name in spec.engine_names:
            readers.setdefault(name, []).append(spec.name)
    return {name: formats[0] if len(formats) == 1 else tuple(sorted(formats))
            for name, formats in readers.items()}


ALIASES: dict[str, str | tuple[str, ...]] = _aliases(SPECS)
# The formats whose parsers join the text around a taken call as written (FormatSpec), each
# with the separator its template writes before a call, dropped from the text before it.
TEXT_JOINED: dict[str, str] = {spec.name: spec.call_separator for spec in SPECS if spec.text_joined}
# The names in `formats` that say the model's template opens its thinking block.
_THINKING_OPENED = frozenset(name for spec in SPECS for name in spec.thinking_opened)


def template_opens_thinking(names: Sequence[str]) -> bool:
    """Whether the configured `formats` name a model whose chat template opens the thinking
    block in the prompt (a spec's `thinking_opened`)."""
    return any(name in _THINKING_OPENED for name in names)
_OWN_MARKERS_AT_START: dict[str, tuple[str, ...]] = {
    spec.name: spec.own_markers_at_start for spec in SPECS
    if spec.own_markers_at_start is not None}


def made_with_markers(frame: Frame, text: str) -> bool:
    """Whether `frame` is written with markers of its own format (a frame recognised by its
    shape alone is not): a call to a name that matches no tool may then be delivered as
    written, since the model plainly made a call; otherwise the name decides."""
    if not frame.closed or "missing_open_tag" in frame.repairs:
        return False  # a marker of its frame is what the model left out
    own = _OWN_MARKERS_AT_START.get(frame.format)
    if own is None:
        return bool(MARKERS.get(frame.format))
    return any(text.startswith(marker, frame.start) for marker in own)


@lru_cache(maxsize=64)
def markers_of(names: tuple[str, ...]) -> frozenset[str]:
    """All the markers of these formats and the literals they need, looked for together in
    each text."""
    return frozenset((*(m for name in names for m in MARKERS.get(name, ())),
                      *(m for name in names for group in NEEDS.get(name, ()) for m in group)))


@lru_cache(maxsize=64)
def resolved_markers(names: tuple[str, ...]) -> frozenset[str]:
    """`markers_of` the formats `resolve(names)` gives, made once per list of names (every
    extraction asks for its model's)."""
    return markers_of(tuple(name for name, _ in _resolved(names)))


@lru_cache(maxsize=256)
def runnable(names: tuple[str, ...], present: frozenset[str],
             ) -> tuple[tuple[str, FrameFinder], ...]:
    """The parsers of `resolve(names)` that can find a frame in a text where only `present`
    of their markers (and needed literals) occur: those with no markers (recognised by
    shape) and those one of whose markers occurs, of which those with `needs` only where a
    group of them occurs whole; made once per list of names and set of markers present (the
    texts of one deployment hold the same few)."""
    return tuple((name, finder) for name, finder in _resolved(names)
                 if (not MARKERS.get(name) or not present.isdisjoint(MARKERS[name]))
                 and (name not in NEEDS or any(present.issuperset(group)
                                               for group in NEEDS[name])))


class UnknownFormat(ValueError):
    """A configured format name that no parser has."""


def resolve(names: Sequence[str]) -> list[tuple[str, FrameFinder]]:
    """The parsers for `names`, in that order; "auto" stands for every format, default order.

    Names may be ours or vLLM's parser names (see ALIASES); repeats are dropped. Resolved
    once per list of names (every turn asks for its model's, several times).
    """
    return list(_resolved(tuple(names)))


@lru_cache(maxsize=64)
def _resolved(names: tuple[str, ...]) -> tuple[tuple[str, FrameFinder], ...]:
    chosen: dict[str, FrameFinder] = {}
    for name in names:
        alias = ALIASES.get(name, name)
        for item in FORMATS if name == "auto" else (alias,) if isinstance(alias, str) else alias:
            finder = FORMATS.get(item)
            if finder is None:
                raise UnknownFormat(f"unknown tool-call format {item!r}; known: "
                                    f"{', '.join(FORMATS)}, auto")
            chosen.setdefault(item, finder)
    return tuple(chosen.items())


def formats_for_model(model: str, by_glob: Mapping[str, Sequence[str]],
                      default: Sequence[str] = ("auto",)) -> tuple[str, ...]:
    """The format list for `model`: the first glob (in mapping order) that matches it, else
    `default`. Globs are case-insensitive shell patterns (`*qwen3*`, `gpt-oss-*`)."""
    lowered = model.lower()
    for pattern, names in by_glob.items():
        if fnmatchcase(lowered, pattern.lower()):
            resolve(names)  # fail loudly on a name no parser has
            return tuple(names)
    return tuple(default)
