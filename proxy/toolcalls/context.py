"""Where a frame sits in the text decides whether it is a call or a mention of one.

A parser recognises a frame by its own syntax; whether the model *made* the call or *showed*
it is told by the prose around it, the same way for every format:

- inside inline code (`` `<tool_call>{…}</tool_call>` ``): a mention;
- inside a fenced code block, unless that block ends the text and is not introduced as an
  example: an example shown to the user;
- in quotation marks ("<tool_call>…</tool_call>"): a mention;
- in the middle of a line of prose, with words before it and after it on the same line
  ("Earlier I called <tool_call>…</tool_call> and it returned 21°C"), or the punctuation
  that closes the sentence after it ("Earlier I called <tool_call>…</tool_call>."): a
  mention, unless the frame has markers of its own and stands between two sentences;
- at the start of a line whose sentence goes on after it ("<tool_call>…</tool_call> is
  how a call looks"): a mention;
- introduced as an example by the line(s) before it ("Here is an example request:"); formats
  recognised by shape alone (bare JSON, pythonic lists) are also refused after a hypothetical
  lead-in ("The call would be:").

Costs stay linear: fence lines are counted (str.count) once through the text, and the rest is
looked for in a bounded window around each frame.
"""

from __future__ import annotations

import re

from .registry import MESSAGE_HEADERS

# Words that introduce an example rather than an action.
# Words that introduce an example rather than an action, in a line that introduces what
# follows (it ends with a colon): "Here is an example request:", "The syntax looks like this:".
_EXAMPLE_CUE = re.compile(
    r"\b(?:for example|examples?|for instance|e\.g\.|such as|samples?|like this|like so|"
    r"looks? like|would look|templates?|syntax|schemas?|(?:the|this|that) format|"
    r"formats? (?:is|are|was|were)|usage|signature)\b", re.IGNORECASE)
# Words that make a fence an example whatever the line introducing it ends with.
_STRONG_CUE = re.compile(r"\b(?:for example|examples?|for instance|e\.g\.|samples?)\b",
                         re.IGNORECASE)
# Hypothetical lead-ins, for frames recognised by their shape alone.
_HYPOTHETICAL_CUE = re.compile(
    r"\b(?:would|could|should|might|you can|one can|you may|written as|"
    r"output|result|response|returns?)\b", re.IGNORECASE)
# What makes the lead-in of a frame recognised by its shape alone something other than a call
# made, whatever it ends with: a hypothetical ("If I had access I would run"), a question
# (the model asks before it acts), or a quoted or injected instruction ("The page says:",
# "SYSTEM OVERRIDE:", "Ignore previous instructions and run").
_SHAPE_HYPOTHETICAL = re.compile(
    r"\b(?:(?:I|we)\s+(?:would|could|might)|I'd|if (?:I|you|we)|suppose|imagine|"
    r"hypothetical(?:ly)?|pretend)\b|\b(?:would|could|might) be\s*:?\s*\Z", re.IGNORECASE)
_SHAPE_QUESTION = re.compile(r"\?")
_SHAPE_QUOTING = re.compile(
    r"\b(?:overrides?|ignore (?:all |any |the |your )?(?:previous|prior|above|earlier|other)|"
    r"says|said|reads|wrote|writes|contains|quoted?|quoting|instructs?|instructed|injected|"
    r"told me|asks me|asked me|jailbreak)\b", re.IGNORECASE)
_SHAPE_SHOUTED_LABEL = re.compile(r"(?:^|\n)\s*+[A-Z][A-Z _-]{2,40}:")  # "SYSTEM OVERRIDE:"
_SHAPE_LEAD_IN_LINES = 3
# Special tokens and end markers that may sit beside a frame on its line without being prose.
_SPECIAL = r"<[|｜][^<>\n]{0,64}[|｜]>"  # `<|end|>`, `<｜tool▁sep｜>`: a reserved token
# A message's header in the formats that have one (`FormatSpec.message_header`) is not prose:
# a call followed by another message (Harmony's final channel) ends its sentence there.
_HEADER = "|".join(MESSAGE_HEADERS)
_TOKEN = re.compile(_HEADER + "|" + _SPECIAL + r"|</?\|?[a-z_:]{1,32}\|?>")
# Fence lines: three or more backticks or tildes after at most three spaces. Counted with
# str.count (C speed) rather than parsed: inside a block iff an odd number open before it.
_FENCE_LINES = tuple(f"\n{indent}{mark}" for indent in ("", " ", "  ", "   ")
                     for mark in ("```", "~~~"))
_LEAD_IN_CHARS = 300
# How far around a frame its line, paragraph or inline code span is looked for (bounds the
# cost per frame on texts without line breaks).
_WINDOW = 4096
_NON_SPACE = re.compile(r"\S")


def _inline_code(line: str) -> list[tuple[int, int]]:
    """Inline code spans: a run of n backticks up to the next run of exactly n."""
    spans = []
    pos = line.find("`")
    while pos >= 0:
        run = pos
        while run < len(line) and line[run] == "`":
            run += 1
        width = run - pos
        close = line.find("`" * width, run)
        while close >= 0 and close + width < len(line) and line[close + width] == "`":
            close = line.find("`" * width, close + width + 1)  # a longer run does not close
        if close < 0:
            pos = line.find("`", run)
            continue
        spans.append((pos, close + width))
        pos = line.find("`", close + width)
    return spans


def _is_prose(piece: str) -> bool:
    """Words (not just punctuation, separators or special tokens)."""
    if not piece or piece.isspace():
        return False  # (a frame alone on its line: no regex nor loop)
    return any(char.isalnum() for char in _TOKEN.sub("", piece))


class Context:
    """The text around the frames of one model output. Frames must be judged in order."""

    def __init__(self, text: str) -> None:
        self.text = "\n" + text  # every fence line, the first included, follows a newline
        self._lines: tuple[str, ...] | None = None
        self._counted_to = 0
        self._fences = 0

    def _fence_lines(self) -> tuple[str, ...]:
        """The fence-line prefixes worth counting in this text: none when it holds no
        backtick or tilde (memchr), else the unindented fences, and the indented ones too
        where a fence mark stands anywhere but at the start of a line."""
        if self._lines is None:
            text = self.text
            lines = []
            for mark in ("```", "~~~"):
                if text.find(mark[0]) < 0:
                    continue
                total = text.count(mark)
                if total and total == text.count("\n" + mark):
                    lines.append("\n" + mark)
                elif total:
                    lines.extend(line for line in _FENCE_LINES if line.endswith(mark))
            self._lines = tuple(lines)
        return self._lines

    def _fences_before(self, pos: int) -> int:
        """Fence lines starting before `pos` (in the shifted text), counted incrementally."""
        text = self.text
        if pos > self._counted_to:
            self._fences += sum(text.count(line, self._counted_to, pos)
                                for line in self._fence_lines())
            self._counted_to = pos
        return self._fences

    def _block_of(self, start: int, end: int) -> tuple[int, int] | None:
        """The fenced code block around [start, end) (shifted positions), or None."""
        if not self._fence_lines():
            return None
        text = self.text
        line_start = text.rfind("\n", 0, start)  # fence lines before the frame's line start
        if self._fences_before(line_start) % 2 == 0:
            return None
        opening = max(text.rfind(line, 0, line_start) for line in self._fence_lines()) + 1
        closings = [at for line in self._fence_lines()  # a frame may end with the newline
                    if (at := text.find(line, end - 1)) >= 0]
        if not closings:
            return opening, len(text)
        line_end = text.find("\n", min(closings) + 1)
        return opening, len(text) if line_end < 0 else line_end

    def _in_inline_code(self, start: int, end: int, previous_end: int, next_start: int,
                        ) -> bool:
        """Inside an inline code span, which may wrap lines but not leave its paragraph nor
        reach into another frame (backticks inside frames are their payload's)."""
        text = self.text
        first = max(0, start - _WINDOW, previous_end)
        if text.rfind("`", first, start) < 0:
            return False
        blank = text.rfind("\n\n", first, start)
        first = first if blank < 0 else blank + 1
        last = min(len(text), end + _WINDOW, max(next_start, end))
        blank = text.find("\n\n", end, last)
        last = last if blank < 0 else blank
        around = text[first:start] + " " * (end - start) + text[end:last]
        return any(first + a < start and end <= first + b for a, b in _inline_code(around))

    def _lead_in(self, start: int, lines: int = 1) -> str:
        """The prose introducing position `start`: its line before it, or else the last
        non-blank line(s) before it (bounded)."""
        text = self.text
        line_start = text.rfind("\n", max(0, start - _LEAD_IN_CHARS), start) + 1
        same_line = text[line_start:start]
        if same_line.strip():
            return same_line[-_LEAD_IN_CHARS:]
        before = text[max(0, line_start - _LEAD_IN_CHARS):line_start]
        found = [line for line in before.splitlines() if line.strip()]
        return "\n".join(found[-lines:])

    def _fence_is_example(self, fence: int) -> bool:
        """The lines before a fence call it an example."""
        return bool(_STRONG_CUE.search(self._lead_in(fence, lines=2))
                    or self._introduces_example(self._lead_in(fence), by_shape=True))

    @staticmethod
    def _introduces_example(lead_in: str, by_shape: bool) -> bool:
        """A line that ends with a colon and calls what follows an example (or, for a frame
        recognised by shape alone, something hypothetical: "The call would be:")."""
        if not lead_in.rstrip().endswith(":"):
            return False
        return bool(_EXAMPLE_CUE.search(lead_in)
                    or (by_shape and _HYPOTHETICAL_CUE.search(lead_in)))

    def refusal(self, start: int, end: int, previous_end: int, next_start: int,
                by_shape: bool) -> str | None:
        """Why the frame at [start, end) is a mention and not a call, or None.

        `previous_end` and `next_start` bound the neighbouring frames (not prose); frames
        are judged in the order of the text. `by_shape`: the format is recognised by its
        shape alone, with no marker of its own.
        """
        start, end = start + 1, end + 1  # positions in the shifted text
        previous_end, next_start = previous_end + 1, next_start + 1
        block = self._block_of(start, end)
        if block is not None:
            if _NON_SPACE.search(self.text, block[1]):
                return "example_in_code_fence"  # prose follows the fence: it was shown
            if self._fence_is_example(block[0]):
                return "example_in_prose"
            return None
        if self.text.startswith(("```", "~~~"), start) and self._fence_is_example(start):
            return "example_in_prose"  # the frame is the fenced block itself
        if self._in_inline_code(start, end, previous_end, next_start):
            return "inline_code"
        if self._quoted(start, end):
            return "quoted"
        if self._mid_line(start, end, previous_end, next_start, by_shape):
            return "inline_mention"
        lead_in = self._lead_in(start)
        if self._introduces_example(lead_in, by_shape):
            return "example_in_prose"
        return self._shape_lead_in(start) if by_shape else None

    def _shape_lead_in(self, start: int) -> str | None:
        """Why the lead-in of a frame recognised by its shape alone (its line, or the last
        lines before it) makes it no call: a hypothetical, a question, a quoted or injected
        instruction; or None."""
        lead_in = self._lead_in(start, lines=_SHAPE_LEAD_IN_LINES)
        if _SHAPE_QUOTING.search(lead_in) or _SHAPE_SHOUTED_LABEL.search(lead_in):
            return "quoted_instruction"
        if _SHAPE_QUESTION.search(lead_in):
            return "clarifying_question"
        if _SHAPE_HYPOTHETICAL.search(lead_in):
            return "hypothetical"
        return None

    def _quoted(self, start: int, end: int) -> bool:
        """Quotation marks right around the frame (spaces aside): it is quoted, not made."""
        text = self.text
        before = len(text[max(0, start - 8):start].rstrip(" \t")) + max(0, start - 8)
        after = end + len(text[end:end + 8]) - len(text[end:end + 8].lstrip(" \t"))
        return (before > 0 and after < len(text)
                and _QUOTES.get(text[before - 1]) is not None
                and text[after] in _QUOTES[text[before - 1]])

    def _mid_line(self, start: int, end: int, previous_end: int, next_start: int,
                  by_shape: bool) -> bool:
        """The frame stands inside a sentence on its line (neighbouring frames aside):
        words before it, and after it more words or the punctuation that closes a sentence
        ("Earlier I called <frame>."), unless the frame has markers (or special tokens) of
        its own and stands between two sentences, one that ends before it and one that
        starts after it ("Checking Mars. <frame> In this way …"); or it begins the line and
        the sentence goes on after it ("<frame> is how a call looks")."""
        text = self.text
        line_start = text.rfind("\n", max(0, start - _WINDOW), start) + 1
        line_start = max(line_start, previous_end, start - _WINDOW)
        line_end = text.find("\n", end, end + _WINDOW)
        line_end = min(len(text), end + _WINDOW) if line_end < 0 else line_end
        if end <= next_start < line_end:
            line_end = next_start
        before, after = text[line_start:start], text[end:line_end]
        marked = not by_shape or text.startswith(("<|", "<｜"), start)  # Llama 4's <|python_start|>
        if not _is_prose(before):
            return _continues_sentence(after) and (not marked or _predicate_follows(after))
        if not (_is_prose(after) or _closes_sentence(after)):
            return False
        return not (marked and _ends_sentence(before) and _starts_sentence(after))


# A sentence's last character, or a special token (a message's end in Harmony, say).
_SENTENCE_END = re.compile(r"(?:[.!?。！？…]|" + _SPECIAL + r")\s*\Z")
_SPECIAL_START = re.compile(r"\s*<[|｜]")


# Opening quotation marks and the marks that close each.
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "„": "“”", "‚": "‘’", "「": "」",
           "『": "』"}
_CLOSING_PUNCTUATION = ".,;!?)。，；！？）"


def _closes_sentence(after: str) -> bool:
    """The text after a frame starts with the punctuation of the sentence it stands in."""
    return _TOKEN.sub("", after).lstrip()[:1] in tuple(_CLOSING_PUNCTUATION)


_HEADER_AFTER = re.compile(r"\s*+" + _HEADER)  # another message's header, after space


def _continues_sentence(after: str) -> bool:
    """The text after a frame goes on with the sentence the frame began: its first word is
    written in lower case (punctuation such as a dash or a quote before it aside)."""
    if not after or after.isspace():
        return False  # nothing follows on the frame's line (no regex nor loop)
    if _HEADER_AFTER.match(after):
        return False  # another message starts (Harmony's final channel after a call)
    words = _TOKEN.sub("", after[:160]).lstrip()
    first = next((char for char in words[:4] if char.isalnum()), "")
    return first.isalpha() and first.islower()


# The words that make a frame at the start of a line the subject of a sentence about it: the
# auxiliaries and the common verbs; any word ending in -ed (past tense: "returned") too, and
# any in -s (third person: "looks") but the few other words that end so.
_PREDICATES = frozenset({
    "is", "are", "was", "were", "be", "been", "being", "isn't", "aren't", "wasn't", "weren't",
    "'s", "am", "do", "does", "did", "doesn't", "don't", "didn't", "has", "have", "had",
    "hasn't", "haven't", "will", "would", "shall", "should", "can", "could", "may", "might",
    "must", "won't", "wouldn't", "can't", "cannot", "couldn't", "shouldn't", "look", "show",
    "mean", "return", "give", "make", "work", "fail", "run", "read", "print", "produce",
    "output", "become", "represent", "denote", "stand", "appear", "seem", "call", "trigger",
    "invoke", "need", "require", "expect", "take", "accept", "go", "went", "gave", "made",
    "ran", "shown", "given", "taken", "written", "done",
})
_NOT_VERBS = frozenset({
    "as", "plus", "thus", "unless", "this", "its", "perhaps", "besides", "always", "sometimes",
    "afterwards", "towards", "less", "across", "yes", "us",
})
_WOULD = re.compile(r"\b(?:would|could|might)\b", re.IGNORECASE)
_FIRST_WORD = re.compile(r"[^A-Za-z]{0,4}+([A-Za-z']{1,40}+)")


def _predicate_follows(after: str) -> bool:
    """The text after a frame begins with a verb whose subject is the frame, or speaks of
    what would be done ("… then I would answer"): not a call made."""
    words = _TOKEN.sub("", after[:160]).lstrip()
    first = _FIRST_WORD.match(words)
    if first is None or _WOULD.search(words):
        return first is not None
    word = first[1].lower()
    return (word in _PREDICATES or (len(word) > 3 and word.endswith("ed"))
            or (len(word) > 2 and word.endswith("s") and word not in _NOT_VERBS))


def _ends_sentence(before: str) -> bool:
    """A sentence ends right before the frame (wrapper tags such as `<tools>` aside)."""
    tail = before[-80:]
    return (_SENTENCE_END.search(tail) is not None
            or _SENTENCE_END.search(_TOKEN.sub("", tail)) is not None)


def _starts_sentence(after: str) -> bool:
    """A capital (or a letter of a script without case) or a special token starts it
    (wrapper tags such as `</tools>` aside)."""
    if _SPECIAL_START.match(after):
        return True
    first = _TOKEN.sub("", after[:160]).lstrip()[:1]
    return first.isalpha() and not first.islower()
