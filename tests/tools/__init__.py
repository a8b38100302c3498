"""Tests of what ships around the proxy: the single file, install, the README's commands, `make
fuzz` and `make soak`."""
