"""Tests of `proxy/shell/runtime`: work beside a request and the client's socket."""
