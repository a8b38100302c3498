"""Tests of `proxy/base`: settings' value, SSE, ids, JSON depth, bulk decoding."""
