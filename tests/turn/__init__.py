"""Unit tests of `proxy/turn`: one turn from request plan to assembled answer (pure)."""
