"""Values as the model wrote them (issue 21, items 1 and 6): a value that holds the markers of
its own frame, or of any other format, is read whole or its frame stays text; never cut at a
marker, never taken for a call of its own. Whitespace is kept where a format marks its strings.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.toolcalls import extract
from proxy.toolcalls.registry import MARKERS

STRING = {"type": "string"}
TOOLS = {"write": {"type": "object", "properties": {"path": STRING, "content": STRING}},
         "read": {"type": "object", "properties": {"path": STRING}}}


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


def _call(path: str, content: str) -> str:
    return _json({"name": "write", "arguments": {"path": path, "content": content}})


def _qwen(path: str, content: str, wrapped: bool = True) -> str:
    body = (f"<function=write>\n<parameter=path>\n{path}\n</parameter>\n"
            f"<parameter=content>\n{content}\n</parameter>\n</function>")
    return f"<tool_call>\n{body}\n</tool_call>" if wrapped else body


def _invoke(prefix: str, block: str, path: str, content: str, string: str = "") -> str:
    return (f'{block[0]}\n<{prefix}invoke name="write">\n'
            f'<{prefix}parameter name="path"{string}>{path}</{prefix}parameter>\n'
            f'<{prefix}parameter name="content"{string}>{content}</{prefix}parameter>\n'
            f"</{prefix}invoke>\n{block[1]}")


# Each format that writes string values: how it writes write(path, content). The text formats
# that drop a template newline at each end get one on each side, so that what is read back is
# exactly the value given.
WRITERS = {
    "hermes": lambda p, c: f"<tool_call>\n{_call(p, c)}\n</tool_call>",
    "longcat": lambda p, c: f"<longcat_tool_call>{_call(p, c)}</longcat_tool_call>",
    "tools_wrapper": lambda p, c: f"<tools>\n{_call(p, c)}\n</tools>",
    "tool_calls_tag": lambda p, c: f"<tool_calls>[{_call(p, c)}]</tool_calls>",
    "granite": lambda p, c: f"<|tool_call|>[{_call(p, c)}]",
    "granite_20b_fc": lambda p, c: f"<function_call> {_call(p, c)}",
    "llama3": lambda p, c: "<|python_tag|>" + _json(
        {"name": "write", "parameters": {"path": p, "content": c}}),
    "mistral": lambda p, c: f"[TOOL_CALLS][{_call(p, c)}]",
    "internlm": lambda p, c: "<|action_start|><|plugin|>" + _json(
        {"name": "write", "parameters": {"path": p, "content": c}}) + "<|action_end|>",
    "phi4_mini": lambda p, c: f"functools[{_call(p, c)}]",
    "apertus": lambda p, c: ("<|tools_prefix|>[" + _json({"write": {"path": p, "content": c}})
                             + "]<|tools_suffix|>"),
    "functionary": lambda p, c: f"write\n{_json({'path': p, 'content': c})}",
    "code_fence": lambda p, c: f"```json\n{_call(p, c)}\n```",
    "bare_json": _call,
    "pythonic": lambda p, c: f"[write(path={p!r}, content={c!r})]",
    "qwen_xml": _qwen,
    "qwen_xml_unwrapped": lambda p, c: _qwen(p, c, wrapped=False),
    "glm": lambda p, c: (f"<tool_call>write\n<arg_key>path</arg_key>\n<arg_value>{p}</arg_value>"
                         f"\n<arg_key>content</arg_key>\n<arg_value>{c}</arg_value>\n</tool_call>"),
    "minimax_m2": lambda p, c: _invoke("", ("<minimax:tool_call>", "</minimax:tool_call>"),
                                       p, f"\n{c}\n"),
    "deepseek_dsml": lambda p, c: _invoke("｜DSML｜", ("<｜DSML｜function_calls>",
                                                     "</｜DSML｜function_calls>"),
                                          p, c, ' string="true"'),
    "step3": lambda p, c: (_invoke("steptml:", ("", ""), p, f"\n{c}\n").replace(
        "\n<steptml:invoke",
        "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>write\n"
        "<steptml:invoke", 1)
        + "<｜tool_call_end｜><｜tool_calls_end｜>").strip(),
    "gemma4": lambda p, c: f'<|tool_call>call:write{{path:<|"|>{p}<|"|>,content:<|"|>{c}<|"|>}}'
                           "<tool_call|>",
}

# Formats that write the arguments' JSON object between a head and a tail.
AROUND_ARGUMENTS = {
    "llama3_function": ("<function=write>", "</function>"),
    "mistral_v11": ("[TOOL_CALLS]write[ARGS]", ""),
    "deepseek": ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>write<｜tool▁sep｜>",
                 "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
    "deepseek_v3": ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                    "write\n```json\n",
                    "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
    "kimi_k2": ("<|tool_calls_section_begin|><|tool_call_begin|>functions.write:0"
                "<|tool_call_argument_begin|>", "<|tool_call_end|><|tool_calls_section_end|>"),
    "harmony": ("<|start|>assistant<|channel|>commentary to=functions.write <|constrain|>json"
                "<|message|>", "<|call|>"),
}
WRITERS.update({fmt: (lambda p, c, head=head, tail=tail:
                      head + _json({"path": p, "content": c}) + tail)
                for fmt, (head, tail) in AROUND_ARGUMENTS.items()})



def _pairs(path: str, content: str, head: str, key: tuple[str, str], value: tuple[str, str],
           tail: str, typed: str = "") -> str:
    """A call of the key/value grammars: a head, then each key and its value, then a tail."""
    return head + "".join(
        f"{key[0]}{name}{key[1]}{typed if name == 'content' else ''}{value[0]}{text}{value[1]}\n"
        for name, text in (("path", path), ("content", content))) + tail


def _hunyuan(path: str, content: str, suffix: str = "") -> str:
    def tag(name: str) -> str:
        return f"<{name}{suffix}>"
    return _pairs(path, content, f"{tag('tool_calls')}\n{tag('tool_call')}write{tag('tool_sep')}\n",
                  (tag("arg_key"), tag("/arg_key") + "\n"), (tag("arg_value"), tag("/arg_value")),
                  f"{tag('/tool_call')}\n{tag('/tool_calls')}")


NS = "]<]minimax[>["
K3_ARGUMENT = '<|open|>argument key="{}" type="string"<|sep|>'
CDATA = ("<![CDATA[", "]]>")

# This year's formats (and each spelling of one) that write string values.
WRITERS.update({
    "command_r": lambda p, c: "<|START_ACTION|>[" + _json(
        {"tool_call_id": "0", "tool_name": "write", "parameters": {"path": p, "content": c}})
        + "]<|END_ACTION|>",
    "command_r_action": lambda p, c: "Action: ```json\n[" + _json(
        {"tool_name": "write", "parameters": {"path": p, "content": c}}) + "]\n```",
    "dots": lambda p, c: _invoke("", ("<dots_function_call>", "</dots_function_call>"), p,
                                 f"\n{c}\n"),
    "dots_json": lambda p, c: f"<dots_function_call>{_call(p, c)}</dots_function_call>",
    "functiongemma": lambda p, c: (f"<start_function_call>call:write{{path:<escape>{p}<escape>,"
                                   f"content:<escape>{c}<escape>}}<end_function_call>"),
    "gigachat": lambda p, c: f"<|message_sep|>\n\nfunction call<|role_sep|>\n{_call(p, c)}",
    "gigachat_31": lambda p, c: f"<|function_call|>{_call(p, c)}",
    "gigachat_35": lambda p, c: _invoke("｜GCML｜", ("<｜GCML｜tool_calls>",
                                                   "</｜GCML｜tool_calls>"),
                                        p, c, ' string="true"'),
    "hunyuan": _hunyuan,
    "hunyuan_suffixed": lambda p, c: _hunyuan(p, c, ":opensource"),
    "inkling": lambda p, c: ("<|message_model|>write<|content_invoke_tool_json|>"
                             + _json({"name": "write", "args": {"path": p, "content": c}})
                             + "<|end_message|>"),
    "k2_horizon": lambda p, c: _pairs(
        p, c, "<ifm|tool_calls>\n<ifm|tool_call>write\n", ("<ifm|arg_key>", "</ifm|arg_key>"),
        ("<ifm|arg_value>", "</ifm|arg_value>"), "</ifm|tool_call>\n</ifm|tool_calls>",
        typed="<ifm|arg_type>string</ifm|arg_type>"),
    "k2_horizon_json": lambda p, c: f"<ifm|tool_call>{_call(p, c)}</ifm|tool_call>",
    "kimi_k3": lambda p, c: _pairs(
        p, c, '<|open|>tools<|sep|>\n<|open|>call tool="write" index="1"<|sep|>\n',
        ('<|open|>argument key="', '" type="string"<|sep|>'), ("", "<|close|>argument<|sep|>"),
        "<|close|>call<|sep|>\n<|close|>tools<|sep|>"),
    "kimi_k3_json": lambda p, c: ('<|open|>tools<|sep|><|open|>call tool="write" index="1"<|sep|>'
                                  '<|open|>json type="object"<|sep|>'
                                  + _json({"path": p, "content": c})
                                  + "<|close|>json<|sep|><|close|>call<|sep|>"
                                  "<|close|>tools<|sep|>"),
    "lfm2": lambda p, c: f"<|tool_call_start|>[write(path={p!r}, content={c!r})]<|tool_call_end|>",
    "pythonic_llama4": lambda p, c: (f"<|python_start|>[write(path={p!r}, content={c!r})]"
                                     "<|python_end|>"),
    "lfm2_json": lambda p, c: f"<|tool_call_start|>[{_call(p, c)}]<|tool_call_end|>",
    "minicpm": lambda p, c: _pairs(p, c.join(CDATA), '<function name="write">',
                                   ('<param name="', '">'), ("", "</param>"), "</function>"),
    "minicpm_plain": lambda p, c: _pairs(p, c, '<function name="write">', ('<param name="', '">'),
                                         ("", "</param>"), "</function>"),
    "minimax_m3": lambda p, c: (f'{NS}<tool_call>\n{NS}<invoke name="write">{NS}<path>{p}'
                                f"{NS}</path>{NS}<content>{c}{NS}</content>{NS}</invoke>\n"
                                f"{NS}</tool_call>"),
    "muse": lambda p, c: ("<|start|>assistant to=write<|message|>"
                          + _invoke("atem:", ("<atem:function_calls>", "</atem:function_calls>"),
                                    p, c) + "<|eom|>"),
    "solar_open": lambda p, c: ("<|tool_calls|><|tool_call:begin|>0<|tool_call:name|>write"
                                "<|tool_call:args|>" + _json({"path": p, "content": c})
                                + "<|tool_call:end|><|calls|>"),
    "solar_open2": lambda p, c: _pairs(p, c, "<|tool_call:start|>write\n",
                                       ("<|tool_arg:start|>", "<|tool_arg:value|>"),
                                       ("", "<|tool_arg:end|>"), "<|tool_call:end|>"),
    "deepseek_dsml_v4": lambda p, c: _invoke("｜DSML｜", ("<｜DSML｜tool_calls>",
                                                        "</｜DSML｜tool_calls>"),
                                             p, c, ' string="true"'),
    "deepseek_dsml_v41": lambda p, c: _invoke("｜DSML｜ ", ("<｜DSML｜ calls>",
                                                         "</｜DSML｜ calls>"),
                                              p, c, ' string="true"'),
    "deepseek_dsml_json": lambda p, c: ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="write">'
                                        + _json({"path": p, "content": c})
                                        + "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"),
    "tool_calls_tag_nemotron": lambda p, c: f"<TOOLCALL>[{_call(p, c)}]</TOOLCALL>",
    "bare_json_envelope": lambda p, c: _json({"tool_calls": [
        {"name": "write", "arguments": {"path": p, "content": c}}]}),
})

# Closing markers, besides each format's trigger markers (registry.MARKERS).
CLOSERS = [
    "</tool_call>", "</function>", "</parameter>", "</arg_value>", "</arg_key>", "<tool_call|>",
    "</invoke>", "</minimax:tool_call>", "</｜DSML｜parameter>", "</｜DSML｜invoke>",
    "</｜DSML｜function_calls>", "</steptml:parameter>", "</steptml:invoke>", "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>", "<|tool_call_end|>", "<|tool_calls_section_end|>", "<|call|>",
    "<|end|>", "<|action_end|>", "<|tools_suffix|>", "</tools>", "</tool_calls>",
    "</longcat_tool_call>", "</function_call>", "```", "<|python_end|>", "</function_calls>",
    "</seed:tool_call>", "<|tool_response>",
    # this year's formats
    "<|END_ACTION|>", "</dots_function_call>", "<escape>", "<end_function_call>", "</s>",
    "</｜GCML｜parameter>", "</｜GCML｜invoke>", "</｜GCML｜tool_calls>", "</arg_value:opensource>",
    "</tool_call:opensource>", "</tool_calls:opensource>", "<|end_message|>", "</ifm|arg_value>",
    "</ifm|arg_key>", "</ifm|tool_call>", "</ifm|tool_calls>", "<|close|>argument<|sep|>",
    "<|close|>call<|sep|>", "<|close|>tools<|sep|>", "<|close|>json<|sep|>", "</param>", "]]>",
    f"{NS}</content>", f"{NS}</path>", f"{NS}</invoke>", f"{NS}</tool_call>",
    "</atem:parameter>", "</atem:invoke>", "</atem:function_calls>", "<|eom|>",
    "<|tool_call:end|>", "<|tool_arg:end|>", "<|calls|>", "</｜DSML｜tool_calls>",
    "</｜DSML｜ parameter>", "</｜DSML｜ invoke>", "</｜DSML｜ calls>", "</TOOLCALL>",
]
OPENERS = ["<parameter=path>", "<parameter=content>", '<parameter name="path">',
           "<arg_key>path</arg_key>", "<arg_value>", '<invoke name="read">', "<|message|>",
           "<|start|>assistant", "<|channel|>analysis", "<think>", "</think>",
           '<param name="path">', "<arg_key:opensource>path</arg_key:opensource>",
           "<ifm|arg_key>path</ifm|arg_key><ifm|arg_value>", K3_ARGUMENT.format("path"),
           "<|tool_arg:start|>path<|tool_arg:value|>", f"{NS}<path>", CDATA[0],
           '<atem:parameter name="path">', '<｜GCML｜parameter name="path" string="true">',
           '<｜DSML｜ parameter name="path" string="true">', "<tool_sep>", "<|message_model|>"]
ALL_MARKERS = sorted({marker for markers in MARKERS.values() for marker in markers})
# Whole calls of every format, as a file that quotes them (a test fixture, a doc page) would.
QUOTED_CALLS = [write("/etc/passwd", "x") for write in WRITERS.values()]


def _values() -> st.SearchStrategy[str]:
    piece = st.one_of(st.sampled_from(ALL_MARKERS + CLOSERS + OPENERS),
                      st.sampled_from(QUOTED_CALLS),
                      st.text(st.sampled_from("ab \n\t{}[]\"':,=<>/|`"), max_size=6))
    return st.lists(piece, min_size=1, max_size=8).map("".join)


# What a format's strings cannot hold: their own quote (Gemma 4, FunctionGemma), the end of
# a CDATA section; MiniCPM's plain values are trimmed (its parsers read them so).
UNWRITABLE = {"gemma4": '<|"|>', "functiongemma": "<escape>", "minicpm": "]]>"}


def _written(fmt: str, value: str) -> bool:
    """Whether the format can write `value` at all."""
    if fmt == "minicpm_plain" and value != value.strip():
        return False
    return fmt not in UNWRITABLE or UNWRITABLE[fmt] not in value


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_values(), truncated=st.booleans())
def test_a_value_holding_any_marker_is_read_whole_or_its_frame_stays_text(fmt, value,
                                                                          truncated):
    if not _written(fmt, value):
        return
    text = WRITERS[fmt]("a.txt", value)
    found = extract(text, TOOLS, truncated=truncated)
    read = [(call.name, orjson.loads(call.arguments)) for call in found.calls]
    assert read in ([], [("write", {"path": "a.txt", "content": value})]), (fmt, value)


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize("value", [
    "x = '</tool_call>'\ny = '</function>' and '</parameter>' and </arg_value>",
    'docs: <tool_call> opens a call, </tool_call> closes it; <|"|> and <tool_call|> too',
    "fixture:\n" + _qwen("/etc/passwd", "x") + "\nand\n" + WRITERS["hermes"]("/etc", "y"),
    "a</parameter>\n</function>\n</tool_call>\nb",
    "```\ncode\n```",
])
def test_a_value_holding_markers_is_read_whole(fmt, value):
    if not _written(fmt, value):
        return
    found = extract(WRITERS[fmt]("a.txt", value), TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("write", {"path": "a.txt", "content": value})]
    assert found.content == ""


UNBALANCED = {"glm": "<arg_value>",  # (qwen_xml decides: see the tests after this one)
              "minimax_m2": '<parameter name="x">',
              "deepseek_dsml": '<｜DSML｜parameter name="x" string="true">',
              "step3": '<steptml:parameter name="x">', "hunyuan": "<arg_value>",
              "hunyuan_suffixed": "<arg_value:opensource>", "k2_horizon": "<ifm|arg_value>",
              "minicpm_plain": '<param name="x">', "solar_open2": "<|tool_arg:start|>",
              "kimi_k3": K3_ARGUMENT.format("x"), "dots": '<parameter name="x">',
              "muse": '<atem:parameter name="x">',
              "gigachat_35": '<｜GCML｜parameter name="x" string="true">',
              "deepseek_dsml_v41": '<｜DSML｜ parameter name="x" string="true">'}


@pytest.mark.parametrize("fmt", sorted(UNBALANCED))
def test_a_value_whose_tags_are_unbalanced_leaves_its_frame_as_text(fmt):
    # `<parameter=x>` (or the dialect's own) opened in the value takes the value's close:
    # the value forgot its close, or names the tag. Either way no reading is sure.
    opener = UNBALANCED[fmt]
    text = WRITERS[fmt]("a.txt", f"use {opener} here")
    found = extract(text, TOOLS)
    assert found.calls == []
    assert found.content == text
    assert [x.reason for x in found.left_as_text] == ["ambiguous_value"]


@pytest.mark.parametrize("content", [
    "use <parameter=x> here",  # mid-line: a mention of the tag
    "see <parameter=path>",
    "the tag\n<parameter=mode>\nopens a parameter",  # begins a line, but `write` declares no `mode`
    "again\n<parameter=path>\nb.txt",  # `path` is given already
    "quoted:\n<function=read>\n<parameter=path>\nb.txt",  # a quoted call's own parameter
])
def test_a_qwen_value_naming_a_parameter_tag_keeps_it_as_its_text(content):
    """Issue 37, item 4: a value holding a `<parameter=K>` it does not close is the text as
    written unless K can only be the next parameter (see the next test)."""
    found = extract(_qwen("a.txt", content), TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("write", {"path": "a.txt", "content": content})]
    assert found.content == ""


def test_a_qwen_value_that_forgot_its_close_ends_at_the_next_declared_parameter():
    """The other reading, as vLLM's qwen3_coder parser has it: a declared parameter not
    given yet, on a line of its own, is the next parameter; the value before it forgot its
    `</parameter>`."""
    text = ("<tool_call>\n<function=write>\n<parameter=content>\nline one\n"
            "<parameter=path>\nb.txt\n</parameter>\n</function>\n</tool_call>")
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("write", {"content": "line one", "path": "b.txt"})]
    assert "missing_parameter_close" in found.calls[0].repairs


def test_a_parameter_the_tool_does_not_declare_is_read_as_written():
    # Issue 26, item 3: as vLLM's qwen3_coder reads it, an undeclared parameter beside
    # declared ones is read, its value a string (the schema says nothing of it).
    text = ("<tool_call>\n<function=write>\n<parameter=path>\na.txt\n</parameter>\n"
            "<parameter=reason>\nkeep 42\n</parameter>\n<parameter=content>\nx\n</parameter>"
            "\n</function>\n</tool_call>")
    found = extract(text, TOOLS)
    assert [orjson.loads(c.arguments) for c in found.calls] == [
        {"path": "a.txt", "reason": "keep 42", "content": "x"}]
    assert found.content == ""
    assert found.left_as_text == []
    # So is a value that holds `</parameter>` then `<parameter=mode>`: the frame's structure
    # reads two parameters, as every reference parser does.
    found = extract(_qwen("a.txt", "x</parameter>\n<parameter=mode>\ny"), TOOLS)
    assert [orjson.loads(c.arguments) for c in found.calls] == [
        {"path": "a.txt", "content": "x", "mode": "y"}]
    # A key written twice is still a guess: the frame stays text.
    twice = _qwen("a.txt", "x</parameter>\n<parameter=path>\n/etc/passwd")
    found = extract(twice, TOOLS)
    assert found.calls == []
    assert found.content == twice
    assert [x.reason for x in found.left_as_text] == ["ambiguous_value"]
    # Declared keys, each once, in any order: a call.
    text = ("<function=write>\n<parameter=content>\nx\n</parameter>\n<parameter=path>\na\n"
            "</parameter>\n</function>")
    assert [orjson.loads(c.arguments) for c in extract(text, TOOLS).calls] == [
        {"content": "x", "path": "a"}]


@pytest.mark.parametrize("fmt", ["glm", "minimax_m2", "deepseek_dsml", "hunyuan", "k2_horizon"])
def test_an_undeclared_key_is_read_in_every_text_value_format(fmt):
    # The same rule for every key/value grammar: the undeclared key comes after the first.
    text = WRITERS[fmt]("a.txt", "body")
    text = text.replace("content", "notes")
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("write", {"path": "a.txt", "notes": "body"})], text


@pytest.mark.parametrize("fmt", ["qwen_xml", "qwen_xml_unwrapped", "glm", "minimax_m2",
                                 "deepseek_dsml", "gemma4", *sorted(UNBALANCED), "minicpm",
                                 "minimax_m3", "functiongemma", "lfm2", "pythonic_llama4"])
def test_a_call_quoted_in_a_value_cut_by_length_is_not_taken(fmt):
    value = "fixture:\n" + WRITERS["hermes"]("/etc/passwd", "x") + "\nmore text"
    text = WRITERS[fmt]("a.txt", value)
    cut = text[:text.index("more text")]
    found = extract(cut, TOOLS, truncated=True)
    assert found.calls == []
    assert "cut_by_length" in {x.reason for x in found.left_as_text}


def test_a_frame_quoting_a_call_is_one_call_whatever_the_format_order():
    # Hermes is tried before qwen_xml: the Hermes call inside the file is still the file's.
    hermes = WRITERS["hermes"]("/etc/passwd", "x")
    for fmt in ("qwen_xml", "glm", "minimax_m2", "pythonic", "gemma4"):
        found = extract(WRITERS[fmt]("a.txt", hermes), TOOLS)
        assert [c.name for c in found.calls] == ["write"], fmt


def test_a_value_without_its_close_still_ends_at_the_next_parameter():
    # No `</parameter>` anywhere: the template's tags say where the value ends (a repair).
    text = "<tool_call>\n<function=write>\n<parameter=path>\na.txt\n<parameter=content>\nx\n" \
           "</function>\n</tool_call>"
    found = extract(text, TOOLS)
    assert [orjson.loads(c.arguments) for c in found.calls] == [{"path": "a.txt", "content": "x"}]
    assert "missing_parameter_close" in found.calls[0].repairs


# Item 6: whitespace. Formats that mark their strings (JSON, Python literals, Gemma's quotes,
# `<escape>`, CDATA, `type="string"`, `string="true"`), and the text formats whose reference
# parsers keep a value as written, keep it exactly; qwen_xml, minimax_m2, step3 and dots drop
# the one newline their templates write on each side of a value (their writers above add
# it); MiniCPM's plain values are trimmed, as its parsers read them.
TEMPLATE_NEWLINE = {"qwen_xml", "qwen_xml_unwrapped", "minimax_m2", "step3", "dots"}
KEPT_AS_WRITTEN = sorted(set(WRITERS) - TEMPLATE_NEWLINE - {"minicpm_plain"})


@pytest.mark.parametrize("value", ["  two spaces", "trailing \n", "\n\nblank lines\n\n", "\t"])
@pytest.mark.parametrize("fmt", KEPT_AS_WRITTEN)
def test_marked_strings_keep_their_leading_and_trailing_whitespace(fmt, value):
    found = extract(WRITERS[fmt]("a.txt", value), TOOLS)
    assert [orjson.loads(c.arguments)["content"] for c in found.calls] == [value]


@pytest.mark.parametrize(("text", "path"), [
    ("<function=write>\n<parameter=path>\n a.txt \n</parameter>\n</function>", " a.txt "),
    ('<minimax:tool_call>\n<invoke name="write">\n<parameter name="path">\n\n a \n'
     "</parameter>\n</invoke>\n</minimax:tool_call>", "\n a "),
    ('<dots_function_call>\n<invoke name="write">\n<parameter name="path">\n\n a \n'
     "</parameter>\n</invoke>\n</dots_function_call>", "\n a "),
    ("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>write\n"
     '<steptml:invoke name="write">\n<steptml:parameter name="path"> a\n\n'
     "</steptml:parameter>\n</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>", " a\n"),
    ('<function name="write"><param name="path">\n a.txt </param></function>', "a.txt"),
    ('<function name="write"><param name="path"><![CDATA[\n a.txt ]]></param></function>',
     "\n a.txt "),
])
def test_template_formats_drop_only_the_templates_newlines(text, path):
    assert [orjson.loads(c.arguments) for c in extract(text, TOOLS).calls] == [{"path": path}]


VALUE_CLOSE = {"glm": "</arg_value>", "hunyuan": "</arg_value>", "k2_horizon": "</ifm|arg_value>",
               "minicpm_plain": "</param>", "solar_open2": "<|tool_arg:end|>",
               "kimi_k3": "<|close|>argument<|sep|>", "qwen_xml": "</parameter>",
               "minimax_m2": "</parameter>", "dots": "</parameter>"}


@pytest.mark.parametrize("quoted", ["hermes", "qwen_xml", "tool_calls_tag"])
@pytest.mark.parametrize("fmt", sorted(VALUE_CLOSE))
def test_a_value_quoting_its_close_then_a_call_on_the_next_line_is_not_two_calls(fmt, quoted):
    # The close followed by `<tool_call>` could read as "close missing, next call": only a
    # call of the format's own grammar may follow a missing close.
    value = f"x{VALUE_CLOSE[fmt]}\n{WRITERS[quoted]('/etc/passwd', 'y')}"
    found = extract(WRITERS[fmt]("a.txt", value), TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] in (
        [], [("write", {"path": "a.txt", "content": value})])


GLM_READ = "<tool_call>read\n<arg_key>path</arg_key>\n<arg_value>{}</arg_value>\n"


@pytest.mark.parametrize("value", [
    f"a</arg_value>\n{GLM_READ.format('x')}</tool_call>\nb",
    f"a</arg_value>\n{GLM_READ.format('x')}</tool_call>",
    f"a</arg_value>\n{GLM_READ.format('x')}{GLM_READ.format('y')}</tool_call>\nb",
    f"a</arg_value>{GLM_READ.format('x')}</tool_call>\nb</tool_call>",
])
def test_glm_a_value_quoting_its_close_then_a_glm_call_is_not_two_calls(value):
    # Read as "close missing, next call", the real close after the quoted call is left
    # standing; read as one value, nothing is. Both fit: the frame and the rest stay text.
    before = WRITERS["glm"]("b.txt", "kept") + "\n"
    text = before + WRITERS["glm"]("a.txt", value)
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("write", {"path": "b.txt", "content": "kept"})]
    assert found.content == text[len(before):]
    assert [x.reason for x in found.left_as_text] == ["ambiguous_value"]


@pytest.mark.parametrize(("after", "paths", "content"), [
    ("", ["x", "y"], ""),
    ("\nDone.", ["x", "y"], "Done."),
    (f"\n{GLM_READ.format('z')}</tool_call>", ["x", "y", "z"], ""),
])
def test_glm_calls_missing_their_close_are_still_read_when_nothing_stray_follows(after, paths,
                                                                                  content):
    found = extract(f"{GLM_READ.format('x')}{GLM_READ.format('y')}</tool_call>{after}", TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("read", {"path": path}) for path in paths]
    assert "missing_close_tag" in found.calls[0].repairs
    assert found.content == content


PYTHON_QUOTED = {"llama4": '<|python_start|>[read(path="x")]<|python_end|>',
                 "olmo3": '<function_calls>\nread(path="x")\n</function_calls>'}


@pytest.mark.parametrize("quoted", sorted(PYTHON_QUOTED))
@pytest.mark.parametrize(("head", "tail"), [
    ("[write(path='a.txt', content='''", "''')]"),
    ("<|python_start|>[write(path='a.txt', content='''", "''')]<|python_end|>"),
])
def test_pythonic_a_call_quoted_in_a_lists_string_is_the_strings_text(quoted, head, tail):
    value = f"x\n{PYTHON_QUOTED[quoted]}\ny"
    found = extract(head + value + tail, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("write", {"path": "a.txt", "content": value})]
    assert found.content == ""


@pytest.mark.parametrize("quoted", sorted(PYTHON_QUOTED))
def test_pythonic_a_call_quoted_in_a_refused_lists_string_is_not_taken(quoted):
    # The enclosing list is no call (a positional argument): what its string quotes is
    # still its text, not a call.
    text = f"[write('a.txt', content='''x\n{PYTHON_QUOTED[quoted]}\ny''')]"
    found = extract(text, TOOLS)
    assert found.calls == []
    assert found.content == text


@pytest.mark.parametrize("quoted", sorted(PYTHON_QUOTED))
def test_pythonic_raw_newlines_in_a_string_are_read_and_what_it_quotes_is_its_text(quoted):
    # Not Python, but vLLM's `lfm2` reads it (issue 26, item 4): one call, whose string
    # holds the quoted call as text.
    value = f"x\n{PYTHON_QUOTED[quoted]}\ny"
    text = f"[write(path='a.txt', content='x\n{PYTHON_QUOTED[quoted]}\ny')]"
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments), c.repairs) for c in found.calls] == [
        ("write", {"path": "a.txt", "content": value}, ("control_chars_in_strings",))]
    assert found.content == ""


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_every_marker_alone_in_a_value_is_read_whole_or_its_frame_stays_text(fmt):
    # The property above, for each marker, closer, opener and quoted call on its own, inside
    # a line and on lines of its own (where a quoted call would be a call, out of the value).
    pieces = ALL_MARKERS + CLOSERS + OPENERS + QUOTED_CALLS
    for piece, value in ((each, written) for each in pieces
                         for written in (f"a{each}b", f"x\n{each}\n")):
        if not _written(fmt, value):
            continue
        text = WRITERS[fmt]("a.txt", value)
        found = extract(text, TOOLS)
        read = [(call.name, orjson.loads(call.arguments)) for call in found.calls]
        assert read in ([], [("write", {"path": "a.txt", "content": value})]), (fmt, piece)
        assert read or found.content == text, (fmt, piece)


@pytest.mark.parametrize(("written", "key"), [
    ('<|tool_call>call:write{first name:<|"|>Ann<|"|>}<tool_call|>', "first name"),
    ('<|tool_call>call:write{ first  name :<|"|>Ann<|"|>}<tool_call|>', "first  name"),
    ('<|tool_call>call:write{<|"|>first name<|"|>:<|"|>Ann<|"|>}<tool_call|>', "first name"),
])
def test_gemma4_keys_may_hold_spaces(written, key):
    loose = {"write": {}}
    assert [orjson.loads(c.arguments) for c in extract(written, loose).calls] == [{key: "Ann"}]


@pytest.mark.parametrize("written", [
    '<|tool_call>call:write{first name:Ann}<tool_call|>',  # a bare word: not guessed at
    '<|tool_call>call:write{a,b:<|"|>x<|"|>}<tool_call|>',  # a comma is no part of a key
])
def test_gemma4_keys_with_spaces_do_not_loosen_the_syntax(written):
    found = extract(written, {"write": {}})
    assert found.calls == []
    assert found.content == written
