"""Socket checks the proxy makes without blocking: a client that left, a kept-alive upstream
connection that was closed; for any descriptor number (select(2) stops at 1023)."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
from collections.abc import Iterator

import pytest

from proxy.routes import client_gone
from proxy.upstream import readable_now


@contextlib.contextmanager
def _pair(high: bool) -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected socket pair; with `high`, the proxy's end has a descriptor ≥ 1024."""
    a, b = socket.socketpair()
    if not high:
        with a, b:
            yield a, b
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        a.close()
        b.close()
        pytest.skip("the open-files limit is below 1100")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    try:
        fd = os.dup2(a.fileno(), 1050)
        high_end = socket.socket(fileno=fd)
        a.close()
        with high_end, b:
            yield high_end, b
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("high", [False, True])
def test_client_gone_sees_the_peer_close(high):
    with _pair(high) as (proxy_end, client_end):
        environ = {"gunicorn.socket": proxy_end}
        assert not client_gone(environ)
        client_end.sendall(b"x")  # a pipelined byte is not a goodbye
        assert not client_gone(environ)
        assert proxy_end.recv(1) == b"x"
        client_end.close()
        assert client_gone(environ)


@pytest.mark.parametrize("high", [False, True])
def test_readable_now(high):
    with _pair(high) as (mine, peer):
        assert not readable_now(mine)
        peer.sendall(b"y")
        assert readable_now(mine)
        mine.recv(1)
        peer.shutdown(socket.SHUT_WR)
        assert readable_now(mine)  # EOF is readable


def test_client_gone_without_a_socket():
    assert not client_gone({})
