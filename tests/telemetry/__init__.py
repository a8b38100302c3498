"""Tests of `proxy/telemetry`: the log line, the metrics, health."""
