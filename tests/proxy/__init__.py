"""Tests of the top-level `proxy/*.py` modules (sse, config, replay, routing, ids, ...)."""
