"""Unit tests of `proxy/fronts`: each API's wire in and out, and their shared rules (pure)."""
