"""Issue 26, items 3-6: the call shapes the engines' reference parsers read, read here too,
still with no value cut and nothing invented; each with what must stay text beside it.
The cases are taken from vLLM's parser tests (tests/tool_parsers/) where it has them."""

from __future__ import annotations

import orjson
import pytest

from proxy.toolcalls import extract
from proxy.turn.normalize import ExtractionSettings, normalize
from tests.fake_vllm import vllm_completion

STRING = {"type": "string"}
TOOLS = {
    "get_weather": {"type": "object", "properties": {"city": STRING, "days": {"type": "integer"}}},
    "read": {"type": "object", "properties": {"path": STRING}},
    "get_time": {"type": "object", "properties": {"zone": STRING}},
    "write": {"type": "object", "properties": {"path": STRING, "content": STRING},
              "required": ["path"]},
}
LOOSE = {name: {} for name in ("label", "set_date", "bash", "exec", "get_weather")}


def calls(text: str, tools=TOOLS, **kwargs) -> list[tuple[str, dict]]:
    return [(c.name, orjson.loads(c.arguments)) for c in extract(text, tools, **kwargs).calls]


def stays_text(text: str, tools=TOOLS, **kwargs) -> set[str]:
    found = extract(text, tools, **kwargs)
    assert found.calls == []
    assert found.content == text
    return {left.reason for left in found.left_as_text}


# --- Gemma 4: a call right after prose on its line ---------------------------------------------

GEMMA = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'


@pytest.mark.parametrize("prose", ["Let me check the weather.", "let me check the weather",
                                   "先查天气。", "Sure! Let me look that up: "])
def test_gemma4_a_call_right_after_prose_on_its_line_is_read(prose):
    found = extract(prose + GEMMA, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("get_weather", {"city": "Paris"})]
    assert found.content == prose.strip()


@pytest.mark.parametrize("text", [f"Earlier I called {GEMMA} and it said 21°C.",
                                  f"Sure, checking {GEMMA} now.", f"Write `{GEMMA}` to call it."])
def test_gemma4_a_call_inside_a_sentence_stays_text(text):
    assert stays_text(text) <= {"inline_mention", "inline_code"}  # (or passed over)


# --- complete calls before a parallel call cut by `length` --------------------------------------

A = '{"name": "read", "arguments": {"path": "/a"}}'
B = '{"name": "read", "arguments": {"path": "/b and mo'
CUT_PARALLEL = {
    "mistral": f"[TOOL_CALLS][{A}, {B}",
    "tool_calls_tag": f"<tool_calls>[{A}, {B}",
    "hermes_lines": f"<tool_call>\n{A}\n{B}",
    "hermes_list": f"<tool_call>[{A}, {B}",
    "granite": f"<|tool_call|>[{A}, {B}",
    "phi4_mini": f"functools[{A}, {B}",
    "lfm2_json": f"<|tool_call_start|>[{A}, {B}",
    "lfm2": "<|tool_call_start|>[read(path='/a'), read(path='/b and mo",
    "llama4": "<|python_start|>[read(path='/a'), read(path='/b and mo",
    "apertus": '<|tools_prefix|>[{"read": {"path": "/a"}}, {"read": {"path": "/b and mo',
    "command_r": '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "read", "parameters": '
                 '{"path": "/a"}}, {"tool_call_id": "1", "tool_name": "read", "parameters": '
                 '{"path": "/b and mo',
    "llama3": '<|python_tag|>{"name": "read", "parameters": {"path": "/a"}}; '
              '{"name": "read", "parameters": {"path": "/b and mo',
    "gemma4": '<|tool_call>call:read{path:<|"|>/a<|"|>}<tool_call|>'
              '<|tool_call>call:read{path:<|"|>/b and mo',
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.read:0"
               '<|tool_call_argument_begin|>{"path": "/a"}<|tool_call_end|><|tool_call_begin|>'
               'functions.read:1<|tool_call_argument_begin|>{"path": "/b and mo',
    "kimi_k3": '<|open|>tools<|sep|><|open|>call tool="read" index="1"<|sep|><|open|>argument '
               'key="path" type="string"<|sep|>/a<|close|>argument<|sep|><|close|>call<|sep|>'
               '<|open|>call tool="read" index="2"<|sep|><|open|>argument key="path" '
               'type="string"<|sep|>/b and mo',
    "llama3_function": '<function=read>{"path": "/a"}</function><function=read>{"path": "/b',
    "dsml": '<｜DSML｜function_calls>\n<｜DSML｜invoke name="read">\n<｜DSML｜parameter '
            'name="path" string="true">/a</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke '
            'name="read">\n<｜DSML｜parameter name="path" string="true">/b and mo',
    "qwen_xml": "<tool_call>\n<function=read>\n<parameter=path>\n/a\n</parameter>\n</function>\n"
                "</tool_call>\n<tool_call>\n<function=read>\n<parameter=path>\n/b and mo",
}


@pytest.mark.parametrize("fmt", sorted(CUT_PARALLEL))
def test_the_complete_calls_before_a_parallel_call_cut_by_length_are_read(fmt):
    text = "Reading both.\n" + CUT_PARALLEL[fmt]
    found = extract(text, TOOLS, truncated=True)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("read", {"path": "/a"})]
    # the cut call is left out, never half-read (Kimi K2's and DSML's text around their calls
    # as written)
    assert found.content == ("Reading both.\n" if fmt in {"kimi_k2", "dsml"} else "Reading both.")
    assert "cut_by_length" in {left.reason for left in found.left_as_text}


@pytest.mark.parametrize("fmt", sorted(CUT_PARALLEL))
def test_a_list_that_never_ends_without_length_stays_text(fmt):
    # Not cut by `length`: the output ended there on purpose, or is not a call at all.
    found = extract(CUT_PARALLEL[fmt], TOOLS)
    assert ("read", '{"path":"/b and mo"}') not in [(c.name, c.arguments) for c in found.calls]
    if fmt not in ("gemma4", "kimi_k2", "kimi_k3", "dsml", "qwen_xml", "llama3_function"):
        assert found.calls == []  # one list: all of it waits for its end


@pytest.mark.parametrize("text", [f"[{A}, {B}", f"{A}\n{B}", f"```json\n[{A}, {B}"])
def test_a_cut_list_recognised_by_shape_alone_stays_text(text):
    assert stays_text(text, truncated=True) <= {"cut_by_length"}


# --- GLM -----------------------------------------------------------------------------------

GLM_WEATHER = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"


@pytest.mark.parametrize(("after", "content"), [("Now I wait.", "Now I wait."),
                                                ("\nNow I wait.", "Now I wait."), ("", "")])
def test_glm_a_call_without_arguments_followed_by_text_is_read(after, content):
    found = extract("<tool_call>get_time</tool_call>" + after, TOOLS)
    assert [(c.name, c.arguments) for c in found.calls] == [("get_time", "{}")]
    assert found.content == content


@pytest.mark.parametrize("text", [GLM_WEATHER + "\n</tool_call>", GLM_WEATHER + "</tool_call>",
                                  GLM_WEATHER + "\n</tool_call>\n<tool_call>get_time</tool_call>"])
def test_glm_a_last_value_missing_its_close_before_the_calls_close_is_read(text):
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls][:1] == [
        ("get_weather", {"city": "Paris"})]
    assert found.calls[0].repairs == ("missing_value_close",)
    assert found.content == ""


@pytest.mark.parametrize("text", [
    GLM_WEATHER + "</tool_call> in the docs",  # more of the value, or prose: no sure end
    GLM_WEATHER + " and <tool_call>x</tool_call>\n</tool_call>",  # a close it may pair with
    GLM_WEATHER + "\n</tool_call>\n<tool_call>read\n<arg_key>path</arg_key>\n"
                  "<arg_value>/a</arg_value>\n</tool_call>",  # a close after: it may hold it
    GLM_WEATHER,  # never closed
])
def test_glm_a_value_missing_its_close_stays_text_where_its_end_is_unsure(text):
    stays_text(text)


def test_glm_a_value_missing_its_close_cut_by_length_stays_text():
    assert "cut_by_length" in stays_text(GLM_WEATHER + "\n</tool_call>", truncated=True)


# --- Qwen XML ------------------------------------------------------------------------------

QWEN = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n{}</function>\n</tool_call>"


def test_qwen_a_parameter_missing_its_close_before_the_functions_close_is_read():
    found = extract(QWEN.format(""), TOOLS)
    assert [(c.name, orjson.loads(c.arguments), c.repairs) for c in found.calls] == [
        ("get_weather", {"city": "Paris"}, ("missing_parameter_close",))]


@pytest.mark.parametrize("after", ["Done.", "\nI will wait for the result.", " Then I report."])
def test_qwen_text_right_after_the_calls_close_is_content(after):
    found = extract(QWEN.format("</parameter>\n") + after, TOOLS)
    assert [c.name for c in found.calls] == ["get_weather"]
    assert found.content == after.strip()


def test_qwen_a_frame_that_a_lower_case_sentence_goes_on_from_stays_text():
    assert stays_text(QWEN.format("</parameter>\n") + " is how a call looks.") == {
        "inline_mention"}


@pytest.mark.parametrize("value", ["Use <tool_call> to call.", "Close with </think> here.",
                                   "<tool_call>\n<function=read>\n</function>\n</tool_call>",
                                   "a </function> and </tool_call> in a file"])
def test_a_value_holding_its_frames_markers_is_read_whole(value):
    text = ("<tool_call>\n<function=write>\n<parameter=path>\na.md\n</parameter>\n"
            f"<parameter=content>\n{value}\n</parameter>\n</function>\n</tool_call>")
    assert calls(text) == [("write", {"path": "a.md", "content": value})]
    # Through the turn too: a `</think>` inside the value is not where thinking ends.
    for content in (text, "<think>plan</think>\n" + text):
        result = normalize(vllm_completion(content),
                                             ExtractionSettings(tools=TOOLS))
        message = result.first
        assert orjson.loads(message.calls[0].arguments)["content"] \
            == value
        assert message.content is None


def test_a_lone_think_close_before_a_call_still_ends_the_thinking():
    text = "I should read it.</think>\n<tool_call>\n<function=read>\n<parameter=path>\n/a\n" \
           "</parameter>\n</function>\n</tool_call>"
    result = normalize(vllm_completion(text), ExtractionSettings(tools=TOOLS))
    message = result.first
    assert message.calls[0].name == "read"
    # The text before the lone closer is the thinking (issue 26 item 1), the call the answer's.
    assert message.content is None
    assert message.reasoning == "I should read it."


# --- Seed-OSS and Qwen: only the template's newlines are not the value's --------------------

@pytest.mark.parametrize(("written", "value"), [
    ("<seed:tool_call>\n<function=write>\n<parameter=path>a.md</parameter>\n"
     "<parameter=content>line\n</parameter>\n</function>\n</seed:tool_call>", "line\n"),
    ("<seed:tool_call>\n<function=write>\n<parameter=path>a.md</parameter>\n"
     "<parameter=content>\nline</parameter>\n</function>\n</seed:tool_call>", "\nline"),
    ("<tool_call>\n<function=write>\n<parameter=path>\na.md\n</parameter>\n"
     "<parameter=content>\nline\n\n</parameter>\n</function>\n</tool_call>", "line\n"),
    ("<tool_call>\n<function=write>\n<parameter=path>\na.md\n</parameter>\n"
     "<parameter=content>\nline\n</parameter>\n</function>\n</tool_call>", "line"),
])
def test_values_keep_every_newline_the_template_did_not_write(written, value):
    assert calls(written) == [("write", {"path": "a.md", "content": value})]


# --- DeepSeek DSML self-closing invoke ----------------------------------------------------

@pytest.mark.parametrize("block", ["function_calls", "tool_calls"])
def test_dsml_a_self_closing_invoke_is_a_call_without_arguments(block):
    text = (f'Checking.\n<｜DSML｜{block}>\n<｜DSML｜invoke name="get_time"/>\n'
            f'<｜DSML｜invoke name="read">\n<｜DSML｜parameter name="path" string="true">/a'
            f"</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜{block}>")
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("get_time", {}), ("read", {"path": "/a"})]
    assert found.content == "Checking.\n"  # as vLLM's deepseek_v32 keeps it


@pytest.mark.parametrize("text", ['Write <｜DSML｜invoke name="get_time"/> to call it.',
                                  '<｜DSML｜invoke name="get_time"/>'])
def test_dsml_a_self_closing_invoke_outside_a_block_stays_text(text):
    stays_text(text)


# --- gpt-oss: a call, then a final-channel message ---------------------------------------

HARMONY_CALL = ("<|start|>assistant<|channel|>commentary to=functions.get_weather "
                '<|constrain|>json<|message|>{"city":"Paris"}<|call|>')


@pytest.mark.parametrize("final", ["Checking the weather.", "sure, one moment."])
def test_gpt_oss_a_call_followed_by_a_final_channel_message_is_read(final):
    for between in ("", "\n"):
        text = f"{HARMONY_CALL}{between}<|start|>assistant<|channel|>final<|message|>{final}"
        found = extract(text + "<|return|>", TOOLS)
        assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
            ("get_weather", {"city": "Paris"})]
        assert found.content == final


def test_gpt_oss_a_call_written_inside_a_final_message_stays_text():
    text = ("<|start|>assistant<|channel|>final<|message|>Write commentary to=functions."
            'get_weather json{"city":"Paris"} to call it.<|return|>')
    assert "in_message_text" in stays_text(text)


# --- LFM2's pythonic literals that vLLM reads --------------------------------------------

def _lfm2(call: str) -> str:
    return f"<|tool_call_start|>[{call}]<|tool_call_end|>"


@pytest.mark.parametrize(("call", "expected", "repair"), [
    ("label(tags={'urgent', 'bug'})", ("label", {"tags": ["urgent", "bug"]}), "set_as_list"),
    ("set_date(month=07, day=05)", ("set_date", {"month": 7, "day": 5}), "leading_zero_ints"),
    ("exec(command='printf a\x00b')", ("exec", {"command": "printf a\x00b"}),
     "control_chars_in_strings"),
    ("exec(command='cat > f.py << EOF\nimport csv\nprint(1)\nEOF')",
     ("exec", {"command": "cat > f.py << EOF\nimport csv\nprint(1)\nEOF"}),
     "control_chars_in_strings"),
    ("bash(command='sed -n '360,450p' /testbed/sympy/matrices/common.py')",
     ("bash", {"command": "sed -n '360,450p' /testbed/sympy/matrices/common.py"}),
     "nested_quotes_escaped"),
    ("bash(command='cd /testbed && python3 -c \"from sympy import latex\n"
     "print(latex(3*x, mul_symbol='\\,'))\"')",
     ("bash", {"command": "cd /testbed && python3 -c \"from sympy import latex\n"
                          "print(latex(3*x, mul_symbol='\\,'))\""}), "nested_quotes_escaped"),
])
def test_lfm2_literals_vllm_reads_are_read_each_a_named_repair(call, expected, repair):
    found = extract(_lfm2(call), LOOSE)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [expected]
    assert repair in found.calls[0].repairs
    assert found.content == ""


@pytest.mark.parametrize("call", [
    "bash(command='a', b='c' d')",  # `', b='`: one argument or two? No reading is sure
    "exec('ls', command='x')",  # a positional argument
    "set_date(month=07, day=os.getenv('D'))",  # not a literal
    "exec(command='unterminated)",
])
def test_lfm2_lists_no_rewrite_makes_sure_stay_text(call):
    stays_text(_lfm2(call), LOOSE)


def test_a_leading_zero_inside_a_string_is_kept():
    assert calls(_lfm2("exec(command='007', n=08)"), LOOSE) == [
        ("exec", {"command": "007", "n": 8})]


# --- Apertus: a list whose closing `]` is missing ------------------------------------------

@pytest.mark.parametrize("tail", ["<|tools_suffix|>", "", ", <|tools_suffix|>"])
def test_apertus_a_list_missing_its_close_is_read(tail):
    text = '<|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"read": {"path": "/a"}}' + tail
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == [
        ("get_weather", {"city": "Paris"}), ("read", {"path": "/a"})]
    assert found.calls[0].repairs == ("missing_list_close",)


@pytest.mark.parametrize("text", [
    '<|tools_prefix|>[{"get_weather": {"city": "Paris"}} and then more',
    '<|tools_prefix|>[{"get_weather": {"city": "Par',
])
def test_apertus_a_list_missing_its_close_stays_text_when_anything_else_follows(text):
    stays_text(text)
    assert "cut_by_length" in stays_text('<|tools_prefix|>[{"get_weather": {"city": "P"}}',
                                         truncated=True)


# --- Hermes: no `arguments` ------------------------------------------------------------------

def test_hermes_a_call_without_arguments_to_a_tool_needing_none_is_an_empty_object():
    found = extract('<tool_call>{"name": "get_time"}</tool_call>', TOOLS)
    assert [(c.name, c.arguments, c.repairs) for c in found.calls] == [
        ("get_time", "{}", ("missing_arguments_empty",))]


@pytest.mark.parametrize("text", ['<tool_call>{"name": "write"}</tool_call>',  # needs `path`
                                  '<tool_call>{"name": "unknown_x"}</tool_call>'])
def test_hermes_a_call_without_arguments_to_a_tool_needing_some_stays_text(text):
    assert "missing_arguments" in stays_text(text)


# --- tool names a little off ---------------------------------------------------------------

@pytest.mark.parametrize(("text", "name"), [
    ("<tool_call>\n<function=Get-Weather>\n<parameter=city>\nParis\n</parameter>\n"
     "</function>\n</tool_call>", "get_weather"),
    ('<tool_call>{"name": "functions.READ", "arguments": {"path": "/a"}}</tool_call>', "read"),
    ('<|start|>assistant<|channel|>commentary to=functions.Get_Weather <|constrain|>json'
     '<|message|>{"city": "Paris"}<|call|>', "get_weather"),
    ("[Read(path='/a')]", "read"),  # recognised by shape: a matched name still decides
])
def test_a_name_matching_one_tool_once_folded_is_that_tools(text, name):
    found = extract(text, TOOLS)
    assert [c.name for c in found.calls] == [name]
    assert "tool_name_matched" in found.calls[0].repairs


def test_a_name_matching_several_tools_once_folded_is_not_repaired():
    tools = {"read_file": {}, "readfile": {}}
    text = '<tool_call>{"name": "ReadFile", "arguments": {}}</tool_call>'
    assert [(c.name, c.repairs) for c in extract(text, tools).calls] == [
        ("ReadFile", ("unknown_tool",))]  # delivered as written, not guessed at
    assert "unknown_tool" in stays_text(text, tools, deliver_unknown=False)
    assert stays_text("[ReadFile(path='/a')]", tools) == {"unknown_tool"}


@pytest.mark.parametrize("name", ["rm -rf /", "x\"y", "<b>", ""])
def test_a_name_no_function_can_have_is_never_delivered(name):
    text = f'<tool_call>{orjson.dumps({"name": name, "arguments": {}}).decode()}</tool_call>'
    stays_text(text)
