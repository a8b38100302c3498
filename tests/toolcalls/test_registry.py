"""Which formats are tried, in what order, per model; and the diagnostics of a budget spent."""

from __future__ import annotations

import pytest

from proxy.toolcalls import FORMATS, UnknownFormat, extract, resolve
from proxy.toolcalls.registry import formats_for_model

TOOLS = {"read": {}}
HERMES = '<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>'


def test_auto_is_every_format_once_in_default_order():
    assert [name for name, _ in resolve(["auto"])] == list(FORMATS)
    assert next(name for name, _ in resolve(["glm", "auto"])) == "glm"
    assert len(resolve(["auto", "hermes", "auto"])) == len(FORMATS)


def test_shape_formats_come_last_in_the_default_order():
    assert list(FORMATS)[-4:] == ["pythonic", "code_fence", "bare_json", "improvised"]


@pytest.mark.parametrize(("alias", "name"), [
    ("qwen3_coder", "qwen_xml"), ("llama3_json", "llama3"), ("glm45", "glm"),
    ("deepseek_v31", "deepseek"), ("openai", "harmony"), ("hunyuan_a13b", "tool_calls_tag"),
    ("llama4_pythonic", "pythonic"), ("kimi_k2", "kimi_k2"), ("minimax", "tool_calls_tag"),
    ("minimax_m2", "minimax_m2"),
    ("deepseek_v32", "deepseek_dsml"), ("phi4_mini_json", "phi4_mini"), ("seed_oss", "qwen_xml")])
def test_vllm_parser_names_are_accepted(alias, name):
    assert [n for n, _ in resolve([alias])] == [name]


@pytest.mark.parametrize(("alias", "names"), [
    ("ernie45", ["hermes"]), ("granite-20b-fc", ["granite_20b_fc"]), ("longcat", ["longcat"]),
    ("step3", ["step3"]), ("apertus", ["apertus"]), ("gemma4", ["gemma4"]),
    ("minimax_m1", ["tool_calls_tag"]),
    ("xlam", ["bare_json", "code_fence", "hermes", "mistral"])])
def test_more_vllm_parser_names_are_accepted(alias, names):
    assert [n for n, _ in resolve([alias])] == names


def test_unknown_format_is_a_clear_error():
    with pytest.raises(UnknownFormat, match="nope"):
        resolve(["nope"])


def test_configured_formats_limit_what_is_read():
    assert extract(HERMES, TOOLS, formats=["glm", "mistral"]).calls == []
    assert [c.format for c in extract(HERMES, TOOLS, formats=["hermes"]).calls] == ["hermes"]


def test_the_first_format_listed_wins_an_overlap():
    text = '{"name": "read", "arguments": {"path": "/a"}}'
    assert [c.format for c in extract(text, TOOLS, formats=["bare_json"]).calls] == ["bare_json"]
    assert [c.format for c in extract(text, TOOLS).calls] == ["bare_json"]
    fenced = f"```json\n{text}\n```"
    assert [c.format for c in extract(fenced, TOOLS).calls] == ["code_fence"]


def test_formats_for_model_picks_the_first_matching_glob():
    by_glob = {"*qwen3*": ["qwen_xml", "hermes"], "gpt-oss-*": ["harmony"], "*": ["auto"]}
    assert formats_for_model("Qwen/Qwen3-Coder-30B", by_glob) == ("qwen_xml", "hermes")
    assert formats_for_model("gpt-oss-120b", by_glob) == ("harmony",)
    assert formats_for_model("mistral-small", by_glob) == ("auto",)
    assert formats_for_model("mistral-small", {"*qwen*": ["hermes"]}) == ("auto",)


def test_formats_for_model_rejects_unknown_names():
    with pytest.raises(UnknownFormat):
        formats_for_model("m", {"m": ["nope"]})


def test_megabytes_of_openers_are_reported_not_read():
    text = "<tool_call>{\"" * 50_000 + HERMES
    found = extract(text, TOOLS)
    assert found.content == text
    assert "scan_budget_exhausted" in {x.reason for x in found.left_as_text}


def test_a_response_with_many_real_calls_is_read_whole():
    text = "\n".join([HERMES] * 200)
    found = extract(text, TOOLS)
    assert len(found.calls) == 200
    assert found.content == ""
    assert all(x.reason != "scan_budget_exhausted" for x in found.left_as_text)


def test_a_parser_bug_leaves_the_text_and_the_other_formats_alone(monkeypatch):
    def broken(doc):
        yield from ()
        raise RuntimeError("bug")

    monkeypatch.setitem(FORMATS, "broken", broken)
    found = extract(HERMES, TOOLS, formats=["broken", "hermes"])
    assert [c.name for c in found.calls] == ["read"]
    assert [(x.format, x.reason) for x in found.left_as_text] == [("broken", "parser_error")]
