"""Tests of `proxy/shell/driver`: a request's trip upstream (turns, re-asks, the streamed mode,
faults)."""
