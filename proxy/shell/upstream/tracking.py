"""A cancellable call's hold on its connection: the one a buffered call is using, remembered
so that another thread (or greenlet) can cut it, and the upstream stops generating."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from ...base.errors import ProxyError, client_disconnected
from ..runtime.background import native_lock


class ConnectionTracker:
    """Remembers the connection a buffered call is using, so another thread can cut it."""

    def __init__(self) -> None:
        self._lock = native_lock()  # (held to set or read the two, never to cut)
        self._connection: Any = None
        self.cancelled = False
        self._why: ProxyError | None = None  # the turn's own time ran out (None: it left)

    def attach(self, connection: Any) -> None:
        with self._lock:
            self._connection = connection
            cancelled = self.cancelled
        if cancelled:
            self._shutdown(connection)

    def cancel(self, why: ProxyError | None = None) -> None:
        with self._lock:
            self.cancelled, self._why = True, why
            connection = self._connection
        if connection is not None:
            self._shutdown(connection)

    def cancelled_error(self) -> ProxyError:
        """What a call cut by `cancel` ends with: why it was cut, else the client left."""
        return self._why or client_disconnected()

    def detach(self) -> None:
        """The call is over: its connection is back in the pool (or closed), and a late
        cancel must not cut it under the request that uses it next."""
        with self._lock:
            self._connection = None

    @staticmethod
    def _shutdown(connection: Any) -> None:
        sock = getattr(connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
