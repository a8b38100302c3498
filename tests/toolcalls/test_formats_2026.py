"""The families released or changed in 2026, each read as the engines' current parsers and
tests read it (the source named beside each case), each with its negative twin: the text
that looks like it and must stay text.

Sources: vLLM main `vllm/tool_parsers/` and `tests/tool_parsers/` (`hy_v4`, `poolside_v1`,
`muse_glimmer`, `kimi_k3`), SGLang `python/sglang/srt/function_call/` (`deepseekv4_detector`),
Ollama `model/parsers/` and its `_test.go` tables (`glm46` repairs, `gemma4`,
`functiongemma`, `glimmer`).
"""

from __future__ import annotations

import orjson
import pytest

from proxy.toolcalls import extract
from proxy.toolcalls.prose.answer import plain_answer

TOOLS = {
    "get_weather": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "temp": {"type": "number"}}},
    "get_time": {"type": "object", "properties": {}},
    "search flights": {"type": "object", "properties": {
        "from": {"type": "string"}, "to": {"type": "string"}}},
    "book": {"type": "object", "properties": {
        "from": {"type": "string"}, "to": {"type": "string"}, "class": {"type": "string"},
        "seats": {"type": "integer"}}},
    "process": {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "string"}}}},
    "update": {"type": "object", "properties": {"data": {"type": "object", "properties": {
        "name": {"type": "string"}, "value": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}}}}}},
    "query": {"type": "object", "properties": {
        "query": {"type": "string"}, "note": {"type": "string"}}},
    "write_file": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}},
}


def _hy(name: str, *pairs: str, suffix: str = ":opensource") -> str:
    """One Hunyuan 4 call (vLLM's tests/tool_parsers/test_hy_v4_tool_parser.py `call`/`arg`)."""
    args = "".join(f"<arg_key{suffix}>{key}</arg_key{suffix}><arg_value{suffix}>{value}"
                   f"</arg_value{suffix}>" for key, value in zip(pairs[::2], pairs[1::2],
                                                               strict=True))
    return f"<tool_call{suffix}>{name}{args}</tool_call{suffix}>"


def _hy_block(body: str, suffix: str = ":opensource") -> str:
    return f"<tool_calls{suffix}>{body}</tool_calls{suffix}>"


Q = '<|"|>'
E = "<escape>"
D = "｜DSML｜"
_DSML_INVOKE = (f'<{D}invoke name="get_weather">\n<{D}parameter name="city" string="true">Paris'
                f"</{D}parameter>\n</{D}invoke>")

# (source, text, calls as (name, arguments), content)
POSITIVE = [
    # Hunyuan 4 (vLLM hy_v4_tool_parser.py: no <tool_sep>, per-checkpoint suffix)
    ("hy_v4", "sure!" + _hy_block(_hy("get_weather", "city", "Beijing", "days", "3")),
     [("get_weather", {"city": "Beijing", "days": 3})], "sure!"),
    ("hy_v4", _hy_block(_hy("get_time")), [("get_time", {})], ""),
    ("hy_v4", _hy_block(_hy("get_weather", "city", "A", "temp", "5.5", suffix=":6124c78e")
                        + _hy("get_time", suffix=":6124c78e"), suffix=":6124c78e"),
     [("get_weather", {"city": "A", "temp": 5.5}), ("get_time", {})], ""),
    ("hy_v4", _hy_block(_hy("get_weather", "city", "北京")),
     [("get_weather", {"city": "北京"})], ""),
    ("hy_v4", _hy_block("\n  " + _hy("get_weather", "city", "Beijing")),
     [("get_weather", {"city": "Beijing"})], ""),
    # Poolside v1 (vLLM test_poolside_v1_tool_parser.py): GLM's frame, names with spaces
    ("poolside_v1", "<tool_call>  search flights  <arg_key>from</arg_key><arg_value>SFO"
     "</arg_value></tool_call>", [("search flights", {"from": "SFO"})], ""),
    ("poolside_v1", "<tool_call>write_file\n<arg_key>content</arg_key>\n<arg_value>    def f():"
     "\n        return 1\n</arg_value>\n</tool_call>",
     [("write_file", {"content": "    def f():\n        return 1\n"})], ""),
    ("poolside_v1", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
     "<arg_key>days</arg_key><arg_value> 4 </arg_value></tool_call>",
     [("get_weather", {"city": "Paris", "days": 4})], ""),
    # GLM-5.x zero-argument calls (vLLM glm47 tests; Ollama glm47_test.go)
    ("glm47", "<tool_call>get_time</tool_call>", [("get_time", {})], ""),
    ("glm47", "<tool_call>get_time\n</tool_call>\nThen I answer.", [("get_time", {})],
     "Then I answer."),
    # GLM frames Ollama repairs where the repair is certain (glm46_test.go TestRepairGLM46XML)
    ("glm46 repair", "<tool_call>get_weather<arg_key>city</arg_key>Paris</arg_value></tool_call>",
     [("get_weather", {"city": "Paris"})], ""),
    ("glm46 repair", "<tool_call>get_weather<arg_key>city<arg_value>Paris</arg_value>"
     "</tool_call>", [("get_weather", {"city": "Paris"})], ""),
    ("glm46 repair", "<tool_call>get_weather\n<arg_key>city</arg_key>\nNew York</arg_value>\n"
     "</tool_call>", [("get_weather", {"city": "New York"})], ""),
    ("glm46 repair", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo<arg_key>days"
     "</arg_key><arg_value>2</arg_value></tool_call>",
     [("get_weather", {"city": "Oslo", "days": 2})], ""),
    ("glm46 repair", "<tool_call>get_weather<arg_key>city</arg_key>Rome</arg_value><arg_key>days"
     "<arg_value>3</arg_value></tool_call>", [("get_weather", {"city": "Rome", "days": 3})], ""),
]

POSITIVE += [
    # Gemma 4 (Ollama gemma4_test.go): JSON-quoted values beside <|"|> ones; a stray closer
    ("gemma4", '<|tool_call>call:query{query:"raw \\"quoted\\"",note:' + Q + 'gemma "quoted"' + Q
     + "}<tool_call|>", [("query", {"query": 'raw "quoted"', "note": 'gemma "quoted"'})], ""),
    ("gemma4", "<|tool_call>call:get_weather{city:" + Q + "Paris" + Q + "}<tool_call|><tool_call|>",
     [("get_weather", {"city": "Paris"})], ""),
    ("gemma4", "<|tool_call>call:get_weather{city:" + Q + "Paris" + Q
     + "}<tool_call|><tool_call|>Done.", [("get_weather", {"city": "Paris"})], "Done."),
    ("gemma4", "<|tool_call>call:get_weather{city:" + Q + "Paris" + Q
     + "}<tool_call|><|tool_response>Done.", [("get_weather", {"city": "Paris"})], "Done."),
    # a typed value the schema and the engine make a number (vLLM hy_v4 _normalize_type)
    ("gemma4", "<|tool_call>call:get_weather{city:" + Q + "Oslo" + Q + ",days:" + Q + "3" + Q
     + "}<tool_call|>", [("get_weather", {"city": "Oslo", "days": 3})], ""),
    # FunctionGemma (Ollama functiongemma_test.go): arrays and nested objects
    ("functiongemma", f"<start_function_call>call:process{{items:[{E}a{E},{E}b{E},{E}c{E}]}}"
     "<end_function_call>", [("process", {"items": ["a", "b", "c"]})], ""),
    ("functiongemma", f"<start_function_call>call:update{{data:{{name:{E}test{E},value:42}}}}"
     "<end_function_call>", [("update", {"data": {"name": "test", "value": 42}})], ""),
    ("functiongemma", f"<start_function_call>call:update{{data:{{name:{E}a, b{E},tags:[{E}x{E}]"
     "}}<end_function_call>", [("update", {"data": {"name": "a, b", "tags": ["x"]}})], ""),
    ("functiongemma", "<start_function_call>call:get_time{}<end_function_call>",
     [("get_time", {})], ""),
    # a pythonic argument named with a Python keyword (vLLM's and SGLang's pythonic parsers)
    ("pythonic", '[book(from="SFO", to="JFK")]', [("book", {"from": "SFO", "to": "JFK"})], ""),
    ("pythonic", '[book(from="SFO", to="JFK", class="economy", seats=2)]',
     [("book", {"from": "SFO", "to": "JFK", "class": "economy", "seats": 2})], ""),
    ("pythonic", '<|tool_call_start|>[book(from="SFO", to="JFK")]<|tool_call_end|>',
     [("book", {"from": "SFO", "to": "JFK"})], ""),
]

# (source, text): what looks like the family's call and must stay text
NEGATIVE = [
    ("hy_v4", "Hunyuan 4 writes <tool_call:opensource>NAME then its arguments."),
    ("hy_v4", "For example:\n```\n" + _hy_block(_hy("get_weather", "city", "A"))
              + "\n```\nThat is the shape."),
    ("hy_v4", "<tool_calls:opensource><tool_call:opensource>get_weather<arg_key:opensource>city"
              "</arg_key:opensource><arg_value:opensource>Bei"),  # cut
    ("hy_v4", "`" + _hy_block(_hy("get_weather", "city", "A")) + "`"),
    ("poolside_v1", "<tool_call>I will look that up for you</tool_call>"),
    ("poolside_v1", "<tool_call>search hotels<arg_key>city</arg_key><arg_value>Rome</arg_value>"
                    "</tool_call>"),  # spaced name no tool has: never a name
    ("glm47", "Call it like <tool_call>get_time</tool_call> when you need the time."),
    # malformed frames whose repair is not certain stay text, markup never in a value
    ("glm46 repair", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo<arg_key>mode"
                     "</arg_key><arg_value>2</arg_value></tool_call>"),  # `mode` not declared
    ("glm46 repair", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo<arg_key>city"
                     "</arg_key><arg_value>2</arg_value></tool_call>"),  # given already
    ("glm46 repair", "<tool_call>get_weather<arg_key>city</arg_key>Paris<arg_value>x</arg_value>"
                     "</tool_call>"),
    ("glm46 repair", "<tool_call>get_weather city</arg_key><arg_value>Paris</arg_value>"
                     "</tool_call>"),  # the name split at a space: a guess
    ("glm46 repair", "<tool_call>get_weather<arg_key>city</arg_key>Paris</arg_value> and more"),
]
NEGATIVE += [
    ("gemma4", 'Gemma 4 writes <|tool_call>call:NAME{key:"value"} in its own syntax.'),
    ("gemma4", '<|tool_call>call:query{query:"never closed}<tool_call|>'),
    ("gemma4", "Close a call with <tool_call|> and go on."),
    ("functiongemma", f"<start_function_call>call:process{{items:[{E}a{E},{E}b"
                      "<end_function_call>"),  # an escape never closed
    ("functiongemma", f"<start_function_call>call:process{{items:[{E}a{E}"),  # cut
    ("functiongemma", f"Write `<start_function_call>call:process{{items:[{E}a{E}]}}"
                      "<end_function_call>` to call it."),
    ("pythonic", 'The call would be:\n[book(from="SFO", to="JFK")]'),
    ("pythonic", 'from = "SFO"\nbook(from, to="JFK")'),
    ("pythonic", '[book(from == "SFO")]'),
]


@pytest.mark.parametrize(("source", "text", "expected", "content"), POSITIVE,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(POSITIVE)])
def test_a_2026_family_reads_its_calls(source, text, expected, content):
    found = extract(text, TOOLS)
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == expected
    assert found.content == content


@pytest.mark.parametrize(("source", "text"), NEGATIVE,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(NEGATIVE)])
def test_what_looks_like_a_2026_family_call_stays_text(source, text):
    found = extract(text, TOOLS)
    assert found.calls == []
    assert found.content == text


def test_no_value_of_a_malformed_glm_frame_holds_its_markup():
    """Whatever a malformed frame is read as, a value never swallows the frame's own tags."""
    for _, text in NEGATIVE + [(case[0], case[1]) for case in POSITIVE]:
        for call in extract(text, TOOLS).calls:
            for value in orjson.loads(call.arguments).values():
                assert "arg_key>" not in str(value)
                assert "arg_value>" not in str(value)


def test_the_repairs_are_named():
    found = extract("<tool_call>get_weather<arg_key>city</arg_key>Paris</arg_value></tool_call>",
                    TOOLS)
    assert "missing_tag" in found.calls[0].repairs


@pytest.mark.parametrize("names", [("hy_v4",), ("hunyuan",), ("poolside_v1",), ("glm47",)])
def test_the_engines_parser_name_reads_it_alone(names):
    text = {"hy_v4": _hy_block(_hy("get_weather", "city", "A")),
            "hunyuan": _hy_block(_hy("get_weather", "city", "A")),
            "poolside_v1": "<tool_call>search flights<arg_key>to</arg_key><arg_value>JFK"
                           "</arg_value></tool_call>",
            "glm47": "<tool_call>get_time</tool_call>"}[names[0]]
    assert extract(text, TOOLS, formats=names).calls


def test_a_nullable_or_python_typed_number_is_made_a_number_as_the_engines_make_it():
    tools = {"t": {"type": "object", "properties": {
        "n": {"type": ["number", "null"]}, "i": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "u": {"type": "uint32"}, "s": {"type": ["string", "integer"]}}}}
    found = extract('<tool_call>{"name": "t", "arguments": {"n": "5.5", "i": "3", "u": "42", '
                    '"s": "7"}}</tool_call>', tools)
    assert orjson.loads(found.calls[0].arguments) == {"n": 5.5, "i": 3, "u": 42, "s": "7"}
    assert "schema_coerced" in found.calls[0].repairs


def test_a_nullable_number_that_is_no_number_stays_as_written_and_is_named():
    tools = {"t": {"type": "object", "properties": {"n": {"type": ["number", "null"]}}}}
    found = extract('<tool_call>{"name": "t", "arguments": {"n": "five"}}</tool_call>', tools)
    assert orjson.loads(found.calls[0].arguments) == {"n": "five"}
    assert found.calls[0].schema_problems


def test_a_keyword_named_argument_is_a_named_repair():
    found = extract('[book(from="SFO", to="JFK")]', TOOLS)
    assert "keyword_argument_names" in found.calls[0].repairs


_ATEM_CALL = ('<atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter '
              'name="city">Paris</atem:parameter>\n</atem:invoke>\n</atem:function_calls>')


def test_muse_glimmer_reasoning_goes_to_the_reasoning_and_the_call_is_read():
    """vLLM muse_glimmer_tool_parser.py: the first message of a turn is ` to=self`."""
    found = extract(" to=self<|message|>Need the weather.<|eom|><|start|>assistant "
                    f"to=get_weather<|message|>{_ATEM_CALL}<|eom|>", TOOLS)
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [
        ("get_weather", {"city": "Paris"})]
    assert found.content == ""
    assert found.reasoning == "Need the weather."


def test_muse_glimmer_doubled_recipient_name_is_the_offered_tool():
    found = extract(f"<|start|>assistant to=get_weather.get_weather<|message|>"
                    f"{_ATEM_CALL.replace('get_weather', 'get_weather.get_weather')}<|eom|>",
                    TOOLS)
    assert [call.name for call in found.calls] == ["get_weather"]


@pytest.mark.parametrize("recipient", ["self", "user"])
def test_an_invoke_in_muse_glimmers_reasoning_or_answer_is_text(recipient):
    text = (f"<|start|>assistant to={recipient}<|message|>It would look like {_ATEM_CALL} "
            "here.<|eom|><|start|>assistant to=user<|message|>Paris is sunny.<|eot|>")
    found = extract(text, TOOLS)
    assert found.calls == []
    answer, reasoning = plain_answer(found.content, ("muse",))
    assert "Paris is sunny." in answer
    assert ("It would look like" in reasoning) == (recipient == "self")


def test_a_muse_glimmer_answer_loses_its_channel_tokens_and_keeps_its_words():
    answer, reasoning = plain_answer(" to=self<|message|>Think.<|eom|><|start|>assistant "
                                     "to=user<|message|>Hello there.<|eot|>", ("muse_glimmer",))
    assert (answer, reasoning) == ("Hello there.", "Think.")
    assert plain_answer("Say <|message|> first.", ("muse",)) == ("Say <|message|> first.", "")


@pytest.mark.parametrize(("text", "content"), [
    ("Let me check.\n\n" + _DSML_INVOKE, "Let me check."),
    (_DSML_INVOKE + "\nDone.", "\nDone."),
    (f"Let me check.\n\n<{D}tool_calls>\n{_DSML_INVOKE}\n</{D}tool_calls>\n\nIt is quick.",
     "Let me check.\n\nIt is quick."),
    (_DSML_INVOKE + f"\n</{D}tool_calls>", ""),
])
def test_deepseek_v4_reads_an_invoke_without_its_block_and_keeps_the_text_after(text, content):
    """SGLang deepseekv4_detector.py: a parsed invoke establishes the protocol boundary even
    when its outer wrapper is damaged; the text after the block is the answer's, joined to the
    text before it as written (`_extract_preamble`: `text[:start].removesuffix("\\n\\n")`,
    then `finish`'s remaining text after the block)."""
    found = extract(text, TOOLS)
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [
        ("get_weather", {"city": "Paris"})]
    assert found.content == content


@pytest.mark.parametrize("text", [
    f'Use <{D}invoke name="get_weather"> to call it.',
    f"Like this: {_DSML_INVOKE}",  # not at a line's start: shown
    _DSML_INVOKE.replace("get_weather", "delete_all"),  # no block: the name must be offered
    f"<{D}tool_calls> opens a block.\n" + _DSML_INVOKE,
    _DSML_INVOKE[:-12],  # cut
])
def test_an_unwrapped_dsml_invoke_that_is_not_a_call_stays_text(text):
    found = extract(text, TOOLS)
    assert found.calls == []
    assert found.content == text


_K2_CALL = ('<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
            '{"city": "Paris"}<|tool_call_end|>')


@pytest.mark.parametrize(("text", "content"), [
    ("Reasoning <|tool_calls_section_begin|> noise text " + _K2_CALL
     + "<|tool_calls_section_end|>", "Reasoning "),
    ("<|tool_calls_section_begin|>" + _K2_CALL + " more <|tool_calls_section_end|> Done",
     " Done"),
    ("I'll check the weather. <|tool_call_section_begin|>" + _K2_CALL
     + "<|tool_call_section_end|>", "I'll check the weather. "),
])
def test_kimi_k2_noise_between_section_markers_is_not_content(text, content):
    """vLLM tests/tool_parsers/test_kimi_k2_tool_parser.py: noise inside the section never
    reaches the content; the singular section marker is read as the plural."""
    found = extract(text, TOOLS)
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [
        ("get_weather", {"city": "Paris"})]
    assert found.content == content


@pytest.mark.parametrize("text", [
    "Kimi writes <|tool_calls_section_begin|> then " + _K2_CALL + " and closes it.",
    "<|tool_calls_section_begin|> noise <|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Par',
])
def test_what_looks_like_a_kimi_k2_section_stays_text(text):
    found = extract(text, TOOLS)
    assert found.calls == []


@pytest.mark.parametrize("truncated", [False, True])
def test_a_whole_apertus_list_cut_before_its_suffix_is_read(truncated):
    found = extract('<|tools_prefix|>[{"get_weather": {"city": "Paris"}}]', TOOLS,
                    truncated=truncated)
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [
        ("get_weather", {"city": "Paris"})]


def test_an_apertus_call_cut_by_length_is_never_half_read():
    text = '<|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"get_weather": {"ci'
    assert [orjson.loads(call.arguments) for call in extract(text, TOOLS, truncated=True).calls
            ] == [{"city": "Paris"}]  # the whole calls before the cut one, as documented
    assert extract('<|tools_prefix|>[{"get_weather": {"city": "Par', TOOLS,
                   truncated=True).calls == []


@pytest.mark.parametrize("text", [
    "<tool_call>Name:<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",  # label
    "<tool_call>example<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
    '<tool_call>{"name": "function_name", "arguments": {"city": "Paris"}}</tool_call>',
    '<tool_call>{"name": "<|im_end|>", "arguments": {}}</tool_call>',  # a stray token
    "<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
    '[TOOL_CALLS][{"name": "tool_name", "arguments": {}}]',
])
def test_a_name_is_never_made_from_text_that_is_no_calls_name(text):
    assert extract(text, TOOLS).calls == []


def test_an_unknown_but_plausible_name_in_a_trained_frame_is_delivered_as_before():
    found = extract('<tool_call>{"name": "get_forecast", "arguments": {"city": "Oslo"}}'
                    "</tool_call>", TOOLS)
    assert [call.name for call in found.calls] == ["get_forecast"]


NS = "]<]minimax[>["
_ORDER_TOOLS = {"create_order": {"type": "object", "properties": {
    "user_id": {"type": "integer"}, "urgent": {"type": "boolean"}, "note": {"type": "string"},
    "shipping": {"type": "object", "properties": {"city": {"type": "string"},
                                                  "zip": {"type": "integer"}}},
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer"}}}},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    "duplicate_demo": {"type": "object"}}}}
# vLLM tests/tool_parsers/test_minimax_m3_tool_parser.py build_order_call
_ORDER = (f'{NS}<tool_call>\n{NS}<invoke name="create_order">{NS}<user_id>42{NS}</user_id>'
          f"{NS}<urgent>true{NS}</urgent>{NS}<note>Please leave at front desk.{NS}</note>"
          f"{NS}<shipping>{NS}<city>Singapore{NS}</city>{NS}<zip>018956{NS}</zip>{NS}</shipping>"
          f"{NS}<items>{NS}<item>{NS}<sku>book-001{NS}</sku>{NS}<qty>2{NS}</qty>{NS}</item>"
          f"{NS}<item>{NS}<sku>pen-007{NS}</sku>{NS}<qty>5{NS}</qty>{NS}</item>{NS}</items>"
          f"{NS}<metadata>{NS}<source>mobile{NS}</source>{NS}<campaign>may-launch{NS}</campaign>"
          f"{NS}</metadata>{NS}<duplicate_demo>{NS}<tag>a{NS}</tag>{NS}<tag>b{NS}</tag>"
          f"{NS}</duplicate_demo>{NS}</invoke>\n{NS}</tool_call>")


def test_minimax_m3_nested_typed_values_are_typed_as_the_engine_types_them():
    found = extract("I will create it.\n" + _ORDER, _ORDER_TOOLS)
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [(
        "create_order", {"user_id": 42, "urgent": True, "note": "Please leave at front desk.",
                         "shipping": {"city": "Singapore", "zip": 18956},
                         "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-007", "qty": 5}],
                         "metadata": {"source": "mobile", "campaign": "may-launch"},
                         "duplicate_demo": {"tag": ["a", "b"]}})]
    assert found.content == "I will create it."


@pytest.mark.parametrize("text", [
    f"plain {NS}<tool_ca",
    f"{NS}<tool_call>\n{NS}</user_id> after error",
    f'MiniMax-M3 writes {NS}<invoke name="create_order"> inside its block.',
    _ORDER[:-40],  # cut
])
def test_what_looks_like_a_minimax_m3_call_stays_text(text):
    found = extract(text, _ORDER_TOOLS)
    assert found.calls == []
    assert found.content == text


# What is left of the older classes (issue 41, item 5)
@pytest.mark.parametrize(("text", "content"), [
    # a Gemma 4 call between prose (Ollama gemma4_test.go: content before a call)
    ("I will check.\n<|tool_call>call:get_weather{city:" + Q + "Paris" + Q + "}<tool_call|>\n"
     "Then I report.", "I will check.\nThen I report."),
    ("Checking the weather now. <|tool_call>call:get_weather{city:" + Q + "Paris" + Q
     + "}<tool_call|> I will report back.", "Checking the weather now.\nI will report back."),
    # a Qwen3-Coder call with text after it on the same line
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
     "</tool_call> I will report back.", "I will report back."),
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
     "</tool_call>I will report back.", "I will report back."),
    # Hunyuan's text after a call: kept, and joined to the text before as written, as
    # SGLang's hunyuan streams both (see test_text_after_a_call_is_joined_as_the_engine_joins_it)
    ("Checking.<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
     "<arg_value>Paris</arg_value>\n</tool_call>\n</tool_calls>Done.", "Checking.Done."),
    ("sure!" + _hy_block(_hy("get_weather", "city", "Paris")) + " Done.", "sure! Done."),
])
def test_a_call_between_prose_leaves_the_prose(text, content):
    found = extract(text, TOOLS)
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [
        ("get_weather", {"city": "Paris"})]
    assert found.content == content


# Text after a Hunyuan or DeepSeek call, joined as the engines join it (issue 41, item 5).
# vLLM's hy_v3/hy_v4, deepseek_v3/v31 and deepseek_v32/v4 parsers answer
# `content = model_output[:start]`: the text before the call section as written (its
# test_deepseekv4_tool_parser asserts "Let me check. ", the space kept), the rest dropped.
# SGLang keeps the text after: its hunyuan and deepseekv3 detectors stream it as written once
# the section ends, and its deepseekv4 detector, in both modes, answers the text before the
# block without the blank line the template writes there (`_extract_preamble`:
# `text[:start].removesuffix("\n\n")`) followed by what `finish` leaves after the block, as
# written. Here: the text before as written (DSML's blank line dropped), then the text
# after as written; space alone between two calls of one section is the section's.
_HY3 = ("<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
        "<arg_value>{}</arg_value>\n</tool_call>\n</tool_calls>")
_DS3 = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{{"city": "{}"}}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
_DS31 = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
         '{{"city": "{}"}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>')


def _dsml(block: str, *cities: str) -> str:
    invokes = "".join(_DSML_INVOKE.replace("Paris", city) + "\n" for city in cities)
    return f"<{D}{block}>\n{invokes}</{D}{block}>"


@pytest.mark.parametrize(("text", "content", "cities"), [
    # Hunyuan 3 (vLLM hy_v3: "I'll check.\n"; SGLang hunyuan streamed: then "\nDone.")
    ("I'll check.\n" + _HY3.format("Paris") + "\nDone.", "I'll check.\n\nDone.", ["Paris"]),
    # Hunyuan 4, suffixed tokens, two calls: the newline between them is the section's
    ("sure! " + _hy_block(_hy("get_weather", "city", "Paris") + "\n"
                          + _hy("get_weather", "city", "Rome")) + " Done.",
     "sure!  Done.", ["Paris", "Rome"]),
    # DeepSeek V3 / R1 (SGLang deepseekv3 streamed: the text after the section as written)
    ("Let me look." + _DS3.format("Paris") + "\n\nDone.", "Let me look.\n\nDone.", ["Paris"]),
    # DeepSeek V3.1 (vLLM test_deepseekv31_tool_parser: "normal text" + the section)
    ("normal text" + _DS31.format("Paris"), "normal text", ["Paris"]),
    ("Checking: " + _DS31.format("Paris") + "\nI will report back.",
     "Checking: \nI will report back.", ["Paris"]),
    # DeepSeek V4 and V3.2 DSML, parallel calls: the template's blank line before the block
    # is dropped (SGLang deepseekv4 `_extract_preamble`), the text after kept as written
    ("Let me check.\n\n" + _dsml("tool_calls", "Paris", "Rome") + "\n\nDone.",
     "Let me check.\n\nDone.", ["Paris", "Rome"]),
    ("Let me check.\n\n" + _dsml("function_calls", "Paris") + "\nDone.",
     "Let me check.\nDone.", ["Paris"]),
    # vLLM deepseek_v4 (test_extract_tool_calls): the text before, its space kept
    ("Let me check. " + _dsml("tool_calls", "Paris"), "Let me check. ", ["Paris"]),
])
def test_text_after_a_call_is_joined_as_the_engine_joins_it(text, content, cities):
    found = extract(text, TOOLS)
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [
        ("get_weather", {"city": city}) for city in cities]
    assert found.content == content


@pytest.mark.parametrize(("text", "content"), [
    # only DSML's template writes the blank line before its block: Hunyuan's stays
    ("I'll check.\n\n" + _HY3.format("Paris") + "\nDone.", "I'll check.\n\n\nDone."),
    # a blank line the DSML block does not follow is the text's
    ("Let me check.\n\nSee.\n" + _dsml("tool_calls", "Paris"), "Let me check.\n\nSee.\n"),
    # other formats' pieces are still trimmed at each seam and a line apart (Hermes)
    ("Checking. <tool_call>\n" + '{"name": "get_weather", "arguments": {"city": "Paris"}}'
     + "\n</tool_call> Done.", "Checking.\nDone."),
    # a DSML call quoted inline is a mention: the text stays whole, nothing joined
    ("Earlier I called " + _DS31.format("Paris") + " and it said sunny.", None),
])
def test_the_engines_join_is_only_for_their_formats(text, content):
    found = extract(text, TOOLS)
    if content is None:
        assert (found.calls, found.content) == ([], text)
        return
    assert [(call.name, orjson.loads(call.arguments)) for call in found.calls] == [
        ("get_weather", {"city": "Paris"})]
    assert found.content == content


@pytest.mark.parametrize("text", [
    "Earlier I called <|tool_call>call:get_weather{city:" + Q + "Paris" + Q
    + "}<tool_call|> and got 21°C.",
    "Qwen3-Coder writes `<function=get_weather><parameter=city>Paris</parameter></function>`.",
])
def test_a_call_mentioned_inside_a_sentence_stays_text(text):
    assert extract(text, TOOLS).calls == []


# The composite texts above, at module level, so that the streamed-equals-buffered property
# (tests/streamed_cases.py `corpus`) reads them too.
COMPOSED = [
    " to=self<|message|>Need the weather.<|eom|><|start|>assistant to=get_weather<|message|>"
    + _ATEM_CALL + "<|eom|>",
    "<|start|>assistant to=self<|message|>It would look like " + _ATEM_CALL
    + " here.<|eom|><|start|>assistant to=user<|message|>Paris is sunny.<|eot|>",
    "<|start|>assistant to=user<|message|>It would look like " + _ATEM_CALL + " here.<|eot|>",
    "Let me check.\n\n" + _DSML_INVOKE, _DSML_INVOKE + "\nDone.",
    f"Let me check.\n\n<{D}tool_calls>\n{_DSML_INVOKE}\n</{D}tool_calls>\n\nIt is quick.",
    "Reasoning <|tool_calls_section_begin|> noise text " + _K2_CALL + "<|tool_calls_section_end|>",
    "<|tool_calls_section_begin|>" + _K2_CALL + " more <|tool_calls_section_end|> Done",
    "I'll check the weather. <|tool_call_section_begin|>" + _K2_CALL + "<|tool_call_section_end|>",
    "I will create it.\n" + _ORDER,
    '<|tools_prefix|>[{"get_weather": {"city": "Paris"}}]',
]


def test_the_composed_texts_are_read_as_their_tests_say():
    read = [bool(extract(text, TOOLS | _ORDER_TOOLS).calls) for text in COMPOSED]
    assert [i for i, called in enumerate(read) if not called] == [1, 2]  # Muse's shown invokes
