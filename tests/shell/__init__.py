"""Tests of `proxy/shell` and the whole server: HTTP, store, replicas, status, faults."""
