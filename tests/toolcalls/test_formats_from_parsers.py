"""The formats of this year's model families: what each reads (positive) and what it must
leave as text (negative), through the public `extract()`.

The shapes are the reference parsers' own test outputs (vLLM's tests/tool_parsers, SGLang's
function_call detectors, llama.cpp's chat parsers); each case names the format it exercises.
Every case of the positive list is a single call, several calls, nested arguments, or a call
with prose around it; every negative one a mention in prose, inline code, a tool the request
does not offer, a frame cut by length, or a fenced example.
"""

from __future__ import annotations

import re

import orjson
import pytest

from proxy.toolcalls import extract
from proxy.toolcalls.registry import MARKERS

TOOLS = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "days": {"type": "integer"}}},
    "read": {"type": "object", "properties": {"path": {"type": "string"}}},
    "search": {"type": "object", "properties": {
        "filters": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "max": {"type": "integer"}}},
        "tags": {"type": "array", "items": {"type": "string"}}}},
}
PARIS = {"city": "Paris"}
READ_A = {"path": "/a"}
NESTED = {"filters": {"city": "Tokyo", "max": 3}, "tags": ["rain", "wind"]}
NESTED_JSON = '{"filters": {"city": "Tokyo", "max": 3}, "tags": ["rain", "wind"]}'

D = "｜DSML｜"
NS = "]<]minimax[>["
K3_OPEN, K3_CLOSE = "<|open|>tools<|sep|>", "<|close|>tools<|sep|>"


def k3_call(name: str, *args: tuple[str, str, str], index: int = 1) -> str:
    body = "".join(f'<|open|>argument key="{key}" type="{kind}"<|sep|>{value}'
                   "<|close|>argument<|sep|>" for key, value, kind in args)
    return f'<|open|>call tool="{name}" index="{index}"<|sep|>{body}<|close|>call<|sep|>'


def dsml(name: str, *params: tuple[str, str, bool], space: str = "") -> str:
    body = "".join(f'<{D}{space}parameter name="{key}" string="{str(is_text).lower()}">{value}'
                   f"</{D}{space}parameter>\n" for key, value, is_text in params)
    return f'<{D}{space}invoke name="{name}">\n{body}</{D}{space}invoke>\n'


def hy_calls(*calls: tuple[str, ...], suffix: str = "") -> str:
    """Hunyuan 3's section of calls: (name, key, value, key, value, …) each."""
    def tag(name: str, body: str) -> str:
        return f"<{name}{suffix}>{body}</{name}{suffix}>"
    body = "".join(f"<tool_call{suffix}>{name}<tool_sep{suffix}>\n" + "".join(
        tag("arg_key", key) + "\n" + tag("arg_value", value) + "\n"
        for key, value in zip(pairs[::2], pairs[1::2], strict=True)) + f"</tool_call{suffix}>\n"
        for name, *pairs in calls)
    return f"<tool_calls{suffix}>\n{body}</tool_calls{suffix}>"


POSITIVE = [
    # DeepSeek V4 (vLLM test_deepseekv4_tool_parser: test_extract_tool_calls)
    ("deepseek_dsml", f"Let me check. <{D}tool_calls>\n"
     + dsml("get_weather", ("city", "Beijing", True)) + f"</{D}tool_calls>",
     [("get_weather", {"city": "Beijing"})], "Let me check. "),  # as vLLM's test asserts it
    # DeepSeek V4.1 (vLLM's deepseek_v41 adapter test: parallel calls, typed parameters)
    ("deepseek_dsml", f"Checking.\n\n<{D} calls>\n"
     + dsml("get_weather", ("city", "杭州", True), ("days", "42", False), space=" ")
     + dsml("read", ("path", "/a", True), space=" ") + f"</{D} calls>",
     [("get_weather", {"city": "杭州", "days": 42}), ("read", READ_A)], "Checking."),
    # V4.1 with the wrapper's space dropped, and a JSON body (SGLang's V4.1 structural tag)
    ("deepseek_dsml", f'<{D}calls>\n<{D} invoke name="search">{NESTED_JSON}</{D} invoke>\n'
     f"</{D} calls>", [("search", NESTED)], ""),
    # Kimi K3 (the engines' XTML samples; SGLang's detector test with a JSON block)
    ("kimi_k3", "<|open|>response<|sep|><|close|>response<|sep|>" + K3_OPEN
     + k3_call("get_weather", ("city", "Paris", "string")) + K3_CLOSE
     + "<|close|>message<|sep|>", [("get_weather", PARIS)], ""),
    ("kimi_k3", "The answer<|close|>response<|sep|>" + K3_OPEN
     + f'<|open|>call tool="search" index="1"<|sep|><|open|>json type="object"<|sep|>'
       f"{NESTED_JSON}<|close|>json<|sep|><|close|>call<|sep|>"
     + k3_call("get_weather", ("city", "Paris", "string"), ("days", "3", "number"), index=2)
     + K3_CLOSE, [("search", NESTED), ("get_weather", {"city": "Paris", "days": 3})],
     "The answer"),
    ("kimi_k3", K3_OPEN + k3_call("search", ("filters", '{"city": "Tokyo", "max": 3}', "object"),
                                   ("tags", '["rain", "wind"]', "array")) + K3_CLOSE,
     [("search", NESTED)], ""),
    # LFM2 (vLLM test_lfm2_tool_parser; SGLang's JSON variant; llama.cpp's LFM2 JSON tools)
    ("lfm2", '<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>'
     "The weather in Paris is sunny.", [("get_weather", PARIS)],
     "The weather in Paris is sunny."),
    ("lfm2", 'Let me look.<|tool_call_start|>[get_weather(city="Paris", days=3), '
     'read(path="/a")]<|tool_call_end|>',
     [("get_weather", {"city": "Paris", "days": 3}), ("read", READ_A)], "Let me look."),
    ("lfm2", '<|tool_call_start|>[{"name": "search", "arguments": ' + NESTED_JSON
     + "}]<|tool_call_end|>", [("search", NESTED)], ""),
    # GigaChat 3 and 3.1 (vLLM test_gigachat3_tool_parser), 3.5 GCML (test_gigachat35)
    ("gigachat", "I'll check that for you.<|message_sep|>\n\nfunction call<|role_sep|>\n"
     '{"name": "get_weather", "arguments": {"city": "Paris"}}</s>',
     [("get_weather", PARIS)], "I'll check that for you."),
    ("gigachat", '<|function_call|>{"name": "search", "arguments": ' + NESTED_JSON + "}",
     [("search", NESTED)], ""),
    ("gigachat", "I will check.<｜GCML｜tool_calls>"
     '<｜GCML｜invoke name="get_weather"><｜GCML｜parameter name="city" string="true">Paris'
     "</｜GCML｜parameter></｜GCML｜invoke>"
     '<｜GCML｜invoke name="read"><｜GCML｜parameter name="path" string="true">/a'
     "</｜GCML｜parameter></｜GCML｜invoke></｜GCML｜tool_calls>",
     [("get_weather", PARIS), ("read", READ_A)], "I will check."),
    # Cohere Command A / R7B (vLLM test_cohere_command_tool_parser), Command R+ (its template)
    ("command_r", "<|START_ACTION|>\n[\n    {\"tool_call_id\": \"0\", \"tool_name\": "
     "\"get_weather\", \"parameters\": {\"city\": \"Paris\"}},\n    {\"tool_call_id\": \"1\", "
     "\"tool_name\": \"read\", \"parameters\": {\"path\": \"/a\"}}\n]\n<|END_ACTION|>",
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("command_r", 'I will search.\nAction: ```json\n[\n    {\n        "tool_name": "search",\n'
     '        "parameters": ' + NESTED_JSON + "\n    }\n]\n```",
     [("search", NESTED)], "I will search."),
    # MiniMax-M3 (vLLM test_minimax_m3_tool_parser: nested, multiple calls)
    ("minimax_m3", f"I will search.\n{NS}<tool_call>\n"
     f'{NS}<invoke name="search">{NS}<filters>{NS}<city>Tokyo{NS}</city>{NS}<max>3{NS}</max>'
     f"{NS}</filters>{NS}<tags>{NS}<item>rain{NS}</item>{NS}<item>wind{NS}</item>{NS}</tags>"
     f"{NS}</invoke>\n{NS}</tool_call>", [("search", NESTED)], "I will search."),
    ("minimax_m3", f'{NS}<tool_call>\n{NS}<invoke name="get_weather">{NS}<city>Paris{NS}</city>'
     f'{NS}<days>3{NS}</days>{NS}</invoke>\n{NS}<invoke name="read">{NS}<path>/a{NS}</path>'
     f"{NS}</invoke>\n{NS}</tool_call>",
     [("get_weather", {"city": "Paris", "days": 3}), ("read", READ_A)], ""),
    # MiniCPM 5 (vLLM test_minicpm5xml_tool_parser)
    ("minicpm", 'Head\n<function name="get_weather"><param name="city">北京</param>'
     '<param name="days">3</param></function>\nTXT\n<function name="read">'
     '<param name="path"><![CDATA[/a]]></param></function>\nTail',
     [("get_weather", {"city": "北京", "days": 3}), ("read", READ_A)], "Head\nTXT\nTail"),
    ("minicpm", '<function\u0120name="search"><param\u0120name="filters">'
     '{"city": "Tokyo", "max": 3}</param><paramname="tags">["rain", "wind"]</param>'
     "</function>", [("search", NESTED)], ""),
    # Nemotron (vLLM test_nemotron_json_tool_parser, llama.cpp's Nemotron V2)
    ("tool_calls_tag", 'Let me check that.<TOOLCALL>[{"name": "get_weather", "arguments": '
     '{"city": "Paris"}}, {"name": "read", "arguments": {"path": "/a"}}]</TOOLCALL>',
     [("get_weather", PARIS), ("read", READ_A)], "Let me check that."),
    ("tool_calls_tag", '<TOOLCALL>{"name": "search", "arguments": ' + NESTED_JSON + "}</TOOLCALL>",
     [("search", NESTED)], ""),
    # Hunyuan 3 (vLLM test_hy_v3_tool_parser), with the shipping tokenizer's suffixed tags
    ("hunyuan", "Checking." + hy_calls(("get_weather", "city", "Paris"), ("read", "path", "/a")),
     [("get_weather", PARIS), ("read", READ_A)], "Checking."),
    ("hunyuan", hy_calls(("search", "filters", '{"city": "Tokyo", "max": 3}', "tags",
                          '["rain", "wind"]'), suffix=":opensource"), [("search", NESTED)], ""),
    # Solar Open (llama.cpp) and Solar Open 2 (vLLM test_solar_open2_tool_parser)
    ("solar_open", '<|tool_calls|><|tool_call:begin|>0<|tool_call:name|>search'
     "<|tool_call:args|>" + NESTED_JSON + "<|tool_call:end|><|calls|>", [("search", NESTED)],
     ""),
    ("solar_open", "I'll check both.<|tool_call:start|>get_weather\n<|tool_arg:start|>city"
     "<|tool_arg:value|>Paris<|tool_arg:end|>\n<|tool_arg:start|>days<|tool_arg:value|>3"
     "<|tool_arg:end|>\n<|tool_call:end|>\n<|tool_call:start|>read\n<|tool_arg:start|>path"
     "<|tool_arg:value|>/a<|tool_arg:end|>\n<|tool_call:end|>",
     [("get_weather", {"city": "Paris", "days": 3}), ("read", READ_A)], "I'll check both."),
    # K2 Horizon (SGLang's k2_horizon detector): key/value with an inline type, and JSON
    ("k2_horizon", "<ifm|tool_calls>\n<ifm|tool_call>get_weather\n<ifm|arg_key>city"
     "</ifm|arg_key><ifm|arg_type>string</ifm|arg_type><ifm|arg_value>Paris</ifm|arg_value>\n"
     "</ifm|tool_call>\n<ifm|tool_call>read<ifm|arg_key>path</ifm|arg_key><ifm|arg_value>/a"
     "</ifm|arg_value></ifm|tool_call>\n</ifm|tool_calls>",
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("k2_horizon", 'Searching.\n<ifm|tool_call>{"name": "search", "arguments": '
     + NESTED_JSON + "}</ifm|tool_call>", [("search", NESTED)], "Searching."),
    # dots (SGLang's dots detector: XML invokes, and its JSON fallback)
    ("dots", 'On it.\n<dots_function_call>\n<invoke name="get_weather">\n'
     '<parameter name="city">Paris</parameter>\n</invoke>\n<invoke name="read">\n'
     '<parameter name="path">/a</parameter>\n</invoke>\n</dots_function_call>',
     [("get_weather", PARIS), ("read", READ_A)], "On it."),
    ("dots", '<dots_function_call>{"name": "search", "arguments": ' + NESTED_JSON
     + "}</dots_function_call>", [("search", NESTED)], ""),
    # Muse Glimmer (SGLang's muse detector)
    ("muse", ' to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">'
     '\n<atem:parameter name="city">Paris</atem:parameter>\n</atem:invoke>\n'
     "</atem:function_calls><|eom|>", [("get_weather", PARIS)], ""),
    ("muse", 'Searching.<|start|>assistant to=search<|message|><atem:function_calls>\n'
     '<atem:invoke name="search">\n<atem:parameter name="filters">{"city": "Tokyo", "max": 3}'
     '</atem:parameter>\n<atem:parameter name="tags">["rain", "wind"]</atem:parameter>\n'
     "</atem:invoke>\n</atem:function_calls><|eom|>", [("search", NESTED)], "Searching."),
    # Inkling (SGLang's inkling detector)
    ("inkling", 'Sure.<|message_model|>get_weather<|content_invoke_tool_json|>'
     '{"name":"get_weather","args":{"city":"Paris"}}<|end_message|>',
     [("get_weather", PARIS)], "Sure."),
    ("inkling", '<|message_model|>search<|content_invoke_tool_json|>{"name": "search", '
     '"args": ' + NESTED_JSON + "}<|end_message|>", [("search", NESTED)], ""),
    # FunctionGemma (vLLM test_functiongemma_tool_parser)
    ("functiongemma", "Let me check the weather for you. <start_function_call>call:get_weather"
     "{city:<escape>Paris<escape>,days:<escape>3<escape>}<end_function_call>"
     "<start_function_call>call:read{path:<escape>/a<escape>}<end_function_call>",
     [("get_weather", {"city": "Paris", "days": 3}), ("read", READ_A)],
     "Let me check the weather for you."),
    ("functiongemma", "<start_function_call>call:search{filters:<escape>"
     '{"city": "Tokyo", "max": 3}<escape>tags:<escape>["rain", "wind"]<escape>}'
     "<end_function_call>", [("search", NESTED)], ""),
    # xLAM's native envelope, llama.cpp's Generic format
    ("bare_json", '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, '
     '{"name": "search", "arguments": ' + NESTED_JSON + "}]}",
     [("get_weather", PARIS), ("search", NESTED)], ""),
    ("bare_json", '{"tool_call": {"name": "read", "arguments": {"path": "/a"}}}',
     [("read", READ_A)], ""),
]


NEGATIVE = [
    # prose mentions (vLLM's deepseek_v41 prose fixtures)
    ("deepseek_dsml", f"The V4.1 spelling is <{D} calls>, not <{D}tool_calls>."),
    ("deepseek_dsml", f'An example is <{D} invoke name="get_weather"> in prose.'),
    ("deepseek_dsml", f"<{D}tool_calls>\n" + dsml("delete_all", ("path", "/", True))
     + f"</{D}tool_calls>"),
    ("deepseek_dsml", f'<{D} calls>\n<{D} invoke name="read">\n<{D} parameter name="path" '
     'string="true">/a'),
    ("deepseek_dsml", f'<{D} calls>\n<{D} invoke name="read">{{"path": "/a"'),
    ("kimi_k3", 'K3 writes <|open|>call tool="read" index="1"<|sep|> inside a tools section.'),
    ("kimi_k3", "Write `" + K3_OPEN + k3_call("read", ("path", "/a", "string")) + K3_CLOSE
     + "` to call it."),
    ("kimi_k3", K3_OPEN + k3_call("delete_all", ("path", "/", "string")) + K3_CLOSE),
    ("kimi_k3", K3_OPEN + '<|open|>call tool="read" index="1"<|sep|><|open|>argument '
     'key="path" type="string"<|sep|>/a'),
    ("lfm2", "LFM2 opens a call with <|tool_call_start|> and a list."),
    ("lfm2", 'Write `<|tool_call_start|>[read(path="/a")]<|tool_call_end|>` for a call.'),
    ("lfm2", '<|tool_call_start|>[delete_all(path="/")]<|tool_call_end|>'),
    ("lfm2", '<|tool_call_start|>[get_weather(city="Pa'),
    ("lfm2", '<|tool_call_start|>[get_weather(city=open("/etc/passwd").read())]'
     "<|tool_call_end|>"),
    ("gigachat", "GigaChat names the role function call<|role_sep|> before its JSON."),
    ("gigachat", '<|function_call|>{"name": "delete_all", "arguments": {}}'),
    ("gigachat", '<|function_call|>{"name": "read", "arguments": {"path": "/a'),
    ("gigachat", 'Use `<|function_call|>{"name": "read", "arguments": {}}` to call it.'),
    ("command_r", "The model writes Action: ```json when it calls a tool."),
    ("command_r", 'Note the Action: ```json\n[{"tool_name": "read", "parameters": {}}]\n```\n'
     "block is only an illustration."),
    ("command_r", '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "delete_all", '
     '"parameters": {}}]<|END_ACTION|>'),
    ("command_r", '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "read", "parameters": '
     '{"path": "/a"'),
    ("command_r", 'Thought: I need the file.\nAction: ```json\n{"action": "read", '
     '"action_input": "/a"}\n```'),
    ("minimax_m3", f"plain {NS}<tool_ca"),
    ("minimax_m3", f'MiniMax-M3 writes {NS}<invoke name="read"> inside a tool_call block.'),
    ("minimax_m3", f'{NS}<tool_call>\n{NS}<invoke name="delete_all">{NS}<path>/{NS}</path>'
     f"{NS}</invoke>\n{NS}</tool_call>"),
    ("minimax_m3", f'{NS}<tool_call>\n{NS}<invoke name="read">{NS}<path>/a{NS}</invoke>\n'
     f"{NS}</tool_call>"),
    ("minimax_m3", f'{NS}<tool_call>\n{NS}<invoke name="read">{NS}<path>/a'),
    ("minimax_m3", f'{NS}<tool_call>\n{NS}<invoke name="search">{NS}<filters>x]<]minimax[>'
     f"</filters>{NS}<tags>{NS}</tags>{NS}</invoke>\n{NS}</tool_call>"),
    ("minicpm", 'Use <function name="read"> with a path parameter.'),
    ("minicpm", 'Write `<function name="read"><param name="path">/a</param></function>`.'),
    ("minicpm", '<function name="unknown"><param name="x">1</param></function>\n'),
    ("minicpm", '<function name="get_weather"><param name="city">北京</param>'),
    ("minicpm", '<function name="get_weather"><param name="city">北京</param>'
     '<param name="city">上海</param></function>\n'),
    ("minicpm", '<function name="get_weather"><param>北京</param></function>'),
    ("tool_calls_tag", "Nemotron wraps calls in <TOOLCALL> tags."),
    ("tool_calls_tag", '<TOOLCALL>[{"name": "broken", "arguments": {}</TOOLCALL>'),
    ("tool_calls_tag", '<TOOLCALL>[{"name": "delete_all", "arguments": {}}]</TOOLCALL>'),
    ("tool_calls_tag", 'For example:\n```\n<TOOLCALL>[{"name": "read", "arguments": '
     '{"path": "/a"}}]</TOOLCALL>\n```\nThat is the shape.'),
    ("hunyuan", "Hunyuan writes <tool_call>NAME<tool_sep> then its arguments."),
    ("hunyuan", "<tool_calls>\n<tool_call>delete_all<tool_sep>\n</tool_call>\n</tool_calls>"),
    ("hunyuan", "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
     "<arg_value>Bei"),
    ("solar_open", "Solar opens a call with <|tool_call:begin|> and an id."),
    ("solar_open", "Let me check.<|tool_call:start|>read\n<|tool_arg:start|>path"
     "<|tool_arg:value|>/a"),
    ("solar_open", "<|tool_call:start|>delete_all\n<|tool_call:end|>"),
    ("k2_horizon", "K2 Horizon writes <ifm|tool_call> before each call."),
    ("k2_horizon", "<ifm|tool_call>delete_all<ifm|arg_key>x</ifm|arg_key><ifm|arg_value>1"
     "</ifm|arg_value></ifm|tool_call>"),
    ("k2_horizon", '<ifm|tool_call>{"name": "read", "arguments": {"path": "/a"'),
    ("dots", 'Write <invoke name="read"> inside <dots_function_call> tags.'),
    ("dots", '<dots_function_call>\n<invoke name="delete_all">\n</invoke>\n'
     "</dots_function_call>"),
    ("muse", 'Muse writes <atem:invoke name="read"> in a function_calls block.'),
    ("muse", '<atem:function_calls>\n<atem:invoke name="read">\n<atem:parameter name="path">'
     "/a"),
    ("inkling", "Inkling marks a tool call with <|content_invoke_tool_json|> first."),
    ("inkling", '<|message_model|>read<|content_invoke_tool_json|>{"name": "get_weather", '
     '"args": {"city": "Paris"}}<|end_message|>'),
    ("inkling", '<|content_invoke_tool_json|>{"name": "delete_all", "args": {}}'
     "<|end_message|>"),
    ("functiongemma", "FunctionGemma starts a call with <start_function_call> tokens."),
    ("functiongemma", "<start_function_call>call:delete_all{path:<escape>/<escape>}"
     "<end_function_call>"),
    ("functiongemma", "<start_function_call>call:read{path:<escape>/a"),
    ("bare_json", '{"tool_calls": [{"name": "delete_all", "arguments": {}}]}'),
    ("bare_json", 'The envelope is {"tool_calls": [{"name": "read", "arguments": {}}]} in JSON.'),
    ("bare_json", '{"response": "The weather is sunny."}'),
]


each_positive = pytest.mark.parametrize(
    ("fmt", "text", "expected", "content"), POSITIVE,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(POSITIVE)])


@each_positive
def test_format_reads_its_calls_among_all_and_alone(fmt, text, expected, content):
    for formats in (("auto",), (fmt,)):
        found = extract(text, TOOLS, formats=formats)
        assert [(c.name, orjson.loads(c.arguments), c.format) for c in found.calls] == [
            (name, arguments, fmt) for name, arguments in expected]
        assert found.content == content


@each_positive
def test_a_call_cut_by_length_stays_text(fmt, text, expected, content):
    """Cut anywhere inside its last frame, an output yields only whole calls, each as the
    uncut output has it (never one with a value cut short); cut before the middle of that
    frame, not its call."""
    whole = extract(text, TOOLS)
    calls = [(c.name, c.arguments) for c in whole.calls]
    last = whole.calls[-1]
    for cut in range(last.start + 1, last.end, max(1, (last.end - last.start) // 9)):
        found = [(c.name, c.arguments) for c in extract(text[:cut], TOOLS, truncated=True).calls]
        assert found == calls[:len(found)]
        if cut <= (last.start + last.end) // 2:
            assert len(found) < len(calls)


@pytest.mark.parametrize(("fmt", "text"), NEGATIVE,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(NEGATIVE)])
def test_format_leaves_non_calls_as_text(fmt, text):
    strict = extract(text, TOOLS, deliver_unknown=False)
    assert strict.calls == []
    assert strict.content == text
    found = extract(text, TOOLS)  # a call plainly made to a tool not offered: as written
    assert all(c.name not in TOOLS and "unknown_tool" in c.repairs for c in found.calls)
    assert found.calls or found.content == text


@pytest.mark.parametrize("fmt", sorted({case[0] for case in POSITIVE}))
def test_an_unknown_tool_in_the_format_stays_text(fmt):
    """The first positive case of each format, with its tools not offered: no call when the
    operator keeps that rule; by default, a frame with markers of its own is a call to the
    name as written (the agent answers "no such tool"), one recognised by shape is not."""
    text = next(case[1] for case in POSITIVE if case[0] == fmt)
    found = extract(text, {"other_tool": {}}, deliver_unknown=False)
    assert found.calls == []
    assert found.content == text
    found = extract(text, {"other_tool": {}})
    assert found.calls or found.content == text
    assert all(c.repairs[-1:] == ("unknown_tool",) for c in found.calls)
    assert bool(found.calls) == bool(MARKERS[fmt] and fmt != "functionary"), fmt


@pytest.mark.parametrize(("alias", "names"), [
    ("deepseek_v4", ["deepseek_dsml"]), ("deepseek_v41", ["deepseek_dsml"]),
    ("kimi_k3", ["kimi_k3"]), ("lfm2", ["lfm2"]), ("gigachat3", ["gigachat"]),
    ("gigachat35", ["gigachat"]), ("cohere_command3", ["command_r"]),
    ("cohere_command4", ["command_r"]), ("minimax_m3", ["minimax_m3"]),
    ("minicpm5", ["minicpm"]), ("ling3", ["glm"]), ("poolside_v1", ["glm"]),
    ("hy_v3", ["hunyuan"]), ("granite4", ["hermes"]), ("mimo", ["qwen_xml"]),
    ("step3p5", ["qwen_xml"]), ("solar_open2", ["solar_open"]), ("inkling", ["inkling"]),
    ("functiongemma", ["functiongemma"]), ("nemotron_json", ["tool_calls_tag"]),
    ("apriel", ["tool_calls_tag"]), ("gpt-oss", ["harmony"]), ("minimax-m3", ["minimax_m3"])])
def test_the_engines_parser_names_are_accepted(alias, names):
    from proxy.toolcalls import resolve

    assert [name for name, _ in resolve([alias])] == names


def test_ling_reuses_glm_and_apriel_the_tool_calls_tag():
    """Ling 3 writes GLM's tags (SGLang's Ling3Detector); Apriel 1.5 a JSON list in
    `<tool_calls>` (llama.cpp's Apriel 1.5 parser): aliases, read by those formats."""
    ling = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
    assert [(c.name, c.format) for c in extract(ling, TOOLS, formats=["ling3"]).calls] == [
        ("get_weather", "glm")]
    apriel = '<tool_calls>[{"name": "read", "arguments": {"path": "/a"}}]</tool_calls>'
    assert [(c.name, c.format) for c in extract(apriel, TOOLS, formats=["apriel"]).calls] == [
        ("read", "tool_calls_tag")]


def test_kimi_k3_string_arguments_stay_strings_and_attributes_are_unescaped():
    text = (K3_OPEN + '<|open|>call tool="get_weather" index="1"<|sep|><|open|>argument '
            'key="city" type="string"<|sep|>42<|close|>argument<|sep|><|close|>call<|sep|>'
            + K3_CLOSE)
    assert orjson.loads(extract(text, TOOLS).calls[0].arguments) == {"city": "42"}
    quoted = text.replace('tool="get_weather"', 'tool="get&quot;weather"')
    assert [c.name for c in extract(quoted, {'get"weather': {}}).calls] == ['get"weather']


def test_minimax_m3_leaves_are_coerced_by_the_nested_schema():
    text = (f'{NS}<tool_call>\n{NS}<invoke name="search">{NS}<filters>{NS}<max>007{NS}</max>'
            f"{NS}<city>3{NS}</city>{NS}</filters>{NS}</invoke>\n{NS}</tool_call>")
    arguments = orjson.loads(extract(text, TOOLS).calls[0].arguments)
    # the integer the schema asks for, as vLLM's minimax_m3 test reads `<zip>018956` (18956);
    # a string leaf stays the text written
    assert arguments == {"filters": {"max": 7, "city": "3"}}
    worded = text.replace("007", "seven")
    assert orjson.loads(extract(worded, TOOLS).calls[0].arguments) == {
        "filters": {"max": "seven", "city": "3"}}  # never a guessed number


def test_minimax_m3_tolerates_space_between_the_token_and_its_tag():
    text = (f'{NS}\n<tool_call>\n{NS} <invoke name="read">{NS}\n<path>/a{NS} </path>'
            f"{NS}</invoke>\n{NS}</tool_call>")
    assert [c.name for c in extract(text, TOOLS).calls] == ["read"]


def test_gigachat_takes_the_eos_and_message_separator_with_the_call():
    text = ('Ok.<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "read", "arguments": '
            '{"path": "/a"}}</s>')
    found = extract(text, TOOLS)
    assert found.content == "Ok."
    assert found.calls[0].end == len(text)


def test_command_r_leaves_out_a_non_action_item_and_keeps_the_actions():
    text = ('<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "read", "parameters": '
            '{"path": "/a"}}, {"tool_name": "directly_answer", "parameters": {}}]<|END_ACTION|>')
    found = extract(text, TOOLS)
    assert [c.name for c in found.calls] == ["read"]  # `directly_answer` is no tool's call
    assert [x.reason for x in found.left_as_text] == ["unrecognised_shape"]


def test_a_llama_built_in_tool_call_is_read_when_the_request_declares_the_tool():
    """llama.cpp's "Llama 3.x with built-in tools": `<|python_tag|>NAME.call(…)`."""
    tools = {"brave_search": {"type": "object", "properties": {"query": {"type": "string"}}}}
    text = 'Let me search.\n<|python_tag|>brave_search.call(query="weather in Paris")<|eom_id|>'
    found = extract(text, tools)
    assert [(c.name, orjson.loads(c.arguments), c.format) for c in found.calls] == [
        ("brave_search", {"query": "weather in Paris"}, "llama3")]
    assert found.content == "Let me search."
    for other in (text.replace("<|eom_id|>", " and then more"),  # not the end of the content
                  text.replace('"weather in Paris"', "QUERY")):  # not a literal
        assert extract(other, tools).calls == []
    assert extract(text, TOOLS).calls == []  # not declared: stays text


def test_the_docs_coverage_table_names_parsers_the_setting_accepts():
    """Each vLLM and SGLang parser name in docs/formats.md's coverage table resolves to the
    formats its row names; every format of ours has a row."""
    from proxy.toolcalls import FORMATS, resolve
    from tests.docs_pages import page, section, table

    coverage = section(page("formats.md"), "Coverage: vLLM, SGLang, llama.cpp")
    rows = [row for row in table(coverage, "| ours |") if row[0].startswith("`")]
    named = set()
    for ours, vllm, sglang, _ in rows:
        formats = [name.strip("` ") for name in ours.split(",")]
        named.update(formats)
        for parser in [n.strip(" `") for n in f"{vllm},{sglang}".split(",") if n.strip()]:
            assert [name for name, _ in resolve([parser])] == formats, parser
    assert named == set(FORMATS)


def k3_spaced(text: str) -> str:
    """`text` as vLLM's detokenizer writes it with `spaces_between_special_tokens` on: the
    special tokens and the runs of text between them joined by one space
    (`_convert_tokens_to_string_with_added_encoders`: `" ".join(sub_texts)`)."""
    pieces = [piece for piece in re.split(r"(<\|(?:open|close|sep)\|>)", text) if piece]
    return " ".join(pieces)


K3_WEATHER = (K3_OPEN + "\n" + k3_call("get_weather", ("city", "Paris", "string"),
                                       ("days", "3", "number")) + "\n" + K3_CLOSE)


def test_kimi_k3_spaced_tokens_are_read_as_vllm_reads_them():
    # vLLM's kimi_k3 parser takes `<|open|> tools <|sep|>` (its `\s*` inside the markers)
    spaced = k3_spaced("Checking.<|close|>response<|sep|>" + K3_WEATHER
                       + "<|close|>message<|sep|>")
    assert spaced.startswith("Checking. <|close|> response <|sep|> <|open|> tools <|sep|>")
    found = extract(spaced, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("get_weather", {"city": "Paris", "days": 3})]
    assert found.content.strip() == "Checking."


def test_kimi_k3_spaced_value_keeps_the_spaces_the_model_wrote():
    # the join adds exactly one space each side; a second is the model's own
    written = K3_OPEN + k3_call("read", ("path", " /a b ", "string")) + K3_CLOSE
    assert orjson.loads(extract(k3_spaced(written), TOOLS).calls[0].arguments) == {
        "path": " /a b "}
    # an argument whose tokens are spaced but whose value is not: the spaces are not
    # certainly the detokenizer's, so the value stays as written, as vLLM keeps it
    mixed = (K3_OPEN + '<|open|> argument key="path" type="string" <|sep|>/a <|close|> '
             "argument <|sep|>")
    mixed = (K3_OPEN + '<|open|> call tool="read" index="1" <|sep|>' + mixed[len(K3_OPEN):]
             + "<|close|> call <|sep|>" + K3_CLOSE)
    assert orjson.loads(extract(mixed, TOOLS).calls[0].arguments) == {"path": "/a "}


def test_kimi_k3_spaced_json_block_is_read():
    text = (K3_OPEN + '<|open|>call tool="search" index="1"<|sep|><|open|>json type="object"'
            "<|sep|>" + NESTED_JSON + "<|close|>json<|sep|><|close|>call<|sep|>" + K3_CLOSE)
    assert orjson.loads(extract(k3_spaced(text), TOOLS).calls[0].arguments) == NESTED


@pytest.mark.parametrize("text", [
    # the spaced frame's negative twins: a mention, an inline example, a fenced example,
    # a quoted frame, a spaced call outside any tools section
    k3_spaced('K3 writes <|open|>call tool="read" index="1"<|sep|> inside a tools section.'),
    "Write `" + k3_spaced(K3_WEATHER) + "` to call it.",
    "An example:\n```\n" + k3_spaced(K3_WEATHER) + "\n```\nThat is the shape.",
    '> The docs say: "' + k3_spaced(K3_WEATHER) + '"',
    k3_spaced(k3_call("read", ("path", "/a", "string"))),
])
def test_kimi_k3_spaced_mentions_stay_text(text):
    assert extract(text, TOOLS).calls == []
