"""Properties of extraction over generated text (issue 3, item 8), bounded for `make test`."""

from __future__ import annotations

import re

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.toolcalls import FORMATS, extract
from proxy.toolcalls.registry import TEXT_JOINED

TOOLS = {"read": {}, "write": {}, "get_weather": {}}
BOUNDED = settings(max_examples=200, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])

# Pieces every format reacts to, so that random text often looks almost like a call.
MARKERS = [
    "<tool_call>", "</tool_call>", "<tools>", "</tools>", "<tool_calls>", "</tool_calls>",
    "<function=read>", "</function>", "<parameter=path>", "</parameter>", "<arg_key>",
    "</arg_key>", "<arg_value>", "</arg_value>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]",
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
    "to=functions.read", "<|channel|>", "commentary", "<|constrain|>json", "<|message|>",
    "<|call|>", "<|tool_call|>", "<minimax:tool_call>", '<invoke name="read">', "</invoke>",
    '<parameter name="path">', "<｜DSML｜function_calls>", '<｜DSML｜invoke name="read">',
    "<|action_start|><|plugin|>", "<|action_end|>",
    "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "functions.read:0",
    "<|tool_call_argument_begin|>", "<|tool_call_end|>", "```json\n", "```", "\n",
    '{"name": "read", "arguments": {"path": "/a"}}', '{"name": "write", "parameters": {}}',
    "[read(path='/a')]", "read(", ")", "]", "[", "{", "}", '"', "'", ",", ";", ":", "`",
    "True", "None", "read", "get_weather", " ", "<think>", "</think>",
]
texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.sampled_from(MARKERS), st.text(max_size=8)), max_size=40).map("".join),
)


def _outside(text: str, spans: list[tuple[int, int]]) -> str:
    kept, pos = [], 0
    for start, end in sorted(set(spans)):
        kept.append(text[pos:start])
        pos = max(pos, end)
    kept.append(text[pos:])
    return "".join(kept)


def _squeeze(text: str) -> str:
    return "".join(text.split())


# Markup: tags (a cut one too), fences, and Harmony's headers (`<|start|>assistant`,
# `<|channel|>final`, `<|constrain|>json`).
_TAG = re.compile(r"<\|(?:start|channel|constrain)\|>[^<]*|<[^<>\n]*>?|```|~~~|\[TOOL_CALLS")


def _words(markup: str) -> bool:
    """Whether anything but tags, fences and brackets stands in `markup`."""
    return any(char.isalnum() for char in _TAG.sub("", markup))


@BOUNDED
@given(texts, st.sampled_from([None, "read"]), st.booleans())
def test_extraction_never_raises_and_keeps_its_promises(text, only, truncated):
    found = extract(text, TOOLS, only=only, truncated=truncated)
    assert "parser_error" not in {x.reason for x in found.left_as_text}
    for call in found.calls:
        assert isinstance(orjson.loads(call.arguments), dict)
        # a call plainly made (a whole frame with markers of its own) to a tool not offered
        # is delivered as written, and says so (issue 26, item 6)
        assert call.name in TOOLS or "unknown_tool" in call.repairs
        assert only is None or call.name == only
        assert 0 <= call.start < call.end <= len(text)
    if not found.calls:
        assert found.content == text
    else:  # the text outside the frames taken and their markup is all still there, in order
        left_out = [(start, end) for start, end, _ in found.left_out]
        outside = _outside(text, [(c.start, c.end) for c in found.calls] + left_out)
        assert _squeeze(found.content) == _squeeze(outside)
        for start, end, kind in found.left_out:  # markup is markup: tags, fences, brackets
            if kind == "reasoning":
                assert text[start:end].strip() in found.reasoning
            elif not (truncated and end == len(text)):  # (else it may be a call cut short)
                inner = [(c.start - start, c.end - start) for c in found.calls
                         if start <= c.start and c.end <= end]
                assert not _words(_outside(text[start:end], inner)), text[start:end]


@BOUNDED
@given(texts, st.sampled_from(sorted(FORMATS)))
def test_each_format_alone_never_raises(text, fmt):
    found = extract(text, TOOLS, formats=[fmt])
    assert "parser_error" not in {x.reason for x in found.left_as_text}
    assert all(isinstance(orjson.loads(c.arguments), dict) for c in found.calls)
    assert found.calls or found.content == text


# Well-formed frames of the closed formats, with generated names and arguments.
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8,
)
_keys = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
_json_args = st.dictionaries(_keys, _json_values, max_size=4)
_text_values = st.text(st.characters(blacklist_characters="<>\r", blacklist_categories=["Cs"]),
                       max_size=20).filter(lambda v: not v.startswith("\n")
                                           and not v.endswith("\n"))
_text_args = st.dictionaries(_keys, _text_values, max_size=4)


def _frame(fmt: str, name: str, args: dict) -> str:
    payload = orjson.dumps(args).decode()
    call = orjson.dumps({"name": name, "arguments": args}).decode()
    if fmt == "hermes":
        return f"<tool_call>\n{call}\n</tool_call>"
    if fmt == "tool_calls_tag":
        return f"<tool_calls>[{call}]</tool_calls>"
    if fmt == "internlm":
        params = orjson.dumps({"name": name, "parameters": args}).decode()
        return f"<|action_start|><|plugin|>\n{params}<|action_end|>"
    if fmt == "kimi_k2":
        return (f"<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0"
                f"<|tool_call_argument_begin|>{payload}<|tool_call_end|>"
                "<|tool_calls_section_end|>")
    if fmt == "deepseek":
        return (f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{payload}"
                "<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
    if fmt == "harmony":
        return (f"<|start|>assistant<|channel|>commentary to=functions.{name} "
                f"<|constrain|>json<|message|>{payload}<|call|>")
    if fmt == "qwen_xml":
        params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    if fmt == "minimax_m2":
        params = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in args.items())
        return (f'<minimax:tool_call>\n<invoke name="{name}">\n{params}</invoke>\n'
                "</minimax:tool_call>")
    assert fmt == "glm"
    params = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in args.items())
    return f"<tool_call>{name}{params}</tool_call>"


_prose = st.text(st.sampled_from("abcdefgh ijk.,!?0123\n"), max_size=30)
_json_formats = ["hermes", "tool_calls_tag", "internlm", "kimi_k2", "deepseek", "harmony"]


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[str], list[tuple[str, dict]], set[str]]:
    calls = []
    formats = set()
    prose = [draw(_prose)]
    pieces = [prose[0]]
    for _ in range(draw(st.integers(1, 4))):
        fmt = draw(st.sampled_from([*_json_formats, "qwen_xml", "glm", "minimax_m2"]))
        formats.add(fmt)
        name = draw(st.sampled_from(sorted(TOOLS)))
        args = draw(_json_args if fmt in _json_formats else _text_args)
        calls.append((name, args))
        pieces.append("\n" + _frame(fmt, name, args) + "\n")
        prose.append(draw(_prose))
        pieces.append(prose[-1])
    return "".join(pieces), prose, calls, formats


@BOUNDED
@given(documents())
def test_well_formed_frames_are_all_taken_and_prose_kept_in_order(document):
    text, prose, calls, formats = document
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == calls
    if formats & TEXT_JOINED.keys():  # their parsers join the text around calls as written
        assert _squeeze(found.content) == _squeeze("".join(prose))
        assert found.content == "" or found.content.strip()
        return
    # Whitespace at each seam is trimmed; the content's own outer whitespace is kept.
    seams = [prose[0].rstrip(), *(p.strip() for p in prose[1:-1]), prose[-1].lstrip()]
    assert found.content == "\n".join(p for p in seams if p)


@BOUNDED
@given(texts, st.booleans())
def test_with_the_strict_rule_every_call_names_an_offered_tool(text, truncated):
    found = extract(text, TOOLS, truncated=truncated, deliver_unknown=False)
    assert all(call.name in TOOLS and "unknown_tool" not in call.repairs
               for call in found.calls)
    delivered = extract(text, TOOLS, truncated=truncated)
    known = [c for c in delivered.calls if "unknown_tool" not in c.repairs]
    assert [(c.name, c.arguments) for c in known] == [(c.name, c.arguments)
                                                     for c in found.calls]
