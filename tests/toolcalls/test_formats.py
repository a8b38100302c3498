"""Every format: what it reads (positive) and what it must leave as text (negative).

All through the public `extract()`; each case names the format it exercises.
"""

from __future__ import annotations

import orjson
import pytest

from proxy.toolcalls import FORMATS, extract

TOOLS = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "days": {"type": "integer"}}},
    "read": {"type": "object", "properties": {"path": {"type": "string"}}},
}
PARIS = {"city": "Paris"}
READ_A = {"path": "/a"}


def calls_of(text: str, **kwargs: object) -> list[tuple[str, dict, str]]:
    found = extract(text, TOOLS, **kwargs)
    return [(c.name, orjson.loads(c.arguments), c.format) for c in found.calls]


POSITIVE = [
    # hermes
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     [("get_weather", PARIS)], ""),
    ("hermes", 'Checking.\n<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>',
     [("read", READ_A)], "Checking."),
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
     '{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}, '
     '{"name": "read", "arguments": {"path": "/a"}}</tool_call>',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("hermes", 'Both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}},\n'
     '{"name": "read", "arguments": {"path": "/a"}},\n</tool_call>',
     [("get_weather", PARIS), ("read", READ_A)], "Both."),
    ("hermes", '</think>{"name": "read", "arguments": {"path": "/a"}}</tool_call>',
     [("read", READ_A)], "</think>"),
    ("hermes", 'Reading it.\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>',
     [("read", READ_A)], "Reading it."),
    # tools wrapper
    ("tools_wrapper", '<tools>{"name": "read", "arguments": {"path": "/a"}}</tools>',
     [("read", READ_A)], ""),
    ("tools_wrapper", '<response>\n  {"name": "read", "arguments": {"path": "/a"}}\n</response>',
     [("read", READ_A)], ""),
    ("tools_wrapper", 'Reading.\n<function_call> {"name": "read", "arguments": {"path": "/a"}}'
     "\n</function_call>", [("read", READ_A)], "Reading."),
    ("tools_wrapper", '```xml\n<tool>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool>\n```',
     [("read", READ_A)], ""),
    ("tools_wrapper", '```json\n\n  <JSON> {"name": "read", "arguments": {"path": "/a"}} \n'
     "  </JSON> \n``` ", [("read", READ_A)], ""),
    # qwen xml
    ("qwen_xml", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
     "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
     [("get_weather", {"city": "Paris", "days": 3})], ""),
    ("qwen_xml", "<seed:tool_call>\n<function=read>\n<parameter=path>/a</parameter>\n"
     "</function>\n</seed:tool_call>", [("read", READ_A)], ""),
    # phi-4-mini
    ("phi4_mini", 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
     '{"name": "read", "arguments": {"path": "/a"}}]',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    # bare json
    ("bare_json", '{"name": "read", "arguments": {"path": "/a"}}', [("read", READ_A)], ""),
    # improvised (issue 41; the whole class is tests/toolcalls/test_improvised.py)
    ("improvised", 'get_weather(city="Paris")', [("get_weather", PARIS)], ""),
    ("improvised", "Checking:\nread{path: '/a'}", [("read", READ_A)], "Checking:"),
    ("improvised", '<tool_code>read(path="/a")</tool_code>', [("read", READ_A)], ""),
    # llama 3
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
     [("get_weather", PARIS)], ""),
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
     '{"name": "read", "parameters": {"path": "/a"}}<|eom_id|>',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris"}};\n'
     '{"name": "read", "parameters": {"path": "/a"}}',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("llama3", 'Sure.\n<function=get_weather>{"city": "Paris"}</function>',
     [("get_weather", PARIS)], "Sure."),
    ("llama3", '<function name="get_weather">\n{"city": "Paris"}\n</function>',
     [("get_weather", PARIS)], ""),
    # mistral
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, '
     '"id": "a1b2c3d4e"}, {"name": "read", "arguments": {"path": "/a"}, "id": "f5g6h7i8j"}]',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
     '[TOOL_CALLS]read[CALL_ID]x1y2z3[ARGS]{"path": "/a"}</s>',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("mistral", '[TOOL_CALLS]get_weather{"city": "Paris"}[TOOL_CALLS]read{"path": "/a"}',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("mistral", '[TOOL_CALLS] [{"name": "read", "arguments": {"path": "/a"}}]\nextra trailing data',
     [("read", READ_A)], "extra trailing data"),
    # pythonic
    ("pythonic", '[get_weather(city="Paris", days=3), read(path="/a")]',
     [("get_weather", {"city": "Paris", "days": 3}), ("read", READ_A)], ""),
    ("pythonic", "Let me look.\n[read(path='/a')]", [("read", READ_A)], "Let me look."),
    ("pythonic", "<|python_start|>[get_weather(city='Paris')]<|python_end|>",
     [("get_weather", PARIS)], ""),
    ("pythonic", "Checking.\n<|python_tag|>[get_weather(city='Paris')]",
     [("get_weather", PARIS)], "Checking."),
    # Llama 4 (vLLM test_llama4_pythonic_tool_parser: parallel_calls_nonstreaming) without
    # its end token: the list closes the content
    ("pythonic", "<|python_start|>[get_weather(city='LA', days=2), read(path='/a')]",
     [("get_weather", {"city": "LA", "days": 2}), ("read", READ_A)], ""),
    # OLMo 3 (vLLM test_olmo3_tool_parser): one call per line, no brackets
    ("pythonic", "<function_calls>get_weather(city='San Francisco', days=3)</function_calls>",
     [("get_weather", {"city": "San Francisco", "days": 3})], ""),
    ("pythonic", "<function_calls>get_weather(city='Paris')\nread(path='/a')</function_calls>",
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("pythonic", "Sure.\n<function_calls>\nread(path='Martha\\'s \"cool\"')\n"
     "get_weather()\n</function_calls>",
     [("read", {"path": "Martha's \"cool\""}), ("get_weather", {})], "Sure."),
    # glm
    ("glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
     "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
     [("get_weather", {"city": "Paris", "days": 3})], ""),
    ("glm", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
     "</tool_call><tool_call>read<arg_key>path</arg_key><arg_value>/a</arg_value></tool_call>",
     [("get_weather", PARIS), ("read", READ_A)], ""),
    # deepseek
    ("deepseek", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
     '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
     [("get_weather", PARIS)], ""),
    ("deepseek", "On it.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
     '{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>read<｜tool▁sep｜>{"path": "/a"}'
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     [("get_weather", PARIS), ("read", READ_A)], "On it."),
    ("deepseek", "<｜tool▁calls｜>function<｜tool▁sep｜>read\n```json\n{\"path\": \"/a\"}\n```"
     "<｜tool▁call▁end｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", [("read", READ_A), ("get_weather", PARIS)], ""),
    ("deepseek", "Let me check.<｜tool calls begin｜>function<｜tool▁sep｜>read\n```json\n"
     '{"path": "/a"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', [("read", READ_A)],
     "Let me check."),
    # harmony
    ("harmony", "<|start|>assistant<|channel|>commentary to=functions.get_weather "
     '<|constrain|>json<|message|>{"city": "Paris"}<|call|>', [("get_weather", PARIS)], ""),
    ("harmony", "<|start|>assistant to=functions.read<|channel|>commentary json<|message|>"
     '{"path": "/a"}<|call|>', [("read", READ_A)], ""),
    ("harmony", 'commentary to=functions.get_weather json{"city": "Paris"}',
     [("get_weather", PARIS)], ""),
    ("harmony", "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
     '<|channel|>commentary to=functions.get_weatherjson<|message|>{"city": "Paris"}<|call|>',
     [("get_weather", PARIS)], ""),  # the analysis is reasoning (test_cleanup)
    # granite
    ("granite", '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
     [("get_weather", PARIS)], ""),
    ("granite", 'Sure.\n<|tool_call|> [{"name": "read", "arguments": {"path": "/a"}}]',
     [("read", READ_A)], "Sure."),
    # jamba / hunyuan
    ("tool_calls_tag", '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
     '{"name": "read", "arguments": {"path": "/a"}}]</tool_calls>',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    ("tool_calls_tag", '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
     '{"name": "read", "arguments": {"path": "/a"}}\n</tool_calls>',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    # internlm
    ("internlm", '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": '
     '{"city": "Paris"}}<|action_end|>', [("get_weather", PARIS)], ""),
    # kimi k2
    ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
     '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>'
     "<|tool_call_begin|>functions.read:1<|tool_call_argument_begin|>"
     '{"path": "/a"}<|tool_call_end|><|tool_calls_section_end|>',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    # minimax m2
    ("minimax_m2", 'Checking.\n<minimax:tool_call>\n<invoke name="get_weather">\n'
     '<parameter name="city">Paris</parameter>\n<parameter name="days">3</parameter>\n'
     '</invoke>\n<invoke name="read">\n<parameter name="path">/a</parameter>\n</invoke>\n'
     "</minimax:tool_call>",
     [("get_weather", {"city": "Paris", "days": 3}), ("read", READ_A)], "Checking."),
    # deepseek v3.2 dsml
    ("deepseek_dsml", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
     '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
     '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
     "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
     [("get_weather", {"city": "Paris", "days": 3})], ""),
    ("deepseek_dsml", '<｜DSML｜function_calls>\n            <｜DSML｜invoke name="read">\n'
     '            <｜DSML｜parameter name="path" string="true">/a</｜DSML｜parameter>\n'
     "            </｜DSML｜invoke>\n            </｜DSML｜function_calls>",
     [("read", READ_A)], ""),
    ("minimax_m2", '<minimax:tool_call>\n\n\t\t\t\t    <invoke name="read">'
     '<parameter name="path">/a</parameter></invoke></minimax:tool_call>',
     [("read", READ_A)], ""),
    # longcat
    ("longcat", 'On it.\n<longcat_tool_call>{"name": "read", "arguments": {"path": "/a"}}'
     "</longcat_tool_call>", [("read", READ_A)], "On it."),
    # apertus
    ("apertus", 'I will check. <|tools_prefix|>[{"get_weather": {"city": "Paris"}}, '
     '{"read": {"path": "/a"}}]<|tools_suffix|>', [("get_weather", PARIS), ("read", READ_A)],
     "I will check."),
    # granite-20b-fc
    ("granite_20b_fc", '<function_call> {"name": "get_weather", "arguments": {"city": "Paris"}}\n'
     '<function_call> {"name": "read", "arguments": {"path": "/a"}}',
     [("get_weather", PARIS), ("read", READ_A)], ""),
    # step3
    ("step3", '<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="get_weather">'
     '<steptml:parameter name="city">Paris</steptml:parameter><steptml:parameter name="days">'
     "3</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_sep｜>"
     '<｜tool_call_begin｜>function<｜tool_sep｜>read\n<steptml:invoke name="read">'
     '<steptml:parameter name="path">/a</steptml:parameter></steptml:invoke>'
     "<｜tool_call_end｜><｜tool_calls_end｜>",
     [("get_weather", {"city": "Paris", "days": 3}), ("read", READ_A)], ""),
    # gemma 4
    ("gemma4", 'Sure.<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>'
     '<|tool_call>call:read{path:<|"|>/a<|"|>}<tool_call|>',
     [("get_weather", {"city": "Paris", "days": 3}), ("read", READ_A)], "Sure."),
    # functionary v3.2
    ("functionary", 'read\n{"path": "/a"}>>>get_weather\n{"city": "Paris"}',
     [("read", READ_A), ("get_weather", PARIS)], ""),
    ("functionary", 'all\nLet me look.>>>read\n{"path": "/a"}\n', [("read", READ_A)],
     "all\nLet me look."),
    # code fence
    ("code_fence", 'I will check.\n```json\n{"name": "get_weather", "arguments": '
     '{"city": "Paris"}}\n```', [("get_weather", PARIS)], "I will check."),
    ("code_fence", '```\n[{"name": "read", "arguments": {"path": "/a"}}]\n```',
     [("read", READ_A)], ""),
    ("code_fence", '```xml\n  {"name": "read", "arguments": {"path": "/a"}}\n```',
     [("read", READ_A)], ""),
]


@pytest.mark.parametrize(("fmt", "text", "expected", "content"), POSITIVE,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(POSITIVE)])
def test_format_reads_its_calls(fmt, text, expected, content):
    found = extract(text, TOOLS)
    assert [(c.name, orjson.loads(c.arguments)) for c in found.calls] == expected
    assert {c.format for c in found.calls} == {fmt}
    assert found.content == content


NEGATIVE = [
    ("hermes", "Wrap calls in <tool_call> tags, like <tool_call>this</tool_call>."),
    ("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}} and more'),
    ("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}} then '
     '{"name": "read", "arguments": {}}</tool_call>'),
    ("hermes", 'It ends with {"name": "read", "arguments": {}}</tool_call> in prose.'),
    ("hermes", '{"name": "delete_all", "arguments": {}}</tool_call>'),
    ("hermes", '{"name": "read", "arguments": {"path": "/a"}</tool_call>'),
    ("hermes", '<tool_call>\n{"name": "read", "arguments": {}}\n{"name": "read", "argu'),
    ("hermes", 'Write `</tool_call>` after {"name": "read", "arguments": {}}'),
    ("tools_wrapper", "<tools>get_weather, read</tools>"),
    ("tools_wrapper", 'The server answers <response>{"name": "read", "arguments": {}}'
     "</response> then."),
    ("tools_wrapper", 'A call looks like:\n```xml\n<tool>\n{"name": "read", "arguments": {}}\n'
     "</tool>\n```\nand the runtime runs it."),
    ("tools_wrapper", 'Example:\n```xml\n<tools>{"name": "read", "arguments": {}}</tools>\n```'),
    ("tools_wrapper", '<json>\n{"name": "read", "arguments": {"path": "/a"}}\nand so on'),
    ("tools_wrapper", '<json>\n{"path": "/a"}\n</json>'),
    ("tools_wrapper", '<response>\n{"name": "delete_all", "arguments": {}}\n</response>'),
    ("qwen_xml", "Use <function=get_weather> when asked about weather."),
    ("bare_json", 'The config is {"name": "read", "arguments": {}} and it works fine.'),
    ("improvised", 'print(get_weather(city="Paris"))'),
    ("improvised", 'I would run get_weather(city="Paris") for you.'),
    ("improvised", 'get_forecast(city="Paris")'),
    ("llama3", '<|python_tag|>brave_search.call(query="weather in Paris")'),
    ("llama3", '{"name": "read", "parameters": {"path": "/a"}}; and that is all'),
    ("llama3", 'Write `<function=get_weather>{"city": "Paris"}</function>` to call it.'),
    ("llama3", 'Write `<function name="read">{"path": "/a"}</function>` to call it.'),
    ("llama3", '<function name="read">{"path": "/a"} and then the close'),
    ("mistral", "[TOOL_CALLS] is the token Mistral uses."),
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"} then I would answer'),
    ("mistral", 'Mistral writes [TOOL_CALLS][{"name": "read", "arguments": {}}]\nlike that.'),
    ("mistral", '[TOOL_CALLS]read{"path": "/a"} is the v11 shape'),
    ("mistral", 'Use `[TOOL_CALLS]read{"path": "/a"}`'),
    ("mistral", '[TOOL_CALLS]delete_all{"path": "/"}'),
    ("mistral", '[TOOL_CALLS]read{"path": "/a"'),
    ("pythonic", "[get_weather(city='Paris')] is an example.\nThat is all."),
    ("pythonic", "[get_weather('Paris')]"),
    ("pythonic", "[get_weather(city=open('/etc/passwd').read())]"),
    ("pythonic", "[get_weather(city=CITY)]"),
    ("pythonic", "See [link(here)]"),
    ("pythonic", "OLMo 3 wraps its calls in <function_calls> tags."),
    ("pythonic", "<function_calls>I would call get_weather(city='Paris') here.</function_calls>"),
    ("pythonic", "<function_calls>read(path=b'/a')\nget_weather(city='Paris')</function_calls>"),
    ("pythonic", "<function_calls>get_weather(city='Paris'"),
    ("pythonic", "<|python_start|>[get_weather(city='Paris')] is how Llama 4 writes it."),
    ("pythonic", "<|python_start|>[get_weather(city='Paris')"),
    ("glm", "<tool_call>get_weather is what you write first, then the keys."),
    ("glm", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value> and so"),
    ("deepseek", "<｜tool▁calls▁begin｜> starts a DeepSeek call section."),
    ("deepseek", "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
     '{"city": "Paris"} followed by prose'),
    ("deepseek", "<｜tool▁calls▁begin｜>function<｜tool▁sep｜>read\n```json\n{\"path\": \"/a\"}"
     "\n```<｜tool▁calls▁end｜>"),
    ("deepseek", "The JSON follows function<｜tool▁sep｜>read\n```json\n{\"path\": \"/a\"}\n```"
     "<｜tool▁call▁end｜>"),
    ("deepseek", "Write `<｜tool▁call▁begin｜>read<｜tool▁sep｜>{\"path\": \"/a\"}"
     "<｜tool▁call▁end｜>` per call."),
    ("deepseek", "<｜tool▁calls｜>function<｜tool▁sep｜>delete_all\n```json\n{}\n```"
     "<｜tool▁call▁end｜>"),
    ("harmony", "Send it to=functions.get_weather and wait."),
    ("harmony", '<|channel|>final<|message|>To call it, write:\nto=functions.get_weather '
     '{"city": "x"}<|return|>'),
    ("harmony", '<|channel|>commentary to=functions.rm_rfjson<|message|>{"path": "/a"}'),
    ("granite", "<|tool_call|> followed by a list is Granite's format."),
    ("granite", '`<|tool_call|>[{"name": "read", "arguments": {}}]` is Granite 3.0.'),
    ("granite", '<|tool_call|>[{"name": "read", "arguments": {"path": "/a"}}'),
    ("tool_calls_tag", "<tool_calls>[get_weather]</tool_calls>"),
    ("tool_calls_tag", '<tool_calls>\n{"name": "read", "arguments": {}}\nthen I wait\n'
     "</tool_calls>"),
    ("tool_calls_tag", '<tool_calls>\n{"name": "read", "arguments": {}}\n{"name": "re'),
    ("internlm", "<|action_start|><|interpreter|>print(1)<|action_end|>"),
    ("kimi_k2", "<|tool_call_begin|>functions.get_weather:0 is how Kimi starts a call."),
    ("longcat", 'Wrap it as `<longcat_tool_call>{"name": "read", "arguments": {}}'
     '</longcat_tool_call>`.'),
    ("longcat", '<longcat_tool_call>{"name": "read", "arguments": {"path": "/a"}'),
    ("longcat", '<longcat_tool_call>{"name": "delete_all", "arguments": {}}</longcat_tool_call>'),
    ("apertus", '<|tools_prefix|>[{"get_weather": {"city": "Paris"}, "read": {}}]'
     "<|tools_suffix|>"),
    ("apertus", 'Apertus writes `<|tools_prefix|>[{"read": {"path": "/a"}}]<|tools_suffix|>`.'),
    ("apertus", '<|tools_prefix|>[{"read": {"path": "/a"}'),
    ("granite_20b_fc", 'Granite emits <function_call> {"name": "read", "arguments": {}} first.'),
    ("granite_20b_fc", '<function_call> {"name": "read", "arguments": {}} and then prose'),
    ("granite_20b_fc", '<function_call> {"name": "delete_all", "arguments": {}}'),
    ("step3", '<｜tool_call_begin｜><steptml:invoke name="read"></steptml:invoke>'
     "<｜tool_call_end｜>"),
    ("step3", '<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="read">'
     '<steptml:parameter name="path">/a'),
    ("step3", 'Step3 wraps <steptml:invoke name="read"> in call tokens.'),
    ("gemma4", "<|tool_call>call:get_weather{city:Paris}<tool_call|>"),
    ("gemma4", 'Gemma writes `<|tool_call>call:read{path:<|"|>/a<|"|>}<tool_call|>`.'),
    ("gemma4", '<|tool_call>call:read{path:<|"|>/a'),
    ("gemma4", '<|tool_call>call:delete_all{path:<|"|>/<|"|>}<tool_call|>'),
    ("functionary", 'Type x>>>read\n{"path": "/a"} in the prompt.'),
    ("functionary", 'In the shell:\nx>>>read\n{"path": "/a"}'),
    ("functionary", 'read\n{"path": "/a"} is the shape of a call'),
    ("functionary", 'delete_all\n{"path": "/"}'),
    ("code_fence", 'Example:\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
     "```\nThat is how a call looks."),
    ("code_fence", '```python\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'),
    ("phi4_mini", "Python's functools[...] module has partial and reduce."),
    ("phi4_mini", 'myfunctools[{"name": "read", "arguments": {"path": "/a"}}] is a variable.'),
    ("code_fence", 'A call looks like this, for example:\n```json\n{"name": "get_weather", '
     '"arguments": {"city": "Paris"}}\n```'),
    ("minimax_m2", 'Write <invoke name="read"><parameter name="path">/a</parameter></invoke>.'),
    ("minimax_m2", '<minimax:tool_call>\n<invoke name="read">\n<parameter name="path">/a'),
    ("deepseek_dsml", '<｜DSML｜invoke name="read"> is how DeepSeek V3.2 starts a call.'),
    ("deepseek_dsml", '<｜DSML｜function_calls> opens a block.\n            '
     '<｜DSML｜invoke name="read">\n<｜DSML｜parameter name="path" string="true">/a'
     "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"),
    ("deepseek_dsml", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="read">\nprose here\n'
     "</｜DSML｜invoke>"),
]


@pytest.mark.parametrize(("fmt", "text"), NEGATIVE,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(NEGATIVE)])
def test_format_leaves_non_calls_as_text(fmt, text):
    assert fmt in FORMATS
    strict = extract(text, TOOLS, deliver_unknown=False)
    assert strict.calls == []
    assert strict.content == text
    # By default, a call the model plainly made to a tool not offered is delivered as written
    # (issue 26, item 6); nothing else is taken.
    found = extract(text, TOOLS)
    assert all(c.name not in TOOLS and "unknown_tool" in c.repairs for c in found.calls)
    assert found.calls or found.content == text


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_has_positive_and_negative_cases(fmt):
    from tests.toolcalls.test_formats_from_parsers import NEGATIVE as CURRENT_NEGATIVE
    from tests.toolcalls.test_formats_from_parsers import POSITIVE as CURRENT_POSITIVE

    assert any(case[0] == fmt for case in (*POSITIVE, *CURRENT_POSITIVE))
    assert any(case[0] == fmt for case in (*NEGATIVE, *CURRENT_NEGATIVE))


@pytest.mark.parametrize(("fmt", "text", "expected", "content"), POSITIVE,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(POSITIVE)])
def test_format_alone_reads_its_calls(fmt, text, expected, content):
    """Configured with only its own format, each case still reads; with another, it does not
    (unless that other format reads the same shape)."""
    assert [(n, a) for n, a, _ in calls_of(text, formats=[fmt])] == expected


def test_a_hermes_frame_not_understood_is_reported_not_dropped_silently():
    text = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}} then '
            '{"name": "read", "arguments": {}}</tool_call>')
    found = extract(text, TOOLS)
    assert [(left.format, left.reason, left.start, left.end) for left in found.left_as_text] \
        == [("hermes", "unrecognised_shape", 0, len(text))]
    listed = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}, '
              '{"name": "delete_all", "arguments": {}}</tool_call>')
    found = extract(listed, TOOLS, deliver_unknown=False)
    assert [c.name for c in found.calls] == ["get_weather"]
    assert [(left.reason, left.name) for left in found.left_as_text] \
        == [("unknown_tool", "delete_all")]


def test_unknown_name_in_any_format_stays_text():
    text = "<|tool_call|>[{\"name\": \"delete_all\", \"arguments\": {}}]"
    assert [(c.name, c.repairs) for c in extract(text, TOOLS).calls] == [
        ("delete_all", ("unknown_tool",))]  # by default: delivered as written
    found = extract(text, TOOLS, deliver_unknown=False)
    assert found.calls == []
    assert found.content == text
    assert [(x.format, x.reason, x.name) for x in found.left_as_text] == [
        ("granite", "unknown_tool", "delete_all")]


def test_deepseek_tokens_written_in_ascii_are_read():
    text = ("<|tool▁calls▁begin|><|tool▁call▁begin|>get_weather<|tool▁sep|>"
            '{"city": "Paris"}<|tool▁call▁end|><|tool▁calls▁end|>')
    assert calls_of(text) == [("get_weather", PARIS, "deepseek")]


def test_kimi_ids_without_prefix_or_index():
    text = ('<|tool_call_begin|>read<|tool_call_argument_begin|>{"path": "/a"}'
            "<|tool_call_end|>")
    assert calls_of(text) == [("read", READ_A, "kimi_k2")]


def test_pythonic_values_are_literals_only():
    text = '[get_weather(city="Paris", days=-2), read(path="/a")]'
    assert calls_of(text) == [("get_weather", {"city": "Paris", "days": -2}, "pythonic"),
                              ("read", READ_A, "pythonic")]
    nested = '[read(path={"a": [1, 2.5, None, True, (3, 4)]})]'
    assert calls_of(nested) == [("read", {"path": {"a": [1, 2.5, None, True, [3, 4]]}},
                                 "pythonic")]


def test_pythonic_refusal_is_reported():
    text = "[get_weather(city=__import__('os').system('x'))]"
    found = extract(text, TOOLS)
    assert found.calls == []
    assert [(x.format, x.reason) for x in found.left_as_text] == [
        ("pythonic", "not_literal_arguments")]


def test_harmony_header_tokens_are_cut_with_the_call():
    text = ("Let me check the weather.<|end|><|start|>assistant<|channel|>commentary "
            'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>')
    found = extract(text, TOOLS)
    assert [c.name for c in found.calls] == ["get_weather"]
    assert found.content == "Let me check the weather."


def test_glm_values_are_coerced_by_schema():
    text = ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>42</arg_value>"
            "<arg_key>days</arg_key><arg_value>7</arg_value></tool_call>")
    assert calls_of(text) == [("get_weather", {"city": "42", "days": 7}, "glm")]


def test_glm_call_without_parameters():
    assert calls_of("<tool_call>read</tool_call>") == [("read", {}, "glm")]


def test_granite_31_string_prefix_under_its_own_format_name():
    text = '<tool_call> [{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    assert calls_of(text, formats=["granite"]) == [("get_weather", PARIS, "granite")]
    assert calls_of('<tool_call> {"name": "read", "arguments": {}}', formats=["granite"]) == []
    prose = "Granite 3.1 writes <tool_call> [ ... ] before its calls."
    assert calls_of(prose, formats=["granite"]) == []


@pytest.mark.parametrize("text", [
    "<|python_start|>[get_weather(city='LA'), read(path='/a')]",
    "<function_calls>get_weather(city='LA')\nread(path='/a')",
])
def test_pythonic_block_without_its_end_is_a_repair_and_never_taken_when_cut(text):
    found = extract(text, TOOLS)
    assert [c.repairs for c in found.calls] == [("missing_close_tag",)] * 2
    cut = extract(text, TOOLS, truncated=True)
    assert (cut.calls, cut.content) == ([], text)
    assert [x.reason for x in cut.left_as_text] == ["cut_by_length"]


def test_olmo3_json_names_and_unknown_tools():
    text = "<function_calls>read(path='/a', recursive=true, depth=null)</function_calls>"
    found = extract(text, {**TOOLS})
    assert [(c.name, orjson.loads(c.arguments), c.repairs) for c in found.calls] == [
        ("read", {"path": "/a", "recursive": True, "depth": None}, ("json_literals_in_python",))]
    unknown = "<function_calls>delete_everything(path='/')</function_calls>"
    found = extract(unknown, TOOLS)
    assert (found.calls, found.content) == ([], unknown)
    assert [x.reason for x in found.left_as_text] == ["unknown_tool"]


def test_a_pythonic_list_with_too_much_syntax_is_refused_by_name():
    text = "[read(path=[" + "1, " * 200_000 + "2])]"
    found = extract(text, TOOLS)
    assert (found.calls, found.content) == ([], text)
    assert [(x.format, x.reason) for x in found.left_as_text] == [("pythonic", "too_large")]
