"""Thinking written into the content: a leading `<think>…</think>` (or another family's
block: Seed-OSS's `<seed:think>`, Mistral's `[THINK]`, Command's `<|START_THINKING|>`, Kimi
K3's `<|open|>think<|sep|>`, Gemma 4's `<|channel>thought`, gpt-oss's Harmony analysis
channel `<|channel|>analysis<|message|>…<|end|>`) that a server without a reasoning parser
leaves in the content, or the text before a lone closing tag (the template opened the block,
see `closers`). With `reasoning_from_content` (the default) it is the reasoning, not the
answer: moved out of a finished completion (`answer_thinking`), routed to the reasoning as it
streams (`ThinkRouter`), and a leading block moved out of the history a client sends back
(`move_history_thinking`). A leading block counts only where its opening tag starts the
content; a lone closer only where it is not a mention (`closers.lone_close`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base.frozen import quick_init, replaced
from .assemble import CONTENT, REASONING
from .closers import (
    BLOCKED,
    FAMILIES,
    LONGEST_CLOSER,
    MAY_CLOSE,
    Close,
    lone_close,
    partial_closer,
)

if TYPE_CHECKING:
    from .result import Outcome

_HARMONY_ANALYSIS = "<|channel|>analysis<|message|>"
_TAGS = {**dict(FAMILIES),
         _HARMONY_ANALYSIS: "<|end|>", "<|start|>assistant" + _HARMONY_ANALYSIS: "<|end|>"}
_OPENING = re.compile(r"\s*+(" + "|".join(map(re.escape, _TAGS)) + ")")
_LONGEST_OPENER = max(map(len, _TAGS))


def leading_thinking(content: str) -> tuple[str, str] | None:
    """(the thinking, the answer after it) when `content` opens with a think block, else
    None. Both are stripped of the space around them; a block never closed (cut by length
    while thinking) is all thinking."""
    opening = _OPENING.match(content)
    if opening is None:
        return None
    close = content.find(_TAGS[opening[1]], opening.end())
    if close < 0:
        return content[opening.end():].strip(), ""
    return (content[opening.end():close].strip(),
            content[close + len(_TAGS[opening[1]]):].lstrip())


# The log's word for each way thinking was found in the content.
BLOCK = "reasoning_from_content"
LONE = "reasoning_before_lone_close"
OPENED = "reasoning_opened_by_template"


@quick_init
@dataclass(frozen=True)
class ThinkingRule:
    """How a content without a leading block is read. `lone_close`: text before a lone
    closer is the reasoning (False: the template never opens a block, such text is the
    answer's); `opened`: the template surely opens one, so with no closer at all the whole
    output is reasoning; `cut_opened`: that, only for an output cut by `length`; `learns`:
    `auto`, whose `cut_opened` comes from a lone closer seen before from the same model
    (`ThinkingMemory`)."""

    lone_close: bool = True
    opened: bool = False
    cut_opened: bool = False
    learns: bool = False


LONE_CLOSE_RULE = ThinkingRule()  # `auto` before anything is learned


def thinking_rule(setting: str, seen: bool, thinking_off: bool,
                  template_opens: bool = False) -> ThinkingRule:
    """The rule for a `thinking_opened_by_template` setting (`auto`, `true`, `false`),
    whether this model was seen closing a lone block before, whether the request switches
    thinking off (then the template opens none), and whether its configured format says the
    template opens the block (a format spec's `thinking_opened`: Kimi K2.6/K3, GLM-4.7,
    DeepSeek V4). With `auto`, either of the last two makes an output cut by `length` before
    any closer all thinking, as it is once its closer came."""
    if setting == "false":
        return ThinkingRule(lone_close=False)
    if thinking_off:
        return ThinkingRule()
    if setting == "true":
        return ThinkingRule(opened=True, cut_opened=True)
    return ThinkingRule(cut_opened=seen or template_opens, learns=True)


def thinking_switched_off(body: Any) -> bool:
    """Whether a chat request switches the model's thinking off in its template's words
    (`chat_template_kwargs`: `enable_thinking` or `thinking` false): then the template
    opens no block, whatever `thinking_opened_by_template` says."""
    kwargs = body.get("chat_template_kwargs") if isinstance(body, dict) else None
    return isinstance(kwargs, dict) and any(kwargs.get(key) is False
                                            for key in ("enable_thinking", "thinking"))


class ThinkingMemory:
    """What `auto` learned of each model's template, per process (each worker learns for
    itself), at most `size` models of each kind: the models seen closing a template-opened
    block (a lone closer: `knows`), and those seen finishing an answer with no closer at all
    (`answers_plainly`: the template opens no block, so their text may flow live)."""

    def __init__(self, size: int = 1024) -> None:
        self._seen: dict[str, None] = {}
        self._plain: dict[str, None] = {}
        self._size = size

    def knows(self, model: str) -> bool:
        """Whether `model` was seen closing a lone block."""
        return model in self._seen

    def answers_plainly(self, model: str) -> bool:
        """Whether `model` was seen finishing an answer with no closer (and never one)."""
        return model in self._plain and model not in self._seen

    def learn(self, model: str) -> None:
        """`model` closed a lone block (the oldest model is forgotten past `size`)."""
        self._remember(self._seen, model)

    def learn_plain(self, model: str) -> None:
        """`model` finished an answer without closing a template-opened block."""
        self._remember(self._plain, model)

    def _remember(self, models: dict[str, None], model: str) -> None:
        if model in models:
            return
        if len(models) >= self._size:
            models.pop(next(iter(models)), None)
        models[model] = None


def learned_rule(rule: ThinkingRule, model: str, memory: ThinkingMemory) -> ThinkingRule:
    """`rule` with what `thinking_opened_by_template: auto` learned of `model`: seen closing
    a lone block before, its template opens thinking (a cut output is all thinking); seen
    finishing answers with no closer, it opens none (its text is the answer's, and flows live
    in the streamed mode, as with `false`). `rule` itself when there is nothing to add."""
    if not rule.learns:
        return rule
    if memory.knows(model):
        return rule if rule.cut_opened else replaced(rule, cut_opened=True)
    if memory.answers_plainly(model):
        return replaced(rule, lone_close=False)
    return rule


_FINISHED = frozenset({"stop", "tool_calls"})  # an answer the model ended itself


def unseen(rule: ThinkingRule, model: str, memory: ThinkingMemory) -> bool:
    """Whether `auto` has learned nothing yet of `model`'s template."""
    return rule.learns and not memory.knows(model) and not memory.answers_plainly(model)


def learn_opened(model: str, opened: bool | None, memory: ThinkingMemory) -> None:
    """What the upstream's profile says of `model`'s generation prompt, as if learned from
    an answer: it opens thinking, or it opens none (None: the server did not say)."""
    if opened is True:
        memory.learn(model)
    elif opened is False:
        memory.learn_plain(model)


def learn_from(rule: ThinkingRule, model: str, outcome: Outcome | None,
               memory: ThinkingMemory) -> None:
    """Remember `model` when its answer closed a template-opened block, or when it finished
    an answer with no closer at all (`auto`; a request that switched thinking off teaches
    nothing: its rule does not learn)."""
    if not rule.learns or outcome is None:
        return
    found = {r.repair for r in outcome.repairs if r.format == "content"}
    if LONE in found:
        memory.learn(model)
    elif (rule.lone_close and OPENED not in found
          and outcome.finish_before and all(f in _FINISHED for f in outcome.finish_before)):
        memory.learn_plain(model)


def answer_thinking(content: str, rule: ThinkingRule, finish: str | None = None,
                    ) -> tuple[str, str, str] | None:
    """(the thinking, the answer, how it was found: BLOCK, LONE or OPENED) for a finished
    content, else None; both stripped of the space around them."""
    split = leading_thinking(content)
    if split is not None:
        return (*split, BLOCK)
    if not rule.lone_close:
        return None
    close = lone_close(content)
    if isinstance(close, Close):  # (BLOCKED: no lone close; the rest of the rule holds)
        return content[:close.start].strip(), content[close.end:].lstrip(), LONE
    if rule.opened or (rule.cut_opened and finish == "length"):
        return content.strip(), "", OPENED
    return None


def _could_open(text: str) -> bool:
    """Whether `text` (space, then the start of a tag) may still become an opening."""
    rest = text.lstrip()
    return any(tag.startswith(rest) for tag in _TAGS) and len(rest) < _LONGEST_OPENER


class ThinkRouter:
    """One choice's content as it streams: pieces of it go out as reasoning while inside a
    leading think block (or, `rule.opened`, before the first lone closer), as content after
    it (or throughout, when there is no thinking to look for). What it lets out always
    agrees with `answer_thinking` on the whole text: the space around the thinking and the
    answer's leading space are held back (and dropped once they turn out to be edges), so is
    what may be the start of a closing tag, and, when a lone closer may still come but the
    template is not known to open a block, all of the content until that closer."""

    def __init__(self, rule: ThinkingRule | None = None) -> None:
        self._rule = rule or ThinkingRule(lone_close=False)
        self._state = "start"  # start → think | lone | opened → after → content
        self._buffer = ""
        self._close = ""
        self._thinking = False  # some of the thinking has gone out (its leading space is gone)
        self._before: _BeforeClose | None = None  # lone/opened: the content so far

    @property
    def passes_through(self) -> bool:
        """Whether the content is past its think block with nothing held: `push(piece)`
        then gives back `piece` as content, whole (or nothing, for an empty piece)."""
        return self._state == "content" and not self._buffer

    def push(self, piece: str) -> list[tuple[str, str]]:
        """Add `piece`; the (kind, text) that may go out now."""
        self._buffer += piece
        out: list[tuple[str, str]] = []
        while True:
            state, buffer = self._state, self._buffer
            if state == "content":
                self._buffer = ""
                return [*out, (CONTENT, buffer)] if buffer else out
            if state == "start":
                opening = _OPENING.match(buffer)
                if opening is None:
                    if _could_open(buffer):
                        return out
                    self._state = ("opened" if self._rule.opened else "lone"
                                   if self._rule.lone_close else "content")
                    continue
                self._close, self._state = _TAGS[opening[1]], "think"
                self._buffer = buffer[opening.end():]
                continue
            if state == "think":
                if not self._thinking:
                    buffer = self._buffer = buffer.lstrip()
                close = buffer.find(self._close)
                if close >= 0:
                    text = buffer[:close].rstrip()
                    if text:
                        out.append((REASONING, text))
                    self._state, self._buffer = "after", buffer[close + len(self._close):]
                    continue
                keep = _partial_suffix(buffer, self._close)
                text = buffer[:len(buffer) - keep].rstrip()
                if text:
                    out.append((REASONING, text))
                    self._buffer = buffer[len(text):]
                    self._thinking = True
                return out
            if state in ("lone", "opened"):
                if not self._lone(buffer, out):
                    return out
                continue
            # "after": the answer begins at its first character that is not space
            rest = buffer.lstrip()
            if not rest:
                self._buffer = ""
                return out
            self._state, self._buffer = "content", rest

    def _lone(self, buffer: str, out: list[tuple[str, str]]) -> bool:
        """Before a lone closer: whether the closer came (the state moved on to the answer
        after it). With `rule.opened` the thinking flows meanwhile."""
        if self._before is None:
            self._before = _BeforeClose(self._state == "opened")
        thinking, after = self._before.push(buffer)
        self._buffer = ""
        if thinking:
            out.append((REASONING, thinking))
        if after is None:
            return False
        self._state, self._buffer, self._before = "after", after, None
        return True


class _BeforeClose:
    """A content while a lone closer may still come: kept as its pieces, joined only when a
    closer may stand in what came (so a long thinking costs each piece, not the whole text
    again). Says where the closer is, and, `live`, the thinking that may go out before it:
    what `answer_thinking` will read as thinking, but the space at its end."""

    _TAIL = 2 * LONGEST_CLOSER + 72  # reaches back over a closer and the context it needs

    def __init__(self, live: bool) -> None:
        self._parts: list[str] = []
        self._size = 0
        self._tail = ""
        self._scan = 0  # no closer candidate begins before this (BLOCKED: none can come)
        self._pending = False  # a candidate waits for its context
        self._live = live
        self._unsent = ""  # live: the text from `_done` on
        self._done = 0  # live: where the text that went out (or was dropped as space) ends
        self._sent = False

    def push(self, piece: str) -> tuple[str, str | None]:
        """Add `piece`: (the thinking that may go out now, the text after the closer once
        it has come, else None)."""
        self._parts.append(piece)
        self._size += len(piece)
        window = self._tail + piece
        self._tail = window[-self._TAIL:]
        if self._live:
            self._unsent += piece
        limit = self._size
        if self._scan != BLOCKED and (self._pending or MAY_CLOSE.search(window)
                                      or partial_closer(window)):
            text = "".join(self._parts)
            self._parts = [text]
            found = lone_close(text, self._scan, whole=False)
            if isinstance(found, Close):
                return self._out(found.start, final=True), text[found.end:]
            if found == BLOCKED:
                self._scan = BLOCKED
            else:
                limit = len(text) - partial_closer(text) if found is None else found
                self._scan, self._pending = limit, found is not None
        elif self._scan != BLOCKED:
            self._scan = self._size
        return (self._out(limit) if self._live else ""), None

    def _out(self, limit: int, final: bool = False) -> str:
        """The thinking up to `limit` not yet out (all of it, `final`, from the text)."""
        if not self._live:
            return "".join(self._parts)[:limit].strip() if final else ""
        text = self._unsent[:limit - self._done]
        if not self._sent:
            kept = text.lstrip()
            self._done += len(text) - len(kept)
            self._unsent = self._unsent[len(text) - len(kept):]
            text = kept
        out = text.rstrip()
        if out:
            self._sent = True
            self._done += len(out)
            self._unsent = self._unsent[len(out):]
        return out


def _partial_suffix(text: str, tag: str) -> int:
    """How many characters at the end of `text` may be the start of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def move_history_thinking(messages: Any) -> bool:
    """Move a leading think block out of each assistant message's content in the history,
    into its `reasoning_content` (unless it has a reasoning of its own), as the proxy's own
    answers had it; whether any message changed."""
    changed = False
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if (not isinstance(content, str) or message.get("reasoning_content")
                or message.get("reasoning")):
            continue
        split = leading_thinking(content)
        if split is None:
            continue
        message["reasoning_content"], message["content"] = split
        changed = True
    return changed
