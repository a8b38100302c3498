"""Nothing the model did not write (issue 41, item 2): over the project's whole corpus (every
text the tool-call and streamed tests use, `tests.streamed_cases.corpus`), every call
delivered, read alone and through the turn, has a name and arguments whose every key and
value the model wrote: literally, or once its escapes are read (JSON's, Python's, a string
holding JSON), or by a coercion that cannot be doubted (`"3"` for an integer parameter is
3, `True` is `true`); a name matched to an offered tool differs from the written one only in
case and separators (`tool_name_matched`)."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import pytest

from proxy.toolcalls import extract
from proxy.turn.core import Answer, UpstreamReply, decide
from tests.streamed_cases import TOOL_NAMES, answers_for, corpus, plans

# The streamed tests' tools, typed where the corpus's calls give values to coerce.
TYPED: dict[str, Any] = {name: {"type": "object"} for name in TOOL_NAMES}
TYPED.update({
    "get_weather": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"},
        "metric": {"type": "boolean"}}},
    "read": {"type": "object", "properties": {"path": {"type": "string"},
                                              "limit": {"type": "number"}}},
    "count": {"type": "object", "properties": {"n": {"type": "integer"}}},
})

_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_PY_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"
                        r"|N\{([A-Z0-9 \-]+)\}|([\\'\"abfnrtv]))")
_PY_ADJACENT = re.compile(r"([\"'])\s+\1")  # "a" "b": one string, "ab"
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "a": "\a", "v": "\v"}


def _pairs(text: str) -> str:
    """Surrogate pairs an escape wrote as two code units, as the one character they are."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _json_unescaped(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code, char = match.groups()
        return chr(int(code, 16)) if code else _SIMPLE.get(char, char)
    return _pairs(_JSON_ESCAPE.sub(one, text))


def _python_unescaped(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        *codes, named, char = match.groups()
        code = next((c for c in codes if c), None)
        if named:
            return unicodedata.lookup(named)
        return chr(int(code, 16)) if code else _SIMPLE.get(char, char)
    return _pairs(_PY_ESCAPE.sub(one, _PY_ADJACENT.sub("", text)))


def readings(text: str) -> list[str]:
    """The model's text and what its escapes say, once and twice (a string holding JSON)."""
    once = [_json_unescaped(text), _python_unescaped(text)]
    return [text, *once, *(_json_unescaped(t) for t in once)]


def _written(value: Any, texts: list[str]) -> bool:
    """Whether a scalar `value` is in one of `texts`, as written or coerced without doubt."""
    if value == "" or (value is None and any("null" in t or "None" in t for t in texts)):
        return True
    if isinstance(value, bool):
        spelled = ("true", "True", "TRUE") if value else ("false", "False", "FALSE")
    elif isinstance(value, int):
        spelled = (str(value),)
    elif isinstance(value, float):
        spelled = (repr(value), str(value), f"{value:g}", str(int(value)) * value.is_integer())
    elif isinstance(value, str):
        spelled = (value,)
    else:
        return False
    return any(form and form in text for form in spelled for text in texts)


def _leaves(value: Any, into: list[Any]) -> list[Any]:
    """Every key and scalar value of decoded arguments."""
    if isinstance(value, dict):
        for key, item in value.items():
            into.append(key)
            _leaves(item, into)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, into)
    else:
        into.append(value)
    return into


def _name_written(name: str, texts: list[str], matched: bool) -> bool:
    if any(name in text for text in texts):
        return True
    if not matched:
        return False
    loose = r"[\s_.\-]?".join(re.escape(part) for part in re.split(r"[_.\-]", name) if part)
    return any(re.search(loose, text, re.IGNORECASE) for text in texts)


def not_written(text: str, name: str, arguments: str, matched: bool) -> list[Any]:
    """What of one delivered call the model did not write in `text` (empty: nothing)."""
    texts = readings(text)
    missing: list[Any] = [] if _name_written(name, texts, matched) else [name]
    decoded = json.loads(arguments)  # json keeps big integers whole (orjson would not)
    return missing + [leaf for leaf in _leaves(decoded, []) if not _written(leaf, texts)]


TEXTS = corpus()


def test_the_corpus_is_not_vacuous():
    assert len(TEXTS) > 2000
    assert sum(len(extract(text, TYPED).calls) for text in TEXTS) > 300


@pytest.mark.parametrize("half", [0, 1])
def test_every_call_read_from_the_corpus_is_written_by_the_model(half):
    wrong = []
    for text in TEXTS[half::2]:
        for call in extract(text, TYPED).calls:
            missing = not_written(text, call.name, call.arguments,
                                  "tool_name_matched" in call.repairs)
            if missing:
                wrong.append((text[:160], call.name, missing[:3]))
    assert wrong == []


def test_every_call_the_turn_delivers_from_the_corpus_is_written_by_the_model():
    """Through the turn (thinking split off, calls from the reasoning, a cut answer): the
    chat front's buffered plan over each text's answers (`answers_for`)."""
    plan, _ = plans("chat")
    wrong = delivered = 0
    examples = []
    for text in TEXTS:
        for completion in answers_for(text):
            decision = decide(plan, UpstreamReply(200, {}, b"", parsed=completion))
            if not isinstance(decision, Answer):
                continue
            matched = {r.tool for r in decision.outcome.repairs
                       if r.repair == "tool_name_matched"}
            for choice in decision.result.choices:
                for call in choice.calls:
                    delivered += 1
                    missing = not_written(text, call.name, call.arguments, call.name in matched)
                    if missing:
                        wrong += 1
                        examples.append((text[:160], call.name, missing[:3]))
    assert delivered > 1000
    assert (wrong, examples[:5]) == (0, [])


@pytest.mark.parametrize(("text", "name", "arguments"), [
    ('<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>', "read",
     '{"path": "/b"}'),  # a value changed
    ('<tool_call>{"name": "read", "arguments": {"path": "/a"}}</tool_call>', "read",
     '{"path": "/a", "mode": "r"}'),  # a key added
    ('<tool_call>{"name": "read", "arguments": {}}</tool_call>', "write", "{}"),  # renamed
    ("[count(n=3)]", "count", '{"n": 4}'),
    ("[count(n=3)]", "count", '{"n": true}'),
    ('{"name": "get_weather", "arguments": {"city": "Par"}}', "get_weather",
     '{"city": "Paris"}'),  # a value completed
])
def test_the_check_sees_what_the_model_did_not_write(text, name, arguments):
    assert not_written(text, name, arguments, matched=False) != []


@pytest.mark.parametrize(("text", "name", "arguments", "matched"), [
    ('<tool_call>{"name": "write", "arguments": {"text": "a\\nb \\u00e9"}}</tool_call>',
     "write", '{"text": "a\\nb é"}', False),
    ("[write(text='tab\\there')]", "write", '{"text": "tab\\there"}', False),
    ('{"content": "{\\"read\\": {\\"path\\": \\"C:\\\\\\\\x\\"}}"}', "read",
     '{"path": "C:\\\\x"}', False),  # double-encoded
    ("<function=count>\n<parameter=n>\n3\n</parameter>", "count", '{"n": 3}', False),
    ("[Get_Weather(metric=True)]", "get_weather", '{"metric": true}', True),
])
def test_the_check_takes_escapes_and_certain_coercions_as_written(text, name, arguments,
                                                                   matched):
    assert not_written(text, name, arguments, matched) == []
