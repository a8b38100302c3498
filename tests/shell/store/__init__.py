"""Tests of `proxy/shell/store`: the response store's contract, each backend, served."""
