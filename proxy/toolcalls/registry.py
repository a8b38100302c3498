"""The formats the engine knows, the order they are tried in by default, and their names."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
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
from .scan import Document
from .types import Frame

FrameFinder = Callable[[Document], Iterator[Frame]]

# Order matters where frames overlap: formats with their own special tokens first, then the
# tag formats, then those recognised by shape alone (pythonic, fenced, bare JSON) last.
_MODULES = (hermes, longcat, qwen_xml, glm, tools_wrapper, granite_20b_fc, tool_calls_tag,
            granite, llama3, mistral, deepseek, deepseek_dsml, step3, kimi_k2, minimax_m2,
            kimi_k3, minimax_m3, lfm2, gigachat, command_r, solar_open, k2_horizon, inkling,
            harmony, internlm, phi4_mini, apertus, gemma4, functiongemma,
            hunyuan, minicpm, dots, muse, functionary,
            pythonic, code_fence, bare_json)
FORMATS: dict[str, FrameFinder] = {module.NAME: module.find_frames for module in _MODULES}

# Each format's trigger markers: literals of which every frame it finds holds at least one.
# When none occurs in a text, the format is not run at all (all formats' markers are looked
# for in one combined search). Empty: the format is recognised by shape and always runs.
MARKERS: dict[str, tuple[str, ...]] = {module.NAME: module.MARKERS for module in _MODULES}

# Where a format's MARKERS are not all the model's own: a frame of these formats is made with
# markers of its own only when it starts with one of these (Llama 3's bare `{"name": …}; …`
# objects hold none; Functionary's only marker is the tool's name on its line).
_OWN_MARKERS_AT_START: dict[str, tuple[str, ...]] = {
    "llama3": ("<|python_tag|>{", "<function"), "functionary": ()}


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


# Formats whose output holds more structure around a call than its frames (Harmony's other
# messages): once a call of theirs is taken, the spans of that markup and of the reasoning
# it holds, given the text and the taken frames' spans.
ContentMarkup = Callable[[str, Sequence[tuple[int, int]]],
                         tuple[list[tuple[int, int]], list[tuple[int, int]]]]
CONTENT_MARKUP: dict[str, ContentMarkup] = {
    module.NAME: module.content_markup for module in _MODULES
    if hasattr(module, "content_markup")}

# Formats whose tokens frame a plain answer too (Harmony's headers, Command's response pair,
# …): the spans of that markup in a text, and of the reasoning it holds (see `answer`).
AnswerMarkup = Callable[[str], tuple[list[tuple[int, int]], list[tuple[int, int]]]]
ANSWER_MARKUP: dict[str, AnswerMarkup] = {
    module.NAME: module.answer_markup for module in _MODULES
    if hasattr(module, "answer_markup")}

# vLLM's `--tool-call-parser` names (and a few common spellings) → our format names, so that
# a configuration can name the parser it would have used upstream. A parser that reads shapes
# several of our formats read (xLAM) stands for all of them, in that order.
ALIASES: dict[str, str | tuple[str, ...]] = {
    "qwen3_coder": "qwen_xml", "qwen3_xml": "qwen_xml", "qwen": "hermes",
    "glm45": "glm", "glm4_moe": "glm", "glm47": "glm",
    "jamba": "tool_calls_tag", "hunyuan_a13b": "tool_calls_tag",
    "llama3_json": "llama3", "llama4_json": "llama3",
    "llama4_pythonic": "pythonic", "olmo3": "pythonic",
    "deepseek_v3": "deepseek", "deepseek_v31": "deepseek", "deepseek_r1": "deepseek",
    "deepseek_v32": "deepseek_dsml", "minimax": "tool_calls_tag", "minimax_m1": "tool_calls_tag",
    "kimi": "kimi_k2", "openai": "harmony", "gpt_oss": "harmony",
    "phi4_mini_json": "phi4_mini", "seed_oss": "qwen_xml",
    "ernie45": "hermes", "granite-20b-fc": "granite_20b_fc",
    "xlam": ("bare_json", "code_fence", "hermes", "mistral"),
    # vLLM 0.33's parsers for this year's families
    "deepseek_v4": "deepseek_dsml", "deepseek_v41": "deepseek_dsml",
    "cohere_command3": "command_r", "cohere_command4": "command_r", "granite4": "hermes",
    "poolside_v1": "glm", "hy_v3": "hunyuan", "mimo": "qwen_xml", "step3p5": "qwen_xml",
    "minicpm5": "minicpm", "gigachat3": "gigachat", "gigachat35": "gigachat",
    "solar_open2": "solar_open", "nemotron_json": "tool_calls_tag",
    "nemotron_nano_v2": "tool_calls_tag",
    "ling3": "glm",
    # SGLang's spellings of its detectors' names
    "apertus2509": "apertus", "deepseekv3": "deepseek", "deepseekv31": "deepseek",
    "deepseekv32": "deepseek_dsml", "deepseekv4": "deepseek_dsml", "deepseekv41": "deepseek_dsml",
    "gpt-oss": "harmony", "minimax-m2": "minimax_m2", "minimax-m3": "minimax_m3",
    "qwen25": "hermes", "trinity": "hermes", "interns1": "internlm", "spark25": "glm",
    # llama.cpp's format names where they differ
    "apriel": "tool_calls_tag", "firefunction_v2": "phi4_mini", "command_r7b": "command_r",
    "nemotron_v2": "tool_calls_tag", "generic": "bare_json",
}


@lru_cache(maxsize=64)
def markers_of(names: tuple[str, ...]) -> frozenset[str]:
    """All the markers of these formats, looked for together in each text."""
    return frozenset(m for name in names for m in MARKERS.get(name, ()))


class UnknownFormat(ValueError):
    """A configured format name that no parser has."""


def resolve(names: Sequence[str]) -> list[tuple[str, FrameFinder]]:
    """The parsers for `names`, in that order; "auto" stands for every format, default order.

    Names may be ours or vLLM's parser names (see ALIASES); repeats are dropped.
    """
    chosen: dict[str, FrameFinder] = {}
    for name in names:
        alias = ALIASES.get(name, name)
        for item in FORMATS if name == "auto" else (alias,) if isinstance(alias, str) else alias:
            finder = FORMATS.get(item)
            if finder is None:
                raise UnknownFormat(f"unknown tool-call format {item!r}; known: "
                                    f"{', '.join(FORMATS)}, auto")
            chosen.setdefault(item, finder)
    return list(chosen.items())


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
