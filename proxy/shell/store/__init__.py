"""The response store the settings name: the backends by URL scheme (`BACKENDS`, each
declared beside its code as a `StoreBackend`), and the one `responses_store_url` (or
`responses_store_path`) opens. The interface every backend keeps is
`interface.ResponseStore`."""

from __future__ import annotations

import logging

from ...base.config import Config
from . import redis, sqlite
from .interface import ResponseStore, StoreBackend, StoreLimits

BACKENDS: dict[str, StoreBackend] = {
    scheme: backend for backend in (sqlite.BACKEND, redis.BACKEND) for scheme in backend.schemes
}


def store_url(config: Config) -> str:
    """The store's URL: `responses_store_url`, else `responses_store_path` (or the default
    path) as a `sqlite://` URL."""
    if config.responses_store_url:
        return config.responses_store_url
    path = config.responses_store_path or sqlite.default_path()
    return "sqlite://" + path


def open_store(config: Config, logger: logging.Logger | None = None) -> ResponseStore:
    """The store the settings name (opened lazily: nothing is created before first use)."""
    url = store_url(config)
    scheme = url.partition("://")[0]
    if scheme not in BACKENDS:
        raise ValueError(f"no response store backend for {scheme!r} URLs")
    return BACKENDS[scheme].open(url, StoreLimits.of(config),
                                 logger or logging.getLogger(__name__))
