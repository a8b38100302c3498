"""Unit tests of `proxy/toolcalls`: finding, repairing and checking tool calls in text (pure)."""
