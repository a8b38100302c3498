"""The response store the settings name: one backend per URL scheme (`BACKENDS`), opened
from `responses_store_url` (or `responses_store_path`). The interface every backend keeps is
`interface.ResponseStore`; each backend is one module beside it."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...base.config import Config
from .interface import ResponseStore, StoreLimits, default_path


def store_url(config: Config) -> str:
    """The store's URL: `responses_store_url`, else `responses_store_path` (or the default
    path) as a `sqlite://` URL."""
    if config.responses_store_url:
        return config.responses_store_url
    path = config.responses_store_path or default_path()
    return "sqlite://" + path


def _sqlite(url: str, limits: StoreLimits, logger: logging.Logger) -> ResponseStore:
    from .sqlite import SqliteStore

    return SqliteStore(url.removeprefix("sqlite://"), limits, logger)


def _redis(url: str, limits: StoreLimits, logger: logging.Logger) -> ResponseStore:
    from .redis import RedisStore

    return RedisStore(url, limits, logger)


BACKENDS: dict[str, Callable[[str, StoreLimits, logging.Logger], ResponseStore]] = {
    "sqlite": _sqlite,
    "redis": _redis,
    "rediss": _redis,
}


def open_store(config: Config, logger: logging.Logger | None = None) -> ResponseStore:
    """The store the settings name (opened lazily: nothing is created before first use)."""
    url = store_url(config)
    scheme = url.partition("://")[0]
    if scheme not in BACKENDS:
        raise ValueError(f"no response store backend for {scheme!r} URLs")
    return BACKENDS[scheme](url, StoreLimits.of(config), logger or logging.getLogger(__name__))
