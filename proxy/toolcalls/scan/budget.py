"""What reading one document may cost, across every format that reads it."""

from __future__ import annotations


class Budget:
    """The counters that keep the scans of one document linear on pathological text
    (`<tool_call>{` repeated, a megabyte of unbalanced braces). Each bounds one kind of work;
    past it, that work is not done (a frame or span is simply not found, and its text stays
    text) and `exhausted` says so, reported as `scan_budget_exhausted`."""

    # Candidate frames (opener matches, JSON lines …) one document may cost, across all
    # formats. Far above any real response; it caps Python work on megabytes of openers.
    CANDIDATES = 400
    # Marker occurrences one document may try a pattern at and find no frame, across all
    # formats; markers inside frames already taken cost nothing.
    FAILED_ATTEMPTS = 2_048
    # Patched copies of the text the decoders may read (each costs a copy and a decoder run).
    PATCHES = 16
    # Failures of the C decoders, each of which may have read a long valid prefix (a value's,
    # or a string's) that a call from another opener would read again.
    DECODER_FAILURES = 32
    STRING_FAILURES = 32
    # Steps of the bracket scanner: this many to start with, one more per this many
    # characters of the text, and one per this many characters the decoder read as valid.
    STEPS = 2_000
    STEP_PER_CHARS = 512
    STEP_PER_VALID_CHARS = 32

    def __init__(self, size: int) -> None:
        self.candidates = self.CANDIDATES
        self.failed_attempts = self.FAILED_ATTEMPTS
        self.patches = self.PATCHES
        self.decoder_failures = self.DECODER_FAILURES
        self.string_failures = self.STRING_FAILURES
        self.steps = self.STEPS + size // self.STEP_PER_CHARS
        self.exhausted = False
        self._credited_to = 0  # text before this the decoder has read as valid JSON

    def spend(self) -> bool:
        """Take one candidate; False (and marked exhausted) when none is left."""
        if self.candidates <= 0:
            self.exhausted = True
            return False
        self.candidates -= 1
        return True

    def fail_attempt(self) -> bool:
        """Count a pattern tried at a marker without a frame; False (and marked exhausted)
        when no such attempt is left."""
        if self.failed_attempts <= 0:
            self.exhausted = True
            return False
        self.failed_attempts -= 1
        return True

    def credit(self, start: int, valid_to: int) -> None:
        """Scanner steps for text the decoder has read as valid JSON, each character once: a
        large payload is found, while a pathological text, which fails the decoder at once,
        gains nothing."""
        fresh = valid_to - max(start, self._credited_to)
        if fresh > 0:
            self.steps += fresh // self.STEP_PER_VALID_CHARS
            self._credited_to = valid_to
