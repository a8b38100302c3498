"""GLM-4.5 / 4.6 / 4.7 calls: parameters as key/value tags, values written as text.

    <tool_call>NAME
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>

Values are coerced later by the tool's schema; a string keeps its whitespace (vLLM's parser
keeps it too). A value ends at the `</arg_value>` the frame's structure shows to be its own
(see text_values): one followed by the next `<arg_key>` or by `</tool_call>`, so that a value
whose text says `</arg_value>`, `<tool_call>` or `</tool_call>` is read whole. A call without
parameters is `<tool_call>NAME</tool_call>`. A last value whose `</arg_value>` is missing
ends at the call's `</tool_call>` when no `</arg_value>` follows at all and only space, the end
or the next call follows that close (a repair, as vLLM's `glm45` reads it). A call whose
`</tool_call>` is missing before the next call is a repair, refused (`ambiguous_value`) when
the calls after it would leave a close standing: its last value may as well hold those calls,
quoted.

Poolside v1 (vLLM's `poolside_v1`) writes GLM's frame with tool names that hold spaces
(`<tool_call>search flights<arg_key>…`): such a name is read only when it is an offered tool's,
so that a sentence after `<tool_call>` never becomes a name. Two of the malformed frames
Ollama's GLM parser repairs are read where the repair is certain (`missing_tag`): a key whose
`</arg_key>` is missing right before its `<arg_value>` (`<arg_key>city<arg_value>Paris…`), and a
value whose `<arg_value>` is missing after its key (`<arg_key>city</arg_key>Paris</arg_value>`,
when that value holds no GLM tag and its close is followed by the next key or the call's end);
and a value whose `</arg_value>` is missing before the next key (`<arg_value>1<arg_key>days…`)
when that value holds no tag and the key is one the tool declares and the call has not given
yet. Any other malformed frame stays text: never a value holding the frame's own markup.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..framing.steps import OpenerMatches, unsure_frame
from ..opener_patterns import literals
from ..prose.markup import SHORT_TEXT, edges
from ..scan import Document
from ..text_values import Tail, ValueTags, value_end
from ..types import Frame
from .spec import FormatSpec

NAME = "glm"
_OPEN = "<tool_call>"
MARKERS = (_OPEN,)
# The name, then what can follow it in a call: a key, the close tag, or the end of the text.
_WORD = r"[^\s<>{}\[\]\"'`]{1,200}+"
# A name with spaces inside (Poolside's) is read only when it is an offered tool's.
_OPENER = re.compile(r"<tool_call>\s*+(" + _WORD + r"(?:[ \t]++" + _WORD + r"){0,8})"
                     r"(?=\s*+(?:<arg_key>|</tool_call>|\Z))")
# A key, and what opens its value; a `</arg_key>` missing right before `<arg_value>` is certain.
_KEY = re.compile(r"\s*+<arg_key>([^<>]{1,200}+)(</arg_key>)?\s*+<arg_value>")
# A key whose value's `<arg_value>` is missing (its text follows the key's close).
_BARE_KEY = re.compile(r"\s*+<arg_key>([^<>]{1,200}+)</arg_key>(?!\s*+<arg_value>)\n?")
_ANY_TAG = re.compile(r"</?(?:arg_key|arg_value|tool_call)>")
_VALUE_CLOSE = "</arg_value>"
_CLOSE = re.compile(r"\s*+</tool_call>")
# What a naive reading after a repaired call sees: calls and values opened and closed.
_STRUCTURE = re.compile(r"<(/?)(tool_call|arg_value)>")
_TAGS = ValueTags(
    tokens=re.compile(r"<(?:(arg_value>)|/arg_value>)"),
    next_item=_KEY,
    stray=re.compile(r"<(?:(/(?:arg_value|arg_key|tool_call)>)|tool_call>)"),
)


def _ends_or_calls(doc: Document, pos: int) -> bool:
    """Whether only space stands between `pos` and the end of the text or the next GLM call
    (a name after `<tool_call>`, not another format's `<tool_call>` that a value quotes)."""
    after = doc.skip_space(pos)
    return after >= len(doc.text) or _OPENER.match(doc.text, after) is not None


def _leaves_a_close(text: str, pos: int, sure: set[int]) -> bool:
    """Whether the calls from `pos` on, read as written (each value up to its first
    `</arg_value>`, each call up to its first `</tool_call>` or the next `<tool_call>`),
    leave a `</arg_value>` or `</tool_call>` that no call opened. `sure`: call openers from
    which a reading already found none (the reading from an opener is the same wherever
    it started), filled in on the way, so that a run of calls is read once."""
    in_call = in_value = False
    seen: list[int] = []
    for tag in _STRUCTURE.finditer(text, pos):
        closing, kind = tag[1] == "/", tag[2]
        if in_value:
            in_value = not (closing and kind == "arg_value")
        elif not closing:
            if kind == "tool_call":
                if tag.start() in sure:
                    break
                seen.append(tag.start())
                in_call = True
            else:
                in_value = in_call
        elif not in_call or kind == "arg_value":
            return True
        else:
            in_call = False
    sure.update(seen)
    return False


def _tail(doc: Document) -> Tail:
    """Where a frame ends after a value's close, when the call ends there: after
    `</tool_call>`, or (its close missing) where only space or the next call follows."""
    text = doc.text

    def tail(pos: int) -> int | None:
        close = _CLOSE.match(text, pos)
        if close is not None:
            return close.end()
        return pos if _ends_or_calls(doc, pos) else None
    return tail


def _unclosed_value_end(doc: Document, pos: int) -> int | None:
    """Where a value from `pos` whose `</arg_value>` is missing ends: at the call's first
    `</tool_call>`, when no `</arg_value>` follows `pos`, no tag the close could pair with
    (`<tool_call>`, a key or value tag) stands before it, and only space, the end of the text
    or the next call follows that close; else None (the frame stays text: never a value cut
    at a tag it may hold). Its frame is not closed: cut by `length`, it stays text."""
    text = doc.text
    close = text.find("</tool_call>", pos)
    if close < 0 or text.find("</arg_value>", pos) >= 0:
        return None
    if any(text.find(tag, pos, close) >= 0 for tag in ("<tool_call>", "<arg_key>",
                                                         "<arg_value>")):
        return None
    return close if _ends_or_calls(doc, close + len("</tool_call>")) else None


def _bare_value(doc: Document, pos: int, tail: Tail) -> tuple[str, str, int] | None:
    """A key at `pos` whose value's `<arg_value>` is missing: (key, value, where the value's
    `</arg_value>` ends), when the value holds no GLM tag and its close is followed by the next
    key or the call's end; else None. The template's newline after the key is not the value's."""
    text = doc.text
    key = _BARE_KEY.match(text, pos)
    if key is None:
        return None
    close = text.find(_VALUE_CLOSE, key.end())
    if close < 0 or _ANY_TAG.search(text, key.end(), close) is not None:
        return None
    after = close + len(_VALUE_CLOSE)
    if (_KEY.match(text, after) is None and _BARE_KEY.match(text, after) is None
            and tail(after) is None):
        return None
    return key[1].strip(), text[key.end():close], after


def _cut_before_next_key(doc: Document, pos: int, name: str, given: set[str]) -> int | None:
    """Where a value from `pos` whose `</arg_value>` is missing ends: right before the next
    `<arg_key>`, when the text up to it holds no tag and that key is one the tool declares
    and the call has not given yet (then the value cannot hold it); else None."""
    text = doc.text
    found = _ANY_TAG.search(text, pos)
    if found is None or found[0] != "<arg_key>":
        return None
    key = _KEY.match(text, found.start())
    schema = doc.schemas.get(name)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if key is None or not isinstance(properties, dict):
        return None
    following = key[1].strip()
    if following in given or following not in properties:
        return None
    return found.start()


def find_frames(doc: Document) -> Iterator[Frame]:
    """Each `<tool_call>NAME` followed by `<arg_key>`/`<arg_value>` pairs."""
    text = doc.text
    tail = _tail(doc)
    openers = OpenerMatches(doc, _OPENER, _OPEN)
    sure: set[int] = set()  # see _leaves_a_close
    for match in openers:
        start = match.start()
        args: list[tuple[str, str]] = []
        pos = match.end()
        balanced = complete = True
        last_unclosed = False  # the last value's close is missing (see _unclosed_value_end)
        repairs: tuple[str, ...] = ()
        name = match[1]
        if (" " in name or "\t" in name) and name not in doc.tools:
            continue  # words after `<tool_call>`, not a name
        while True:
            key = _KEY.match(text, pos)
            if key is None:
                bare = _bare_value(doc, pos, tail)
                if bare is None:
                    break
                args.append(bare[:2])
                pos, repairs = bare[2], (*repairs, "missing_tag")
                continue
            if not doc.spend():
                return  # out of budget: better no frame than one with parameters missing
            if key[2] is None:
                repairs = (*repairs, "missing_tag")
            found = value_end(doc, key.end(), _TAGS, tail)
            if found is None or not found.balanced:
                cut = _cut_before_next_key(doc, key.end(), name, {k for k, _ in args} | {
                    key[1].strip()})
                if cut is not None:
                    args.append((key[1].strip(), text[key.end():cut]))
                    pos, repairs = cut, (*repairs, "missing_value_close")
                    continue
            unclosed = None if found is not None else _unclosed_value_end(doc, key.end())
            if unclosed is not None:  # the template's newline before the close is not the value's
                value = text[key.end():unclosed]
                args.append((key[1].strip(), value[:-1] if value.endswith("\n") else value))
                pos, repairs = unclosed, (*repairs, "missing_value_close")
                last_unclosed = True
                break
            if found is None:
                complete = False
                break
            args.append((key[1].strip(), text[key.end():found.at]))
            balanced = balanced and found.balanced
            pos = found.at + len(_VALUE_CLOSE)
        if not (complete and balanced):
            if not doc.budget.exhausted:
                yield unsure_frame(doc, NAME, start, name, complete)
            return
        close = _CLOSE.match(text, pos)
        if close is not None:
            yield Frame(NAME, start, close.end(), closed=not last_unclosed, name=name,
                        text_args=tuple(args), repairs=tuple(dict.fromkeys(repairs)))
            openers.taken_to = close.end()
        elif _ends_or_calls(doc, pos):
            if _leaves_a_close(text, pos, sure):
                yield unsure_frame(doc, NAME, start, name, True)
                return
            yield Frame(NAME, start, pos, closed=False, name=name, text_args=tuple(args),
                        repairs=(*dict.fromkeys(repairs), "missing_close_tag"))
            openers.taken_to = pos
        # Anything else after the parameters: not a frame we understand; it stays text.


# Ling's role tokens around a plain answer (`ling3` reads GLM's calls): `<role>ASSISTANT</role>`
# opening it, `<|role_end|>` ending it.
_ROLE = re.compile(r"\s*+<role>ASSISTANT</role>")
_ROLE_END = re.compile(r"<\|role_end\|>\s*+\Z")
# What every piece of markup `answer_markup` looks for holds (none in a plain answer).
_MARKUP_NEEDLE = '<'


def answer_markup(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Ling's role token at the start of the answer and its end token at its end."""
    if len(text) <= SHORT_TEXT and _MARKUP_NEEDLE not in text:  # (every token holds it)
        return [], []
    return edges(text, _ROLE, _ROLE_END), []


SPEC = FormatSpec(
    name=NAME, find_frames=find_frames, markers=MARKERS,
    # and Ling's role tokens
    openers=literals("<tool_call>", "<role>ASSISTANT</role>", "<|role_end|>"),
    vllm=("glm45", "glm47", "poolside_v1"),
    sglang=("glm", "glm45", "glm47", "ling3", "poolside_v1", "spark25"),
    llama_cpp=("GLM 4.5",),
    aliases=("glm4_moe",),
    doctor_parser="glm45",
    thinking_opened=("glm47",),
    doctor_markers=(("<arg_key>", "glm45"),),
    answer_markup=answer_markup,
)
