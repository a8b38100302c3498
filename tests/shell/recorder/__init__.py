"""Tests of `proxy/shell/recorder`: the status rings."""
