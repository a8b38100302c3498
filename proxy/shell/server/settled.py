"""A worker's gunicorn settings, each read once (`SettledConfig`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Peers' addresses judged (whether each may set forwarding headers), at most.
TRUSTED_KEPT = 256


class SettledConfig:
    """A worker's gunicorn settings, each read once and then kept: gunicorn's `Config` answers
    every read through `__getattr__` and the setting's own `get()`, some 25 reads a request
    (its parser's limits, the forwarded-header rules, the hooks). A worker's settings never
    change once it is forked: a reload forks new workers, with the new settings."""

    def __init__(self, config: Any) -> None:
        self._config = config
        self._trusted: dict[str, bool] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._config, name)
        self.__dict__[name] = value
        return value

    def trusted_peer(self, host: str, judge: Callable[[], bool]) -> bool:
        """Whether the peer at `host` may set forwarding headers: `judge` (gunicorn's own
        look, which parses the address with `ipaddress` and looks it up in the allowed
        networks, some 28 K instructions a request) asked once per address, as the
        settings it reads are these (the first TRUSTED_KEPT addresses kept)."""
        trusted = self._trusted.get(host)
        if trusted is None:
            trusted = judge()
            if len(self._trusted) < TRUSTED_KEPT:
                self._trusted[host] = trusted
        return trusted
