"""Tests of `proxy/shell/server`: the worker and its settings."""
