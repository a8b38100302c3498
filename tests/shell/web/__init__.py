"""Tests of `proxy/shell/web`: the app, the door, the proxy's own endpoints, the server process."""
